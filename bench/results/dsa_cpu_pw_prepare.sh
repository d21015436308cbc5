#!/usr/bin/env bash
# Issue #12, docs/dsa.md round 62 "Next": the kit of arm pw (branch pw: a split part's keep writes its workspace row
# from registers through the merge's own select_keep) against main and pk, staged on the CPU in .dev/h53:
#   k/{main,pw,pk}/cake_rt/kernels   the trees' kernels (git archive of main, pw, pk)
#   abc/                             the A rows' sm_90a programs of the three trees (dsa-placement --compile-only)
#   wrec.txz                         main's record cubins (.dev/record, scripts/record-prepare) with pw's DSA programs
#                                    and its sanitizer programs compiled in (for verify_pw.sh)
#   ncu/                             main's lineinfo programs at H = 32, D = 128 and ncu.sh (A3's source counters)
#   ../tail2/                        main's --merge-twice trace programs (dsa_cpu_tail_prepare.sh TWICE=1)
#   call4.sh, verify_pw.sh           the call: the A rows in one process a row (records spread), ncu of A3 on main, then
#                                    pw verified when it is faster than main on A3 and A2 at H = 32
# CPU, from /work/main with /work/venv (about 5 min):  bash bench/results/dsa_cpu_pw_prepare.sh
# then run command "bash .dev/h53/call4.sh", carry [".dev/h53/k", ".dev/h53/abc", ".dev/h53/wrec.txz", ".dev/h53/ncu",
# ".dev/tail2", ".dev/h53/call4.sh", ".dev/h53/verify_pw.sh"], timeout_s 420 (~320 s of command).
set -euo pipefail
cd ${R:-/work/main}
source /work/venv/bin/activate
export LD_LIBRARY_PATH=/work/venv/lib/python3.11/site-packages/nvidia/cu13/lib CAKE_RT_QUIET=1
[ -f .dev/record/cubins.txz ] || { echo "stage .dev/record first (scripts/record-prepare, OPS=dsa)"; exit 2; }
mkdir -p .dev/h53
for t in main pw pk; do
    rm -rf .dev/h53/k/$t; mkdir -p .dev/h53/k/$t
    git archive $t cake_rt/kernels | tar -x -C .dev/h53/k/$t
done
T=main=$PWD/.dev/h53/k/main/cake_rt/kernels,pw=$PWD/.dev/h53/k/pw/cake_rt/kernels,pk=$PWD/.dev/h53/k/pk/cake_rt/kernels
for r in A3:32 A3:64 A1:32 A1:64 A2:32 A2:64; do
    CAKE_RT_CACHE_DIR=$PWD/.dev/h53/abc PYTHONPATH=$PWD python scripts/dsa-placement ${r%:*} --heads ${r#*:} --trees $T --compile-only
done
CAKE_RT_CACHE_DIR=$PWD/.dev/h53/abc PYTHONPATH=$PWD python -c '
from cake_rt.launch.compile import compile_cubin, load_source
for p in ("bench/spin.cu", "common/selftest.cu"):
    compile_cubin(load_source(p), name=p.split("/")[-1], target="sm_90a")
'
W=$(mktemp -d); git archive pw | tar -x -C $W
rm -rf .dev/h53/wrec; mkdir -p .dev/h53/wrec; tar -xJf .dev/record/cubins.txz -C .dev/h53/wrec
(cd $W && export CAKE_RT_CACHE_DIR=/work/main/.dev/h53/wrec/cubins PYTHONPATH=$W && python scripts/prewarm sm_90a --jobs 2 &&
 CAKE_RT_LINEINFO=1 OP=dsa SHAPES="$(python scripts/sanitize-case --warm-shapes dsa)" python -c '
import os
from cake_rt.warmup import warmup, parse_shapes
print(warmup(("dsa",), "sm_90a", jobs=2, shapes=parse_shapes(os.environ["SHAPES"].split())))
')
rm -rf $W
tar -cJf .dev/h53/wrec.txz -C .dev/h53/wrec cubins && rm -rf .dev/h53/wrec
TWICE=1 bash bench/results/dsa_cpu_tail_prepare.sh  # .dev/tail2: main's merge run twice
rm -rf .dev/h53/ncu; mkdir -p .dev/h53/ncu
CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$PWD/.dev/h53/ncu/cubins PYTHONPATH=$PWD python -c '
from cake_rt.warmup import warmup, parse_shapes
print(warmup(("dsa",), "sm_90a", jobs=2, shapes=parse_shapes(["heads=32,head_dim=128"])))
'
sed -n '/^#### .dev\/h53\/ncu\/ncu.sh/,$p' bench/results/dsa_cpu_pw_call.sh | sed '1d' > .dev/h53/ncu/ncu.sh
sed -n '/^#### .dev\/h53\/call4.sh/,/^#### .dev\/h53\/verify_pw.sh/p' bench/results/dsa_cpu_pw_call.sh | sed '1d;$d' > .dev/h53/call4.sh
sed -n '/^#### .dev\/h53\/verify_pw.sh/,/^#### .dev\/h53\/ncu\/ncu.sh/p' bench/results/dsa_cpu_pw_call.sh | sed '1d;$d' > .dev/h53/verify_pw.sh
mkdir -p .dev/h54  # the shorter calls (bench/results/dsa_cpu_pw_calls_short.sh), for a session with little device time
for f in call5 rec_pw; do
    sed -n "/^#### .dev\/h54\/$f.sh/,/^#### /p" bench/results/dsa_cpu_pw_calls_short.sh | sed '1d;/^#### /d' > .dev/h54/$f.sh
done
du -sh .dev/h53/k .dev/h53/abc .dev/h53/wrec.txz .dev/h53/ncu .dev/tail2
