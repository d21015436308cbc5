#!/usr/bin/env bash
# First call of the seventh session: verify main (host-side changes since 8ab0831), host-time pieces, step trace.
cd "$PWD/.dev/final"
export CAKE_RT_CACHE_DIR=$PWD/.cubins CAKE_RT_GIT_HASH=$(cat GIT_HASH) PYTHONPATH=$PWD
mkdir -p "$OUT/v" "$OUT/x"
trap 'tar czf $OUT/x.tgz -C $OUT/x .' EXIT
echo "[$SECONDS s] verify"
OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-01f_fingerprints.txt timeout 420 bash scripts/device-verify.sh > /dev/null 2>&1
cat "$OUT/v/verify.log"
echo "[$SECONDS s] host pieces"
timeout 60 python3 scripts/host_time.py --calls 500 --pieces > "$OUT/x/host_pieces.log" 2>&1; echo rc=$?
tail -30 "$OUT/x/host_pieces.log"
echo "[$SECONDS s] step trace"
timeout 60 python3 scripts/ssd-step-trace m2-2.7b --runs 3 > "$OUT/x/step_trace.log" 2>&1; echo rc=$?
tail -60 "$OUT/x/step_trace.log"
echo "[$SECONDS s] done"
