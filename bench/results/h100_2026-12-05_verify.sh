#!/usr/bin/env bash
# Verification only (no bench): the kernels' fingerprints against 12-04d's, the GPU suite (this session's new GPU tests
# included), compute-sanitizer, host time, compile time. Staged by scripts/record-prepare.
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-04d_fingerprints.txt timeout 480 bash scripts/device-verify.sh > /dev/null 2>&1
cat "$OUT/v/verify.log"
