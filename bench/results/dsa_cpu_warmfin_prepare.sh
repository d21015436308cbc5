#!/usr/bin/env bash
# Issue #12, docs/dsa.md round 64: the kit of arms warmfin, warmfin2 and warmfin3 (branches: a split first unit's finish
# run once on dummy candidates before its tiles, its code then in the SM's instruction cache; warmfin2 without the warm
# pass's histogram load; warmfin3 with the merge's steps too), staged on the CPU from /work/main with /work/venv
# (about 13 min; needs .dev/record/cubins.txz, from
# `RECORD=bench/results/h200_2026-12-06b OPS=dsa bash scripts/record-prepare`):
#   .dev/h53/k/{main,warmfin,warmfin2,warmfin3}/cake_rt/kernels   the trees' kernels (git archive)
#   .dev/h53/abc/                    the six A rows' sm_90a programs of the trees (dsa-placement --compile-only)
#   .dev/h55/wrec_ARM.txz            main's record cubins with ARM's programs and sanitizer programs compiled in
#   .dev/h55/call.sh                 the call (dsa_cpu_warmfin_call.sh): the A rows, one process a row, then the
#                                    best arm verified when it is faster than main on A3 and A2 at H = 32
# then run command "bash .dev/h55/call.sh", carry [".dev/h53/k", ".dev/h53/abc", ".dev/h55"], timeout_s 420
# (about 40 s of A/B, 250 s of verification).
set -euo pipefail
cd ${R:-/work/main}
source /work/venv/bin/activate
export LD_LIBRARY_PATH=/work/venv/lib/python3.11/site-packages/nvidia/cu13/lib CAKE_RT_QUIET=1
[ -f .dev/record/cubins.txz ] || { echo "stage .dev/record first (scripts/record-prepare, OPS=dsa)"; exit 2; }
ARMS="warmfin warmfin2 warmfin3"
# the branches, where this checkout lacks them: from the committed diffs (warmfin on main, the others on warmfin)
for a in $ARMS; do
    git rev-parse -q --verify $a > /dev/null && continue
    if [ $a = warmfin ]; then base=HEAD; diff=bench/results/dsa_cpu_warmfin_arm.diff
    else base=warmfin; diff=bench/results/dsa_cpu_${a}_over_warmfin.diff; fi
    d=$(mktemp -d); git worktree add -q -b $a $d $base
    git -C $d apply $PWD/$diff && git -C $d commit -qam "arm $a ($diff)"
    git worktree remove $d
done
mkdir -p .dev/h53 .dev/h55
T=
for t in main $ARMS; do
    rm -rf .dev/h53/k/$t; mkdir -p .dev/h53/k/$t
    git archive $t cake_rt/kernels | tar -x -C .dev/h53/k/$t
    T=${T:+$T,}$t=$PWD/.dev/h53/k/$t/cake_rt/kernels
done
for r in A3:32 A3:64 A1:32 A1:64 A2:32 A2:64; do
    CAKE_RT_CACHE_DIR=$PWD/.dev/h53/abc PYTHONPATH=$PWD python scripts/dsa-placement ${r%:*} --heads ${r#*:} --trees $T --compile-only
done
CAKE_RT_CACHE_DIR=$PWD/.dev/h53/abc PYTHONPATH=$PWD python -c '
from cake_rt.launch.compile import compile_cubin, load_source
for p in ("bench/spin.cu", "common/selftest.cu"):
    compile_cubin(load_source(p), name=p.split("/")[-1], target="sm_90a")
'
for ARM in $ARMS; do
    W=$(mktemp -d); git archive $ARM | tar -x -C $W
    V=.dev/h55/wrec_$ARM; rm -rf $V; mkdir -p $V; tar -xJf .dev/record/cubins.txz -C $V
    (cd $W && export CAKE_RT_CACHE_DIR=$OLDPWD/$V/cubins PYTHONPATH=$W && python scripts/prewarm sm_90a --jobs 2 | tail -1 &&
     CAKE_RT_LINEINFO=1 OP=dsa SHAPES="$(python scripts/sanitize-case --warm-shapes dsa)" python -c '
import os
from cake_rt.warmup import warmup, parse_shapes
print(warmup(("dsa",), "sm_90a", jobs=2, shapes=parse_shapes(os.environ["SHAPES"].split())))
')
    rm -rf $W
    tar -cJf $V.txz -C $V cubins && rm -rf $V
done
sed '1,/^#### .dev\/h55\/call.sh/d' bench/results/dsa_cpu_warmfin_call.sh > .dev/h55/call.sh
du -sh .dev/h53/k .dev/h53/abc .dev/h55
