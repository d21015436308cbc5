#!/bin/bash
# Flow A/B, the front's curve: main vs the flow tree with front 2, 3, 4 items a CTA without a scan item (seed).
# Run on the flow tree (branch `flow` checked out as the working tree); staged on the CPU: .dev/w13/main = main cadfe3a
# (git archive) with its seed / short cubins, .dev/w13/cache_flow = the flow tree's `cake-rt warmup` of the SSD programs.
R=$PWD; W=$R/.dev/w13; export PYTHONUNBUFFERED=1
run() {  # arm tree cache [env...]
  local arm=$1 tree=$2 cache=$3; shift 3
  (cd $tree && env "$@" ARM=$arm MAIN=$tree CAKE_RT_CACHE_DIR=$cache PYTHONPATH=$tree python3 $W/probe.py) 2>&1 | grep -v "^cake-rt: compiling"
}
for r in 1 2; do
  run main $W/main $W/main/cache CHECKS=0 ROWS=seed,seed
  run front2 $R $W/cache_flow CHECKS=0 ROWS=seed,seed FRONT=4
  run front3 $R $W/cache_flow CHECKS=0 ROWS=seed,seed FRONT=6
  run front4 $R $W/cache_flow CHECKS=0 ROWS=seed,seed FRONT=8
done
