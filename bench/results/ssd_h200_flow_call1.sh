#!/bin/bash
# Flow A/B: main (cadfe3a) vs the flow tree (working tree), alternating processes; bitwise checks on both.
# Run on the flow tree (branch `flow` checked out as the working tree); staged on the CPU: .dev/w13/main = main cadfe3a
# (git archive) with its seed / short cubins, .dev/w13/cache_flow = the flow tree's `cake-rt warmup` of the SSD programs.
R=$PWD; W=$R/.dev/w13; export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
run() {  # arm tree cache [env...]
  local arm=$1 tree=$2 cache=$3; shift 3
  (cd $tree && env "$@" ARM=$arm MAIN=$tree CAKE_RT_CACHE_DIR=$cache PYTHONPATH=$tree python3 $W/probe.py) 2>&1 | grep -v "^cake-rt: compiling"
}
run main $W/main $W/main/cache CHECKS=0 ROWS=seed,short
run flow $R $W/cache_flow CHECKS=1
for r in 1 2; do
  run main $W/main $W/main/cache CHECKS=0 ROWS=seed,short,seed
  run flow $R $W/cache_flow CHECKS=0 ROWS=seed,short,seed
  run flow0 $R $W/cache_flow CHECKS=0 ROWS=seed,short,seed FRONT=0
  run flow2 $R $W/cache_flow CHECKS=0 ROWS=seed,short,seed FRONT=4
done
