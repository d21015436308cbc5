#!/usr/bin/env bash
# 62nd session: on an H200 the DSA record of main's kernels (.dev/record, 24fea57 = main's) with its verification;
# on any other card the mrow A/B (.dev/h70m/call4.sh).
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
case "$name" in
*H200*)
  [ -d .dev/record/cubins ] || tar -xJf .dev/record/cubins.txz -C .dev/record || exit 1
  export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
  OUT=$OUT/b OPS=dsa RECORD=bench/results/h200_2026-12-06b ACCURACY=0 timeout 280 bash scripts/device-bench.sh > /dev/null 2>&1
  cat "$OUT/b/bench.log"; echo "[bench $SECONDS s]"
  OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-06b_fingerprints.txt timeout $((560 - SECONDS)) bash scripts/device-verify.sh > /dev/null 2>&1
  cat "$OUT/v/verify.log"; echo "[record $SECONDS s]" ;;
*) LIMIT=560 bash .dev/h70m/call4.sh ;;
esac
