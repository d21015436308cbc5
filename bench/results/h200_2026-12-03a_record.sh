#!/usr/bin/env bash
# Staged by scripts/record-prepare (OPS=dsa) on 0c26d1f (main + round 36's weights in registers): the DSA suite (arms
# alternated, the side-stream table in 3 processes a row) compared with 12-02k, then the DSA fingerprints against
# 12-02j's (the A/B call on the same kernel ran the DSA GPU tests and the three sanitizers).
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
OUT=$OUT/b OPS=dsa RECORD=bench/results/h200_2026-12-02k ACCURACY=0 timeout 330 bash scripts/device-bench.sh > /dev/null 2>&1
cat "$OUT/b/bench.log"
mkdir -p "$OUT/v"
PYTHONPATH=$PWD timeout 60 python3 scripts/dsa-fingerprint > "$OUT/v/fingerprints.txt" 2> "$OUT/v/fingerprints.err"
echo "fingerprints: $(wc -l < "$OUT/v/fingerprints.txt") lines, $(grep -F -x -c -f "$OUT/v/fingerprints.txt" bench/results/h200_2026-12-02j_fingerprints.txt) equal to a line of 12-02j's"
