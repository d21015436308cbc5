#!/usr/bin/env bash
# 59th session: on an H200 the record of main's kernels (.dev/record, 877e379, against 12-06b); on any other card the
# A rows' A/B main / scanfold and the verification of branch scanfold (1fb6d47: block_excl_scan_n, owned_split_top; .dev/sf) by scripts/device-verify.sh.
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
case "$name" in
  *H200*) bash .dev/record/record.sh 2>&1 | tee $OUT/record_stdout.txt | tail -80 ;;
  *) K=$PWD/.dev/h63/k; T=main=$K/main/cake_rt/kernels,sf=$K/sf/cake_rt/kernels
     for r in A3:32:16 A3:64:8 A2:32:8 A1:32:8 A3:32:16; do
         IFS=: read row h n <<< "$r"; echo "== $row H$h"
         CAKE_RT_CACHE_DIR=$PWD/.dev/h63/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD timeout 60 \
             python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > /tmp/ab.txt 2>&1
         cat /tmp/ab.txt >> $OUT/ab.txt; grep -E "^tree|outputs|records left|rror" /tmp/ab.txt
     done; echo "[ab $SECONDS s]"
     root=$PWD; mkdir -p /tmp/sf && tar -xzf .dev/sf/tree.tgz -C /tmp/sf && mkdir -p /tmp/sf/.dev/record \
       && tar -xJf .dev/sf/cubins.txz -C /tmp/sf/.dev/record && cd /tmp/sf \
       && CAKE_RT_CACHE_DIR=/tmp/sf/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat $root/.dev/sf/GIT_HASH) PYTHONUNBUFFERED=1 \
          CAKE_RT_QUIET=1 OUT=$OUT/sfv FINGERPRINTS=bench/results/h200_2026-12-06b_fingerprints.txt \
          timeout 500 bash scripts/device-verify.sh > /dev/null 2>&1
     cat $OUT/sfv/verify.log ;;
esac
echo "[call3 $SECONDS s]"
