#!/usr/bin/env bash
# ncu42 (CPU only; issue #12, docs/dsa.md "Next (after the twenty-fourth session)" 0): stages .dev/ncu42 with two trees,
# base = main (BASE=<rev>) and n = main with round 40's no-append ablation (the selection releases each slot and appends
# nothing: the product alone; wrong outputs by design), each with its sm_90a DSA programs at H = 32 and 64 (D = 128) in
# its own cache, and the call bench/results/dsa_cpu_r42_ncu_call.sh as .dev/ncu42/call.sh.
#     bash bench/results/dsa_cpu_r42_ncu_prepare.sh     (repo root; PY=python with CuPy + NVRTC 13.0; ~1-2 min on 2 cores)
# Then: run command "bash .dev/ncu42/call.sh", carry [".dev/ncu42"], timeout_s 300.
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE=${BASE:-main}; PY=${PY:-python3}
V=.dev/ncu42
rm -rf $V; mkdir -p $V
for t in base n; do
    mkdir -p $V/$t
    git archive "$BASE" | tar -x -C $V/$t
    rm -rf $V/$t/bench/results $V/$t/docs
    [ $t = n ] && git apply --directory=$V/$t bench/results/dsa_cpu_r40_ablate_noappend_arm.diff
    (cd $V/$t && CAKE_RT_QUIET=1 CAKE_RT_CACHE_DIR=$PWD/cubins PYTHONPATH=$PWD "$PY" -c "
from cake_rt.warmup import warmup, parse_shapes
print('$t', warmup(('dsa',), 'sm_90a', jobs=2, shapes=parse_shapes(['heads=64,head_dim=128', 'heads=32,head_dim=128'])))")
done
echo "base $BASE $(git rev-parse --short "$BASE"); n = base + dsa_cpu_r40_ablate_noappend_arm.diff" > $V/trees.txt
cp bench/results/dsa_cpu_r42_ncu_call.sh $V/call.sh
cat $V/trees.txt; du -sh $V
