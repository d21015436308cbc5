#!/bin/bash
# More probe pairs: main cadfe3a / earlycount, alternating processes, nemotron-h and m2-2.7b.
R=$PWD; W=$R/.dev/w13
export CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
run() {  # label dir cache
  (cd $2 && CAKE_RT_CACHE_DIR=$3 PYTHONPATH=$2 MAIN=$2 ARM=$1 CHECKS=0 ROWS=nemotron-h,m2-2.7b,nemotron-h timeout 200 python3 $W/walkprobe.py 2>&1 | grep -a "^time\|rror" | tail -8)
}
for r in 1 2 3 4 5 6 7 8; do
  run main $W/main $W/main/cache
  run ec $R $W/cache_ec
done
