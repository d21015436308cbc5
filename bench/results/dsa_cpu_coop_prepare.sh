#!/usr/bin/env bash
# Issue #12, docs/dsa.md round 73: the kit of arm coop (a cooperative launch in which every one-query split part finishes
# its block's selection with the others: no merge), staged on the CPU from /work/main with /work/venv (~10 min):
#   branch coop                the arm (dsa_cpu_coop_arm.diff on main), where this checkout lacks it
#   .dev/record/               main's record kit (scripts/record-prepare OPS=dsa against 12-06b), unless it is there
#   .dev/h73/coop/             coop's record kit (cubins.txz, GIT_HASH) and its tree (tree.tgz, bench/results left out)
#   .dev/h73/call3.sh          the call (dsa_cpu_coop_call.sh): the A rows, main / coop / coop / main processes a row,
#                              then coop's verification when it is 0.3% faster and 300 s are left, then the
#                              degenerate-keys probe (dsa_cpu_keys_probe.py)
# then run command "LIMIT=540 bash .dev/h73/call3.sh", carry [".dev/record", ".dev/h73/coop", ".dev/h73/call3.sh"]
# (~11 MB beside the ~45 MB tree), timeout_s 600; ROWS="A3:32:16 A2:32:8 ..." narrows the A/B.
set -euo pipefail
cd ${R:-/work/main}
source /work/venv/bin/activate
export LD_LIBRARY_PATH=/work/venv/lib/python3.11/site-packages/nvidia/cu13/lib CAKE_RT_QUIET=1
if ! git rev-parse -q --verify coop > /dev/null; then
    d=$(mktemp -d); git worktree add -q -b coop $d HEAD
    git -C $d apply $PWD/bench/results/dsa_cpu_coop_arm.diff && git -C $d commit -qam "arm coop (dsa_cpu_coop_arm.diff)"
    git worktree remove $d
fi
[ -f .dev/record/cubins.txz ] || RECORD=bench/results/h200_2026-12-06b OPS=dsa bash scripts/record-prepare
d=$(mktemp -d); git worktree add -q --detach $d coop
(cd $d && RECORD=bench/results/h200_2026-12-06b OPS=dsa bash scripts/record-prepare)
A=$PWD/.dev/h73/coop; rm -rf $A; mkdir -p $A
cp $d/.dev/record/cubins.txz $d/.dev/record/GIT_HASH $A/
git -C $d archive HEAD -- . ':!bench/results' | gzip > $A/tree.tgz
git worktree remove --force $d
cp bench/results/dsa_cpu_coop_call.sh .dev/h73/call3.sh
du -sh .dev/h73/coop .dev/record
