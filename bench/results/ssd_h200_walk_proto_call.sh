#!/usr/bin/env bash
# The walk schedule probe (branch walk): bitwise checks against the exact scan (ring 64 and ring 2), then timings.
export CAKE_RT_CACHE_DIR=$PWD/.dev/wk/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 MAIN=$PWD PYTHONPATH=$PWD CAKE_RT_SSD_WORKSPACE_CAP=4000000000
ARM=walk WALK=1 timeout 150 python3 .dev/wk/probe.py 2>&1 | tee $OUT/wk.log | grep -v "^cake-rt: compiling"
echo "rc=$?"
ARM=ring2 WALK=1 RING=2 ROWS=nemotron-h FAMS=chunkpar timeout 150 python3 .dev/wk/probe.py 2>&1 | tee -a $OUT/wk.log | grep -v "^cake-rt: compiling"
echo "rc=$?"
ARM=base WALK=0 CHECKS=0 timeout 100 python3 .dev/wk/probe.py 2>&1 | tee -a $OUT/wk.log | grep -v "^cake-rt: compiling"
ARM=walk WALK=1 CHECKS=0 FAMS=chunkpar timeout 100 python3 .dev/wk/probe.py 2>&1 | tee -a $OUT/wk.log | grep -v "^cake-rt: compiling"
