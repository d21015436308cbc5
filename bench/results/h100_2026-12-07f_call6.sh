#!/usr/bin/env bash
# 60th session, call 6: on an H200 the DSA bench of main's kernels (.dev/record's cubins, 24fea57; scripts/device-bench.sh
# OPS=dsa against 12-06b) and the DSA fingerprints (main's kernels were verified on an H100: round 68), then the skipr
# A/B; on any other card .dev/h67/call5.sh (the skipr A/B, tail traces, and its verification when it is faster).
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
case "$name" in
  *H200*)
    root=$PWD
    [ -d .dev/record/cubins ] || tar -xJf .dev/record/cubins.txz -C .dev/record || exit 1
    (export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
     OUT=$OUT/b OPS=dsa RECORD=bench/results/h200_2026-12-06b ACCURACY=0 timeout 330 bash scripts/device-bench.sh > /dev/null 2>&1
     cat "$OUT/b/bench.log"
     PYTHONPATH=$PWD timeout 90 python3 scripts/dsa-fingerprint > $OUT/fp_dsa.txt 2>&1; echo "dsa fingerprints rc=$?")
    grep -v "^#" bench/results/h200_2026-12-06b_fingerprints.txt | sort > /tmp/old; grep -v "^#" $OUT/fp_dsa.txt | sort > /tmp/new
    echo "this run's DSA lines not in 12-06b's fingerprints: $(comm -13 /tmp/old /tmp/new | wc -l) of $(wc -l < /tmp/new)"
    echo "[bench $SECONDS s]"
    if [ $SECONDS -lt 480 ]; then
      K=$root/.dev/h67/k; T=main=$K/main/cake_rt/kernels,skipr=$K/skipr/cake_rt/kernels
      for r in A3:32:16 A2:32:8 A1:32:8 A3:64:8; do
        IFS=: read row h n <<< "$r"; echo "== $row H$h"
        CAKE_RT_CACHE_DIR=$root/.dev/h67/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$root timeout 40 \
            python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > /tmp/ab.txt 2>&1
        cat /tmp/ab.txt >> $OUT/ab.txt; grep -E "^tree|outputs|records left|rror" /tmp/ab.txt
      done
    fi ;;
  *) bash .dev/h67/call5.sh ;;
esac
echo "[call6 $SECONDS s]"
