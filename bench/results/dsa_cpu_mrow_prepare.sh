#!/usr/bin/env bash
# Issue #12, docs/dsa.md round 70: the kit of arm mrow (the merge's keep writes the query's output row itself, then pads
# it: no second pass over its buffer, no barrier), staged on the CPU from /work/main with /work/venv (about 10 min):
#   branch mrow                       from dsa_cpu_mrow_arm.diff on main, where this checkout lacks it
#   .dev/h70m/k/{main,mrow}/cake_rt/kernels   the trees' kernels (git archive)
#   .dev/h70m/abc/                    the A rows' sm_90a programs of both trees (dsa-placement --compile-only)
#   .dev/h70m/mv/                     mrow's record kit (scripts/record-prepare in a worktree: cubins.txz, GIT_HASH,
#                                     record.sh) and its tree (tree.tgz, bench/results left out)
#   .dev/h70m/call4.sh                the call (dsa_cpu_mrow_call.sh): the A rows, one process a row, then mrow's
#                                     verification when its geomean is 1.003x or more
# then run command "LIMIT=560 bash .dev/h70m/call4.sh", carry [".dev/h70m"] (~15 MB; with more the call passes the
# 64 MiB limit), timeout_s 570 (about 30 s of A/B, 280 s of verification).
set -euo pipefail
cd ${R:-/work/main}
source /work/venv/bin/activate
export LD_LIBRARY_PATH=/work/venv/lib/python3.11/site-packages/nvidia/cu13/lib CAKE_RT_QUIET=1
if ! git rev-parse -q --verify mrow > /dev/null; then
    d=$(mktemp -d); git worktree add -q -b mrow $d HEAD
    git -C $d apply $PWD/bench/results/dsa_cpu_mrow_arm.diff && git -C $d commit -qam "arm mrow (dsa_cpu_mrow_arm.diff)"
    git worktree remove $d
fi
K=.dev/h70m/k; mkdir -p .dev/h70m
for t in main mrow; do rm -rf $K/$t; mkdir -p $K/$t; git archive $t cake_rt/kernels | tar -x -C $K/$t; done
T=main=$PWD/$K/main/cake_rt/kernels,mrow=$PWD/$K/mrow/cake_rt/kernels
for r in A3:32 A2:32 A1:32 A3:64 A2:64; do
    CAKE_RT_CACHE_DIR=$PWD/.dev/h70m/abc PYTHONPATH=$PWD python scripts/dsa-placement ${r%:*} --heads ${r#*:} --trees $T --compile-only
done
d=$(mktemp -d); git worktree add -q --detach $d mrow
(cd $d && RECORD=bench/results/h200_2026-12-06b OPS=dsa bash scripts/record-prepare)
A=$PWD/.dev/h70m/mv; rm -rf $A; mkdir -p $A
cp $d/.dev/record/cubins.txz $d/.dev/record/GIT_HASH $d/.dev/record/record.sh $A/
git -C $d archive HEAD -- . ':!bench/results' | gzip > $A/tree.tgz
git worktree remove --force $d
cp bench/results/dsa_cpu_mrow_call.sh .dev/h70m/call4.sh
du -sh .dev/h70m
