#!/bin/bash
# SSD eager host time by variant (main cadfe3a), then scripts/host_time.py's real-launch spreads.
W=$PWD/.dev/w13; export PYTHONUNBUFFERED=1
cd $W/main && CAKE_RT_CACHE_DIR=$W/main/cache MAIN=$W/main PYTHONPATH=$W/main python3 $W/host_probe.py 2>&1 | grep -v "^cake-rt: compiling"
CAKE_RT_CACHE_DIR=$W/main/cache PYTHONPATH=$W/main python3 $W/main/scripts/host_time.py --bench-rows --only ssd --entry-costs 2>&1 | grep -v "^cake-rt: compiling" | tail -30
