#!/usr/bin/env bash
# dsa36 (issue #12, docs/dsa.md "Next (after the fourteenth session)", item 4): H = 128 in blocks of two queries, two
# product passes a key tile. Stages the A/B kit (the arm: main with the diff applied); the arm's GPU tests and
# sanitizers also cover H = 64's two-pass blocks (main's code: the new GPU test, fingerprint and sanitize cases have
# not run on a GPU yet). CPU only, from /work/main with /work/venv:
#     bash bench/results/dsa_cpu_dsa36_prepare.sh
# then run command "bash .dev/dsa36/call.sh", carry [".dev/dsa36"], timeout_s 250.
set -e
cd ${R:-/work/main}
source /work/venv/bin/activate
python scripts/ab-kit prepare dsa36 --op dsa --tree base=main --tree a=main+bench/results/dsa_cpu_dsa36_arm.diff \
    --rows S1,S2,C1,Z3cp,A3 --heads 64,128 --end 230 --jobs 2
