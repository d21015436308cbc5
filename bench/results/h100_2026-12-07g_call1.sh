#!/usr/bin/env bash
# 61st session, call 1: on an H200 the record of skipb's tree (its staged kit .dev/h70/av: bench against 12-06b, then
# the verification), then the A/B below; on any other card the A rows' A/B main / skipr / skipb (a radix pass skips the rounds whose keys all lie past
# n: skipr a warp's, skipb the block's), the tail
# trace (with the M_PICKED stamp) of main and skipb alternated, and, when skipb is faster, the verification of its tree
# (.dev/h70/av, branch skipb) by scripts/device-verify.sh.
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
root=$PWD
ab() {
    K=$root/.dev/h70/k; T=main=$K/main/cake_rt/kernels,skipr=$K/skipr/cake_rt/kernels,skipb=$K/skipb/cake_rt/kernels
    for r in A3:32:16 A2:32:8 A1:32:8 A3:64:8 A3:32:16 A2:32:8; do
        IFS=: read row h n <<< "$r"; echo "== $row H$h"
        CAKE_RT_CACHE_DIR=$root/.dev/h70/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$root timeout 60 \
            python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > /tmp/ab.txt 2>&1
        cat /tmp/ab.txt >> $OUT/ab.txt; grep -E "^tree|outputs|records left|rror" /tmp/ab.txt
    done; echo "[ab $SECONDS s]"
}
unpack_av() {  # skipb's tree and its staged cubins (scripts/record-prepare) in /tmp/av
    mkdir -p /tmp/av && tar -xzf $root/.dev/h70/av/tree.tgz -C /tmp/av && mkdir -p /tmp/av/.dev/record \
      && tar -xJf $root/.dev/h70/av/cubins.txz -C /tmp/av/.dev/record && cp $root/.dev/h70/av/record.sh $root/.dev/h70/av/GIT_HASH /tmp/av/.dev/record/ \
      && ln -s $root/bench/results /tmp/av/bench/results
}
case "$name" in
  *H200*) unpack_av && (cd /tmp/av && OUT=$OUT/rec bash .dev/record/record.sh 2>&1 | tee $OUT/record_stdout.txt | tail -80)
     [ $SECONDS -lt 480 ] && ab ;;
  *) ab
     for pass in 1 2; do for t in main skipb; do
         dir=$root; [ $t = skipb ] && dir=$root/.dev/h70/skipb
         (cd $dir && CAKE_RT_CACHE_DIR=$root/.dev/h70/tt_$t CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$dir \
             timeout 60 python3 scripts/dsa-tail-trace A2 A3 A1 --H 32 --runs 5 > $OUT/tail_${t}_$pass.txt 2>&1)
         echo "tail $t pass $pass rc=$? [$SECONDS s]"
     done; done
     for t in main skipb; do echo "== tail $t"; grep -E "^A|call span|k-th key|    keep |exact selection|merging CTAs: end" $OUT/tail_${t}_1.txt $OUT/tail_${t}_2.txt | sed 's|^/root/out/||'; done
     verdict=$(python3 - $OUT/ab.txt <<'PY'
import re, sys, math
m = {}
for line in open(sys.argv[1]):
    g = re.match(r"tree (\w+): median of its runners' medians ([\d.]+)", line)
    if g: m.setdefault(g[1], []).append(float(g[2]))
for arm in ("skipr", "skipb"):
    r = [a / b for a, b in zip(m["main"], m[arm])]
    print(f"{arm}={math.exp(sum(map(math.log, r)) / len(r)):.4f}", end=" ")
PY
)
     echo "A/B geomean main/arm: $verdict [$SECONDS s]"
     g6=$(sed 's/.*skipb=\([0-9.]*\).*/\1/' <<< "$verdict")
     if python3 -c "import sys; sys.exit(0 if float('$g6') >= 1.003 else 1)"; then
       unpack_av && cd /tmp/av \
         && CAKE_RT_CACHE_DIR=/tmp/av/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat $root/.dev/h70/av/GIT_HASH) PYTHONUNBUFFERED=1 \
            CAKE_RT_QUIET=1 OUT=$OUT/av FINGERPRINTS=bench/results/h200_2026-12-06b_fingerprints.txt \
            timeout $((570 - SECONDS)) bash scripts/device-verify.sh > /dev/null 2>&1
       cat $OUT/av/verify.log
     else echo "skipb not faster by 0.3%: not verified"; fi ;;
esac
echo "[call1 $SECONDS s]"
