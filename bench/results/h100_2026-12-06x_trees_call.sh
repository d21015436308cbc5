#!/usr/bin/env bash
# Round 58: main's kernels and arr1's (merge.cuh: the arrival as one acquire-release add), each under the ticket and
# the static schedule (static = static1: no draw where the grid has a CTA a unit), alternated in one process a row
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
ROOT=$PWD
export PYTHONPATH=$ROOT PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1 CAKE_RT_CACHE_DIR=$ROOT/.dev/h50/tc
M=.dev/h50/k/main/cake_rt/kernels A=.dev/h50/k/arr/cake_rt/kernels
timeout 420 bash scripts/dsa-trees mt=$M@ticket,ms=$M@static,at=$A@ticket,as=$A@static S1:32 > $OUT/trees58.txt 2>&1
grep -E "^(==|tree|records left|\[)" $OUT/trees58.txt
