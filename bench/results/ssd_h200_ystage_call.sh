#!/usr/bin/env bash
# y staged through X_i in the sm_90a epilogue (ystage) against 6329831 (base): every SSD suite row, family auto,
# alternating processes; the hashes of y and the final states must match between the arms.
export CAKE_RT_CACHE_DIR=$PWD/.dev/w3/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 MAIN=$PWD ROWS=seed,m2-2.7b,m2-2.7b-b8,nemotron-h,short,varlen
run() { env ARM=$1 CHECKS=$2 PYTHONPATH=$PWD/.dev/w3/$1 timeout 90 python3 .dev/w3/probe.py 2>&1 | grep -v "^cake-rt: compiling" | tee -a $OUT/ystage.log; }
run base 0
run ystage 1
run ystage 0
run base 0
