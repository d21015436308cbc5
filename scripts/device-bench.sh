#!/usr/bin/env bash
# The recorded benchmark run on a GPU machine: `cake-rt bench all` with the peers (.peers/ beside the tree,
# see bench/peers/README.md), JSON + both PNGs + Markdown under $OUT.
#   CAKE_RT_GIT_HASH=<hash> bash scripts/device-bench.sh [limit_s]
set -o pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH=$here:$here/.peers PYTHONUNBUFFERED=1
OUT=${OUT:-$here/device-out}; mkdir -p "$OUT"
limit=${1:-480}
cd "$here"
# mamba_ssm's accuracy on the same inputs as ours (also warms Triton's cache)
timeout 120 python3 -m pytest -q -ra -p no:cacheprovider tests/ssd/test_ssd_gpu.py -k mamba > "$OUT/mamba_accuracy.log" 2>&1
tail -3 "$OUT/mamba_accuracy.log"
python3 -m cake_rt bench all --json "$OUT/h200.json" --plot "$OUT/h200.png" --speedup-plot "$OUT/h200_speedup.png" \
    --markdown "$OUT/h200.md" --time-limit "$limit" ${BENCH_ARGS:-} > "$OUT/h200.log" 2>&1
echo "bench rc=$?" >> "$OUT/h200.log"
tail -60 "$OUT/h200.log"
