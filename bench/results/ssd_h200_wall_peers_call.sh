#!/bin/bash
# Idle-stream wall minus GPU time with the real SSD peers in the process (main b79366c): bench/results/ssd_h200_wall_probe.py
export PYTHONUNBUFFERED=1
cp -r .dev/w12/cache /tmp/cache 2>/dev/null
for v in peers peersonly hostidle base; do
  CAKE_RT_CACHE_DIR=/tmp/cache MAIN=$PWD PYTHONPATH=$PWD:$PWD/.peers ROWS=short timeout 280 python3 bench/results/ssd_h200_wall_probe.py $v 2>&1 | grep -v "^cake-rt: compiling" | tail -4
done | tee $OUT/wall_peers.log
