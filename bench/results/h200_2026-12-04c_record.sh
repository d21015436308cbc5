#!/usr/bin/env bash
# This session's SSD record, the bench half: scripts/device-bench.sh OPS=ssd with both peers (.peers carried) and
# mamba_ssm's accuracy step on the same inputs; compared with the 12-02e SSD record.
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
export TRITON_CACHE_DIR=$PWD/.dev/record/triton; mkdir -p "$TRITON_CACHE_DIR"
OUT=$OUT/b OPS=ssd RECORD=bench/results/h200_2026-12-02e ACCURACY=1 timeout 560 bash scripts/device-bench.sh > /dev/null 2>&1
echo "rc=$?"
cat "$OUT/b/bench.log"

# then, the verification (the same machine, warm):
# export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
# OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-04b_fingerprints.txt timeout 540 bash scripts/device-verify.sh
# staged by: RECORD=bench/results/h200_2026-12-02e OPS=ssd JOBS=8 bash scripts/record-prepare; carry [".dev/record", ".peers"] (scripts/prepare-peers)
