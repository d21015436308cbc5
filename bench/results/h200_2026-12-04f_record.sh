#!/usr/bin/env bash
# Record 12-04f, the bench half: scripts/device-bench.sh OPS=ssd (both peers in the same process), tree 6329831.
export CAKE_RT_CACHE_DIR=$PWD/.dev/slim2/cubins CAKE_RT_GIT_HASH=$(cat .dev/slim2/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
OUT=$OUT/b OPS=ssd RECORD=bench/results/h200_2026-12-04d ACCURACY=0 timeout 420 bash scripts/device-bench.sh > /dev/null 2>&1
cat "$OUT/b/bench.log"
