#!/usr/bin/env bash
# Call B: landtb verified (fingerprints against 12-04d's, the GPU suite, compute-sanitizer, host and compile time).
R=$(cd "$(dirname "$0")/../.." && pwd)
bash $R/.dev/pack/setup_land.sh || exit 1; L=/tmp/landtb; cd $L
export CAKE_RT_CACHE_DIR=$L/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-04d_fingerprints.txt timeout 540 bash scripts/device-verify.sh > /dev/null 2>&1
cat $OUT/v/verify.log
