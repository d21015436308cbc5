#!/usr/bin/env bash
# 60th session, call 3: on an H200 the record of main's kernels (.dev/record, 24fea57, against 12-06b), then the A/B
# below; on any other card the A rows' A/B main / cp16 (the parts' keys copied in 16-byte pairs where aligned), the tail
# trace (with the M_PICKED stamp) of main and cp16 alternated, and, when cp16 is faster, the verification of its tree
# (.dev/h66/av, branch cp16) by scripts/device-verify.sh.
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
root=$PWD
ab() {
    K=$root/.dev/h66/k; T=main=$K/main/cake_rt/kernels,cp16=$K/cp16/cake_rt/kernels
    for r in A3:32:16 A2:32:8 A1:32:8 A3:64:8 A3:32:16 A2:32:8; do
        IFS=: read row h n <<< "$r"; echo "== $row H$h"
        CAKE_RT_CACHE_DIR=$root/.dev/h66/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$root timeout 60 \
            python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > /tmp/ab.txt 2>&1
        cat /tmp/ab.txt >> $OUT/ab.txt; grep -E "^tree|outputs|records left|rror" /tmp/ab.txt
    done; echo "[ab $SECONDS s]"
}
case "$name" in
  *H200*) bash .dev/record/record.sh 2>&1 | tee $OUT/record_stdout.txt | tail -80; ab ;;
  *) ab
     for pass in 1 2; do for t in main cp16; do
         dir=$root; [ $t = cp16 ] && dir=$root/.dev/h66/cp16
         (cd $dir && CAKE_RT_CACHE_DIR=$root/.dev/h66/tt_$t CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$dir \
             timeout 60 python3 scripts/dsa-tail-trace A2 A3 A1 --H 32 --runs 5 > $OUT/tail_${t}_$pass.txt 2>&1)
         echo "tail $t pass $pass rc=$? [$SECONDS s]"
     done; done
     for t in main cp16; do echo "== tail $t"; grep -E "^A|call span|issued|picked|parts' keys in|copies waited|histogram and counts|merging CTAs: end" $OUT/tail_${t}_1.txt $OUT/tail_${t}_2.txt | sed 's|^/root/out/||'; done
     verdict=$(python3 - $OUT/ab.txt <<'PY'
import re, sys, math
m = {}
for line in open(sys.argv[1]):
    g = re.match(r"tree (\w+): median of its runners' medians ([\d.]+)", line)
    if g: m.setdefault(g[1], []).append(float(g[2]))
for arm in ("cp16",):
    r = [a / b for a, b in zip(m["main"], m[arm])]
    print(f"{arm}={math.exp(sum(map(math.log, r)) / len(r)):.4f}", end=" ")
PY
)
     echo "A/B geomean main/arm: $verdict [$SECONDS s]"
     g6=$(sed 's/.*cp16=\([0-9.]*\).*/\1/' <<< "$verdict")
     if python3 -c "import sys; sys.exit(0 if float('$g6') >= 1.004 else 1)"; then
       mkdir -p /tmp/av && tar -xzf .dev/h66/av/tree.tgz -C /tmp/av && mkdir -p /tmp/av/.dev/record \
         && tar -xJf .dev/h66/av/cubins.txz -C /tmp/av/.dev/record && ln -s $root/bench/results /tmp/av/bench/results && cd /tmp/av \
         && CAKE_RT_CACHE_DIR=/tmp/av/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat $root/.dev/h66/av/GIT_HASH) PYTHONUNBUFFERED=1 \
            CAKE_RT_QUIET=1 OUT=$OUT/av FINGERPRINTS=bench/results/h200_2026-12-06b_fingerprints.txt \
            timeout $((570 - SECONDS)) bash scripts/device-verify.sh > /dev/null 2>&1
       cat $OUT/av/verify.log
     else echo "cp16 not faster by 0.4%: not verified"; fi ;;
esac
echo "[call3 $SECONDS s]"
