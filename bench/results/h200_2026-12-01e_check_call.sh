#!/usr/bin/env bash
# First call of the session: verify main (post-record CPU-only changes), bench m2-2.7b, step trace on the TMA program.
cd "$(dirname "$0")"
export CAKE_RT_CACHE_DIR=$PWD/.cubins CAKE_RT_GIT_HASH=$(cat GIT_HASH)
mkdir -p "$OUT/v" "$OUT/t"
echo "[$SECONDS s] verify"
OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-01d_fingerprints.txt bash scripts/device-verify.sh > /dev/null 2>&1
cat "$OUT/v/verify.log"
echo "[$SECONDS s] bench m2-2.7b"
PYTHONPATH=$PWD timeout 60 python3 -m cake_rt bench ssd --no-peers --repeats 8 --warmup 2 --budget-s 0.4 \
   --rows m2-2.7b,seed,short --json "$OUT/t/bench_m2.json" > "$OUT/t/bench_m2.log" 2>&1; echo "bench rc=$?"
grep -E "m2-2.7b|seed|short" "$OUT/t/bench_m2.log" | cut -c1-160 | head
echo "[$SECONDS s] step trace"
PYTHONPATH=$PWD timeout 120 python3 scripts/ssd-step-trace short seed m2-2.7b --runs 3 > "$OUT/t/step_trace.log" 2>&1; echo "step trace rc=$?"
tail -c 4000 "$OUT/t/step_trace.log"
tar czf "$OUT/t.tgz" -C "$OUT/t" . && rm -rf "$OUT/t"
echo "[$SECONDS s] done"
