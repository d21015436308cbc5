#!/usr/bin/env bash
# Sixteenth session's record call (run from the repo root on the device, carry [".dev"]): the DSA suite (round 33
# changed every sm_90a DSA program: windowed candidate ids), then the verification (fingerprints against 12-02h: every
# recorded bit the same). The SSD programs are the 12-02e record's SASS, so its SSD tables stand.
export CAKE_RT_CACHE_DIR=$PWD/.dev/cubins CAKE_RT_GIT_HASH=$(cat .dev/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
mkdir -p "$OUT/v" "$OUT/b"; B=$(mktemp -d)
echo "[$SECONDS s] dsa bench"
PYTHONPATH=$PWD timeout 170 python3 -m cake_rt bench dsa --no-peers --repeats 10 --warmup 2 --budget-s 0.5 --side-stream 1 \
    --time-limit 120 --json $B/dsa.json --markdown $B/dsa.md --compare bench/results/h200_2026-12-02h_dsa.json > $B/dsa.log 2>&1
echo "bench dsa rc=$?"; cp $B/dsa.json $B/dsa.md $B/dsa.log "$OUT/b/"; grep "^| " $B/dsa.md | cut -c1-200 | head -70
echo "[$SECONDS s] verify"
OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-02h_fingerprints.txt timeout 330 bash scripts/device-verify.sh > /dev/null 2>&1
cat "$OUT/v/verify.log"
echo "[$SECONDS s] done"
