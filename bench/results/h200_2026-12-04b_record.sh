#!/usr/bin/env bash
# Staged by scripts/record-prepare (RECORD=bench/results/h200_2026-12-04a OPS=dsa) on 89421d0: the bench, then the verification.
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
OUT=$OUT/b OPS=dsa RECORD=bench/results/h200_2026-12-04a ACCURACY=0 timeout 400 bash scripts/device-bench.sh > /dev/null 2>&1
cat "$OUT/b/bench.log"
OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-04a_fingerprints.txt timeout 330 bash scripts/device-verify.sh > /dev/null 2>&1
cat "$OUT/v/verify.log"
