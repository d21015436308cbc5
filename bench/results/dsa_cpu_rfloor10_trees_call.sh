#!/usr/bin/env bash
# main's kernels and branch rfloor's (f35bef4, rfloor10) in one process a row: scripts/dsa-trees (the A rows, then S1 at
# H = 32), programs compiled on the CPU into .dev/next46/cache. Called by .dev/rfv/call.sh.
export CAKE_RT_CACHE_DIR=$PWD/.dev/next46/cache PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
K=.dev/next46/k
bash scripts/dsa-trees main=$K/main/cake_rt/kernels,rfloor=$K/rfloor/cake_rt/kernels S1:32 > $OUT/trees46.txt 2>&1
grep -E "^(==|tree|records left)" $OUT/trees46.txt
