#!/usr/bin/env bash
# Issue #12, docs/dsa.md round 70 (prepared, not run; staged by dsa_cpu_mrow_prepare.sh): the A rows' A/B main / mrow
# (the merge's keep writes the output row itself: no second pass over its buffer, no barrier), one process a row;
# when mrow is faster by 0.3% or more, the verification of its tree (.dev/h70m/mv, branch mrow) by
# scripts/device-verify.sh.
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
root=$PWD
LIMIT=${LIMIT:-560}  # seconds of command the call may take (the verification gets what the A/B leaves)
K=$root/.dev/h70m/k; T=main=$K/main/cake_rt/kernels,mrow=$K/mrow/cake_rt/kernels
for r in A3:32:16 A2:32:8 A1:32:8 A3:64:8 A2:64:8 A3:32:16 A2:32:8; do
    IFS=: read row h n <<< "$r"; echo "== $row H$h"
    CAKE_RT_CACHE_DIR=$root/.dev/h70m/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$root timeout 60 \
        python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > /tmp/ab.txt 2>&1
    cat /tmp/ab.txt >> $OUT/ab.txt; grep -E "^tree|outputs|records left|rror" /tmp/ab.txt
done; echo "[ab $SECONDS s]"
verdict=$(python3 - $OUT/ab.txt <<'PY'
import re, sys, math
m = {}
for line in open(sys.argv[1]):
    g = re.match(r"tree (\w+): median of its runners' medians ([\d.]+)", line)
    if g: m.setdefault(g[1], []).append(float(g[2]))
r = [a / b for a, b in zip(m["main"], m["mrow"])]
print(f"{math.exp(sum(map(math.log, r)) / len(r)):.4f}")
PY
)
echo "A/B geomean main/mrow: $verdict [$SECONDS s]"
if python3 -c "import sys; sys.exit(0 if float('$verdict') >= 1.003 else 1)"; then
  mkdir -p /tmp/mv && tar -xzf .dev/h70m/mv/tree.tgz -C /tmp/mv && mkdir -p /tmp/mv/.dev/record \
    && tar -xJf .dev/h70m/mv/cubins.txz -C /tmp/mv/.dev/record && ln -s $root/bench/results /tmp/mv/bench/results && cd /tmp/mv \
    && CAKE_RT_CACHE_DIR=/tmp/mv/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat $root/.dev/h70m/mv/GIT_HASH) PYTHONUNBUFFERED=1 \
       CAKE_RT_QUIET=1 OUT=$OUT/mv FINGERPRINTS=bench/results/h200_2026-12-06b_fingerprints.txt \
       timeout $((LIMIT - SECONDS)) bash scripts/device-verify.sh > /dev/null 2>&1
  cat $OUT/mv/verify.log
else echo "mrow not faster by 0.3%: not verified"; fi
echo "[call4 $SECONDS s]"
