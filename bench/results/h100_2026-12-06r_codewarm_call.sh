#!/bin/bash
set -u
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
export PYTHONPATH=$PWD CAKE_RT_CACHE_DIR=$PWD/.dev/cw/cache
timeout 300 python3 .dev/cw/codewarm.py "$@" 2>&1 | tee $OUT/codewarm.txt
