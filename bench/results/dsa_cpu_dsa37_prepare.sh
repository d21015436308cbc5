#!/usr/bin/env bash
# dsa37 (issue #12, docs/dsa.md "Next (after the fourteenth session)", item 5): the compact candidate format, 6 bytes a
# candidate (a 32-bit key and a 16-bit id offset from the unit's first key), units of at most 65,536 keys; H = 32 and
# 64 get 4096 candidates a query with compactions in pairs. Written and compiled on the CPU (every DSA program
# spill-free, the CPU tests pass), never run on a GPU: its arm's fingerprints (the same bits expected on every case),
# the DSA GPU tests (with the new test of rows longer than a unit's span) and the sanitizers decide before its bench.
# Recreates branch dsa37 from its diff and stages the A/B kit. CPU only, from /work/main with /work/venv:
#     bash bench/results/dsa_cpu_dsa37_prepare.sh
# then run command "bash .dev/dsa37/call.sh", carry [".dev/dsa37"], timeout_s 280.
set -e
R=${R:-/work/main}
source /work/venv/bin/activate
export PATH=/tmp/nvdis/nvidia/cu13/bin:/tmp/cuobj/nvidia/cu13/bin:$PATH NVDISASM_PATH=/tmp/nvdis/nvidia/cu13/bin
if ! git -C $R rev-parse -q --verify dsa37 > /dev/null; then
    git -C $R worktree add -q -b dsa37 /work/wt/dsa37 main
    git -C /work/wt/dsa37 apply $R/bench/results/dsa_cpu_dsa37_arm.diff
    git -C /work/wt/dsa37 commit -qam "dsa37: 6-byte candidates, units of at most 65,536 keys (same bits)"
fi
cd $R && python scripts/ab-kit prepare dsa37 --op dsa --tree base=main --tree a=dsa37 --rows S1,S2,C1,Z2cp,Z3cp,A3 \
    --heads 32,64 --trace S1:32,S2:64 --end 260 --jobs 2
