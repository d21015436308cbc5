#!/usr/bin/env bash
# 63rd session: on an H200 the DSA record of main's kernels (.dev/record, 24fea57's kernels = main's) with its
# verification; on any other card the A/B main / rot1 / rot4 (every part
# walks from tile ntiles / 2), then the A rows against the keys' address
# (scripts/dsa-placement --keys: the same keys copied to 16 offsets 64 KiB apart, the records at one offset).
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
  [ -d .dev/record/cubins ] || tar -xJf .dev/record/cubins.txz -C .dev/record || exit 1
  K=$root/.dev/h73/k; T=main=$K/main/cake_rt/kernels,rot1=$K/rot1/cake_rt/kernels,rot4=$K/rot4/cake_rt/kernels
  for r in A2:32:8 A1:32:8 A3:32:16 A2:32:8 A1:32:8; do
      IFS=: read row h n <<< "$r"; echo "== $row H$h"
      CAKE_RT_CACHE_DIR=$root/.dev/h73/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$root timeout 90 \
          python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > /tmp/ab.txt 2>&1
      cat /tmp/ab.txt >> $OUT/ab.txt; grep -E "^tree|outputs|records left|rror" /tmp/ab.txt
  done; echo "[ab $SECONDS s]"
  python3 scripts/dsa-ab-summary $OUT/ab.txt
  offs=$(python3 -c "print(','.join(str(i * 65536) for i in range(16)))")
  for r in A3:32 A2:32 A3:32 A2:32 A1:32; do
      IFS=: read row h <<< "$r"; echo "== $row H$h"
      CAKE_RT_CACHE_DIR=$root/.dev/record/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$root timeout 90 \
          python3 scripts/dsa-placement $row --heads $h --keys $offs --records 0x10 --repeats 10 > /tmp/kp.txt 2>&1
      cat /tmp/kp.txt >> $OUT/keys.txt; cat /tmp/kp.txt
  done; echo "[keys $SECONDS s]" ;;
esac
