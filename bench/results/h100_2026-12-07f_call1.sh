#!/usr/bin/env bash
# 60th session, call 1: on an H200 the record of main's kernels (.dev/record, 24fea57, against 12-06b); on any other card
# the A rows' A/B main / cpshfl (copy_parts' part bounds by shuffle), the tail trace of both alternated, and, when the
# arm is not slower, the verification of its tree (.dev/h64/av) by scripts/device-verify.sh.
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
case "$name" in
  *H200*) bash .dev/record/record.sh 2>&1 | tee $OUT/record_stdout.txt | tail -80 ;;
  *) K=$PWD/.dev/h64/k; T=main=$K/main/cake_rt/kernels,arm=$K/cpshfl/cake_rt/kernels
     for r in A3:32:16 A2:32:8 A1:32:8 A3:64:8 A3:32:16 A2:32:8; do
         IFS=: read row h n <<< "$r"; echo "== $row H$h"
         CAKE_RT_CACHE_DIR=$PWD/.dev/h64/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD timeout 60 \
             python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > /tmp/ab.txt 2>&1
         cat /tmp/ab.txt >> $OUT/ab.txt; grep -E "^tree|outputs|records left|rror" /tmp/ab.txt
     done; echo "[ab $SECONDS s]"
     root=$PWD
     for pass in 1 2; do for t in main arm; do
         dir=$root; [ $t = arm ] && dir=$root/.dev/h64/arm
         (cd $dir && CAKE_RT_CACHE_DIR=$root/.dev/h64/tt_$t CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$dir \
             timeout 60 python3 scripts/dsa-tail-trace A2 A3 --H 32 --runs 5 > $OUT/tail_${t}_$pass.txt 2>&1)
         echo "tail $t pass $pass rc=$? [$SECONDS s]"
     done; done
     for t in main arm; do echo "== tail $t"; grep -E "^A|call span|copies issued|parts' keys in|copies waited|merging CTAs: end" $OUT/tail_${t}_1.txt $OUT/tail_${t}_2.txt; done
     verdict=$(python3 - $OUT/ab.txt <<'PY'
import re, sys, math
m = {}
for line in open(sys.argv[1]):
    g = re.match(r"tree (\w+): median of its runners' medians ([\d.]+)", line)
    if g: m.setdefault(g[1], []).append(float(g[2]))
r = [a / b for a, b in zip(m["main"], m["arm"])]
geo = math.exp(sum(map(math.log, r)) / len(r))
print(f"{geo:.4f}")
PY
)
     echo "A/B geomean main/arm $verdict [$SECONDS s]"
     if python3 -c "import sys; sys.exit(0 if float('$verdict') >= 1.0 else 1)"; then
       mkdir -p /tmp/av && tar -xzf .dev/h64/av/tree.tgz -C /tmp/av && mkdir -p /tmp/av/.dev/record \
         && tar -xJf .dev/h64/av/cubins.txz -C /tmp/av/.dev/record && ln -s $root/bench/results /tmp/av/bench/results && cd /tmp/av \
         && CAKE_RT_CACHE_DIR=/tmp/av/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat $root/.dev/h64/av/GIT_HASH) PYTHONUNBUFFERED=1 \
            CAKE_RT_QUIET=1 OUT=$OUT/av FINGERPRINTS=bench/results/h200_2026-12-06b_fingerprints.txt \
            timeout $((570 - SECONDS)) bash scripts/device-verify.sh > /dev/null 2>&1
       cat $OUT/av/verify.log
     else echo "arm slower: not verified"; fi ;;
esac
echo "[call1 $SECONDS s]"
