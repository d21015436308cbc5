#!/usr/bin/env bash
# The eleventh session's last call: scripts/device-verify.sh on the merged tree (self-test, fingerprints against the
# 12-02c record, the GPU suite, compute-sanitizer, host and compile times). Stage first: LAST=bench/results/h200_2026-12-02c bash .dev/stage.sh
R=$PWD
cd "$R/.dev/final"
export CAKE_RT_CACHE_DIR=$PWD/.cubins CAKE_RT_GIT_HASH=$(cat GIT_HASH) PYTHONPATH=$PWD
mkdir -p "$OUT/v"
echo "[$SECONDS s] verify $(cat GIT_HASH)"
OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-02c_fingerprints.txt bash scripts/device-verify.sh > /dev/null 2>&1
cat "$OUT/v/verify.log"
echo "[$SECONDS s] bench ssd rows (no peers) against the 12-02c record"
mkdir -p "$OUT/b"
timeout 60 python3 -m cake_rt bench ssd --no-peers --repeats 10 --warmup 2 --budget-s 0.5 --rows seed,m2-2.7b-b8,varlen,short \
  --json "$OUT/b/ssd_rows.json" --markdown "$OUT/b/ssd_rows.md" --compare bench/results/h200_2026-12-02c_ssd.json > "$OUT/b/ssd_rows.log" 2>&1
echo "bench rc=$?"; grep "^| " "$OUT/b/ssd_rows.md" | cut -c1-150
echo "[$SECONDS s] done"
