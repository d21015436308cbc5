#!/usr/bin/env bash
# Sixteenth session's record kit (CPU, from /work/main with /work/venv): every sm_90a program in .dev/cubins
# (scripts/prewarm), the lineinfo programs of scripts/sanitize-case (its DSA heads 24 / 32 / 64 / 128 and its SSD
# shapes), the spinner and the self-test; .dev/GIT_HASH; .dev/record.sh = h200_2026-12-02i_final_call.sh.
# Then run command "bash .dev/record.sh", carry [".dev"], timeout_s 420.
set -e
cd ${R:-/work/main}
source /work/venv/bin/activate
rm -rf .dev/cubins; mkdir -p .dev
export CAKE_RT_CACHE_DIR=$PWD/.dev/cubins CAKE_RT_QUIET=1 PYTHONPATH=$PWD
python scripts/prewarm sm_90a --jobs 2
# (python -c, not a here-document: warmup's process pool starts its workers from a main module with a path)
CAKE_RT_LINEINFO=1 python -c '
from cake_rt.warmup import warmup, parse_shapes
print(warmup(("dsa",), "sm_90a", jobs=2, shapes=parse_shapes(
    ["heads=64,head_dim=128", "heads=32,head_dim=128", "heads=24,head_dim=64", "heads=128,head_dim=128"])))
print(warmup(("ssd",), "sm_90a", jobs=2, shapes=parse_shapes(
    ["dtype=bfloat16,chunk=64,dstate=64,headdim=64", "dtype=float32,chunk=128,dstate=64,headdim=64",
     "dtype=bfloat16,chunk=128,dstate=128,headdim=64"])))
'
for li in 1 0; do
    CAKE_RT_LINEINFO=$li python -c '
from cake_rt.launch.compile import compile_cubin, load_source
for p in ("bench/spin.cu", "common/selftest.cu"):
    compile_cubin(load_source(p), name=p.split("/")[-1], target="sm_90a")
'
done
git rev-parse --short HEAD > .dev/GIT_HASH
cp bench/results/h200_2026-12-02i_final_call.sh .dev/record.sh
du -sh .dev/cubins
