#!/usr/bin/env bash
# 63rd session: on an H200 the DSA record of main's kernels (.dev/record, 24fea57's kernels = main's) with its
# verification; on any other card the A/B of arm rot (a split part walks its tiles from a rotated start; DSA_ROT 1: part
# p from tile p % ntiles, 2: 3p % ntiles, 3: odd parts from ntiles / 2) against main, one process a row.
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
root=$PWD
case "$name" in
*H200*)
  [ -d .dev/record/cubins ] || tar -xJf .dev/record/cubins.txz -C .dev/record || exit 1
  export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
  OUT=$OUT/b OPS=dsa RECORD=bench/results/h200_2026-12-06b ACCURACY=0 timeout 280 bash scripts/device-bench.sh > /dev/null 2>&1
  cat "$OUT/b/bench.log"; echo "[bench $SECONDS s]"
  OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-06b_fingerprints.txt timeout $((560 - SECONDS)) bash scripts/device-verify.sh > /dev/null 2>&1
  cat "$OUT/v/verify.log"; echo "[record $SECONDS s]" ;;
*)
  K=$root/.dev/h73/k
  T=main=$K/main/cake_rt/kernels,rot1=$K/rot1/cake_rt/kernels,rot2=$K/rot2/cake_rt/kernels,rot3=$K/rot3/cake_rt/kernels
  for r in A3:32:16 A2:32:8 A1:32:8 A3:64:8 A2:64:8 A3:32:16 A2:32:8; do
      IFS=: read row h n <<< "$r"; echo "== $row H$h"
      CAKE_RT_CACHE_DIR=$root/.dev/h73/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$root timeout 90 \
          python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > /tmp/ab.txt 2>&1
      cat /tmp/ab.txt >> $OUT/ab.txt; grep -E "^tree|outputs|records left|rror" /tmp/ab.txt
  done; echo "[ab $SECONDS s]"
  python3 scripts/dsa-ab-summary $OUT/ab.txt ;;
esac
