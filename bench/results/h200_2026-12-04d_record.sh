#!/usr/bin/env bash
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
OUT=$OUT/b OPS=ssd RECORD=bench/results/h200_2026-12-04c ACCURACY=0 timeout 560 bash scripts/device-bench.sh > /dev/null 2>&1
cat "$OUT/b/bench.log"
