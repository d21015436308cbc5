#!/bin/bash
# The SSD GPU tests and the SSD acceptance tests on this tree (the walk's refitted constants steer the plans).
cd "$(dirname "$0")/../.."
export CAKE_RT_CACHE_DIR=$PWD/.dev/w7/cache PYTHONPATH=$PWD CAKE_RT_QUIET=1
timeout 320 python3 -m pytest -q -p no:cacheprovider tests/ssd/test_ssd_gpu.py tests/acceptance/test_ssd_contract_gpu.py 2>&1 | tail -4
