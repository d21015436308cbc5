#!/usr/bin/env bash
# A second C buffer in the walk programs (c2, prototype) against main c772953 (base): the walk rows, alternating
# processes, hashes of y and the final states compared; c2's ring-of-2 walk bitwise the exact scan.
export CAKE_RT_CACHE_DIR=$PWD/.dev/w6/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 MAIN=$PWD ROWS=nemotron-h,m2-2.7b
run() { env ARM=$1 CHECKS=$2 PYTHONPATH=$PWD/.dev/w6/$1 timeout 60 python3 .dev/w6/probe.py 2>&1 | grep -v "^cake-rt: compiling" | tee -a $OUT/c2.log; }
run base 0
run c2 1
run c2 0
run base 0
run base 0
run c2 0
