#!/usr/bin/env bash
cd "$PWD/.dev/final"
export CAKE_RT_CACHE_DIR=$PWD/.cubins CAKE_RT_GIT_HASH=$(cat GIT_HASH) PYTHONPATH=$PWD
timeout 200 python3 -m cake_rt calibrate --repeats 5 --no-save 2>&1 | tee $OUT/calibrate.log
