#!/bin/bash
# Hybrid schedules of the exact-scan rows from existing kernels (main b79366c): bench/results/ssd_h200_hybrid_probe.py
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
cp -r .dev/w12/cache /tmp/cache
CAKE_RT_CACHE_DIR=/tmp/cache MAIN=$PWD PYTHONPATH=$PWD timeout 420 python3 bench/results/ssd_h200_hybrid_probe.py 2>&1 | tee $OUT/hybrid.log | grep -v "^cake-rt: compiling"
grep -c "^cake-rt: compiling" $OUT/hybrid.log
