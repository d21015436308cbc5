#!/bin/bash
# `cake-rt calibrate --no-save` (the walk's constants fitted too) and the walk / plan GPU tests, this tree.
cd "$(dirname "$0")/../.."
export CAKE_RT_CACHE_DIR=$PWD/.dev/w7/cache PYTHONPATH=$PWD CAKE_RT_QUIET=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log --oneline -1 2>/dev/null
timeout 300 python3 -m cake_rt calibrate --repeats 5 --no-save 2>&1
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/ssd/test_ssd_gpu.py -k "walk or plan or auto" 2>&1 | tail -2
