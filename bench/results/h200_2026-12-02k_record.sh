#!/usr/bin/env bash
# The DSA suite again with the arms interleaved (the bench change after 12-02j; the kernels are 12-02j's), then the
# bench's GPU tests.
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
OUT=$OUT/b OPS=dsa RECORD=bench/results/h200_2026-12-02j ACCURACY=0 timeout 330 bash scripts/device-bench.sh > /dev/null 2>&1
cat "$OUT/b/bench.log"
PYTHONPATH=$PWD timeout 120 python3 -m pytest -q -p no:cacheprovider tests/bench/test_bench_gpu.py tests/bench/test_bench_report.py 2>&1 | tail -3
