#!/usr/bin/env bash
# The walk schedule: nemotron-h with rings of 112 and 96 chunks (under the 256 MiB cap), against the exact scan.
export CAKE_RT_CACHE_DIR=$PWD/.dev/wk/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 MAIN=$PWD PYTHONPATH=$PWD CAKE_RT_SSD_WORKSPACE_CAP=4000000000
for r in 112 96 112 96; do
  ARM=ring$r WALK=1 RING=$r CHECKS=0 ROWS=nemotron-h timeout 100 python3 .dev/wk/probe.py 2>&1 | tee -a $OUT/wk2.log | grep -v "^cake-rt: compiling"
done
