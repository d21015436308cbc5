#!/bin/bash
# Idle-stream wall minus GPU time by process contents (main b79366c): bench/results/ssd_h200_wall_probe.py
export PYTHONUNBUFFERED=1
cp -r .dev/w12/cache /tmp/cache 2>/dev/null
for v in base torch triton both base; do
  CAKE_RT_CACHE_DIR=/tmp/cache MAIN=$PWD PYTHONPATH=$PWD timeout 120 python3 bench/results/ssd_h200_wall_probe.py $v 2>&1 | grep -v "^cake-rt: compiling" | tail -3
done | tee $OUT/wall.log
