#!/bin/bash
# Flow polling: main vs flowD (the flow arm: 16 lanes poll with ld.acquire) vs flowS (one thread polls the words in
# turn, relaxed, then one acquire), front 0 and 2 on seed and short.
# Staged on the CPU: .dev/w13/flowD = `git archive flow cake_rt scripts tests`, .dev/w13/flowS = the same with the
# producer's poll `if (ptid < 32) for (w = ptid; ...; w += 32) wait_acquire_at_least(...)` replaced by
# `if (ptid == 0) for (w = 0; w < HB * NEB; ++w) wait_at_least(...)`; each with its seed / short cubins in cache/.
W=$PWD/.dev/w13; export PYTHONUNBUFFERED=1
run() {  # arm tree [env...]
  local arm=$1 tree=$2; shift 2
  (cd $tree && env "$@" ARM=$arm MAIN=$tree CAKE_RT_CACHE_DIR=$tree/cache PYTHONPATH=$tree python3 $W/probe.py) 2>&1 | grep -v "^cake-rt: compiling"
}
for r in 1 2; do
  run main $W/main CHECKS=0 ROWS=seed,short,seed
  run D0 $W/flowD CHECKS=0 ROWS=seed,short,seed FRONT=0
  run S0 $W/flowS CHECKS=0 ROWS=seed,short,seed FRONT=0
  run D2 $W/flowD CHECKS=0 ROWS=seed,short,seed FRONT=4
  run S2 $W/flowS CHECKS=0 ROWS=seed,short,seed FRONT=4
done
