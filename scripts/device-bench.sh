#!/usr/bin/env bash
# The recorded benchmark run on the device machine: `cake-rt bench all` with the peers (carry .peers),
# JSON + PNG + Markdown under $OUT.  Usage: CAKE_RT_GIT_HASH=<hash> bash scripts/device-bench.sh [limit_s]
set -o pipefail
export PYTHONPATH=$PWD:$PWD/.peers PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
limit=${1:-480}
# mamba_ssm's accuracy on the same inputs as ours (needs the carried peer; also warms Triton's cache)
timeout 120 python3 -m pytest -q -ra -p no:cacheprovider tests/ssd/test_ssd_gpu.py -k mamba > $OUT/mamba_accuracy.log 2>&1
tail -3 $OUT/mamba_accuracy.log
python3 -m cake_rt.cli bench all --json $OUT/h200.json --plot $OUT/h200.png --markdown $OUT/h200.md \
    --time-limit $limit ${BENCH_ARGS:-} > $OUT/h200.log 2>&1
echo "bench rc=$?" >> $OUT/h200.log
tail -60 $OUT/h200.log
