#!/usr/bin/env bash
# Thirteenth session's record call: the DSA suite (its kernel changed: round 29), the SSD per-row host time, then the
# verification (fingerprints against 12-02e: every bit the same). The SSD kernels are the 12-02e record's SASS (the tidy
# 3625e82, proven by scripts/sass-diff), so its SSD tables stand. Run from the device's repo root.
cd .dev/final
export CAKE_RT_CACHE_DIR=$PWD/.cubins CAKE_RT_GIT_HASH=$(cat GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
mkdir -p "$OUT/v" "$OUT/b"; B=$(mktemp -d)
echo "[$SECONDS s] dsa bench"
PYTHONPATH=$PWD timeout 170 python3 -m cake_rt bench dsa --no-peers --repeats 10 --warmup 2 --budget-s 0.5 --side-stream 1 \
    --time-limit 120 --json $B/dsa.json --markdown $B/dsa.md --compare bench/results/h200_2026-12-02e_dsa.json > $B/dsa.log 2>&1
echo "bench dsa rc=$?"; grep "^| " $B/dsa.md | cut -c1-180 | head -70
echo "[$SECONDS s] host time of the SSD bench rows"
PYTHONPATH=$PWD timeout 45 python3 scripts/host_time.py --bench-rows --only ssd --entry-costs > $B/host_rows.log 2>&1
echo "rc=$?"; tail -25 $B/host_rows.log
tar czf "$OUT/b/bench.tgz" -C $B .
echo "[$SECONDS s] verify"
OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-02e_fingerprints.txt bash scripts/device-verify.sh > /dev/null 2>&1
cat "$OUT/v/verify.log"
echo "[$SECONDS s] done"
