#!/usr/bin/env bash
# The side-stream table again on the recorded tree 87cbf2a (its record call read C1 1.190x with 1 SM held), H = 64,
# 16 repeats (run from the repo root on the device, carry [".dev/cubins", ".dev/GIT_HASH"]).
export CAKE_RT_CACHE_DIR=$PWD/.dev/cubins CAKE_RT_GIT_HASH=$(cat .dev/GIT_HASH) PYTHONPATH=$PWD CAKE_RT_QUIET=1
timeout 200 python3 -m cake_rt bench dsa --no-peers --rows S1,C1,Z3cp,A1 --heads 64 --repeats 16 --warmup 2 --budget-s 0.5 \
    --side-stream 1 --time-limit 150 --json $OUT/side.json --markdown $OUT/side.md > $OUT/side.log 2>&1
