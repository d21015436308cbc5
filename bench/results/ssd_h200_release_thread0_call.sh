#!/bin/bash
cd "$(dirname "$0")/../.."
R=$PWD
for arm in ${ARMS:-base prod0 base prod0 base prod0}; do
  d=$R/.dev/w9/$arm
  (cd $d && CAKE_RT_CACHE_DIR=$d/cache PYTHONPATH=$d MAIN=$d ARM=$arm CHECKS=$([ $arm = prod0 ] && echo 1 || echo 0) ROWS=nemotron-h,m2-2.7b timeout 200 python3 $R/.dev/w2/probe.py 2>&1 | tail -3)
done
d=$R/.dev/w9/prod0
(cd $d && CAKE_RT_CACHE_DIR=$d/cache PYTHONPATH=$d timeout 300 python3 -m pytest -q -p no:cacheprovider tests/ssd/test_ssd_gpu.py -k "walk" 2>&1 | tail -2)
