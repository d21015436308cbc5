#!/usr/bin/env bash
# dsa37 (issue #12, docs/dsa.md "Next (after the fourteenth session)", item 5): the compact candidate format, 6 bytes a
# candidate (a 32-bit key and a 16-bit id offset from the unit's first key), units of at most 65,536 keys; H = 32 and
# 64 get 4096 candidates a query with compactions in pairs. Written and compiled on the CPU (every DSA program
# spill-free, the CPU tests pass), never run on a GPU: its arm's fingerprints (the same bits expected on every case),
# the DSA GPU tests (with the new test of rows longer than a unit's span) and the sanitizers decide before its bench.
# Stages the A/B kit (the arm: main with the diff applied). CPU only, from /work/main with /work/venv:
#     bash bench/results/dsa_cpu_dsa37_prepare.sh
# then run command "bash .dev/dsa37/call.sh", carry [".dev/dsa37"], timeout_s 280.
set -e
cd ${R:-/work/main}
source /work/venv/bin/activate
python scripts/ab-kit prepare dsa37 --op dsa --tree base=main --tree a=main+bench/results/dsa_cpu_dsa37_arm.diff \
    --rows S1,S2,C1,Z2cp,Z3cp,A3 --heads 32,64 --trace S1:32,S2:64 --end 260 --jobs 2
