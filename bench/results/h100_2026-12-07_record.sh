#!/usr/bin/env bash
# Staged by scripts/record-prepare (RECORD=bench/results/h200_2026-12-06b FINGERPRINTS=bench/results/h200_2026-12-06b_fingerprints.txt OPS=dsa) on 9cc3591: the bench, then the verification.
[ -d .dev/record/cubins ] || tar -xJf .dev/record/cubins.txz -C .dev/record || exit 1
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
OUT=$OUT/b OPS=dsa RECORD=bench/results/h200_2026-12-06b ACCURACY=0 timeout 400 bash scripts/device-bench.sh > /dev/null 2>&1
cat "$OUT/b/bench.log"
OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-06b_fingerprints.txt timeout 330 bash scripts/device-verify.sh > /dev/null 2>&1
cat "$OUT/v/verify.log"
