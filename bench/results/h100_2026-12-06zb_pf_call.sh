#!/usr/bin/env bash
# Round 60: main's kernels (aa44a47) against pf (the key map prefetched at the CTA's start), one process a row
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
ROOT=$PWD
export PYTHONPATH=$ROOT PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1 CAKE_RT_CACHE_DIR=$ROOT/.dev/h51/tc2
M=.dev/h51/k/main/cake_rt/kernels P=.dev/h51/k/pf/cake_rt/kernels
timeout 280 bash scripts/dsa-trees main=$M,pf=$P S1:32 > $OUT/trees60.txt 2>&1
grep -E "^(==|tree|records left|\[)|outputs equal" $OUT/trees60.txt | sed 's/, workspace.*outputs equal/: outputs equal/'
