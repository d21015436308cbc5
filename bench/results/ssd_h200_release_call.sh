#!/bin/bash
cd "$(dirname "$0")/../.."
R=$PWD
CHECKED=${CHECKED:-prodrel}  # the arm whose bits are checked and whose walk GPU tests run
for arm in ${ARMS:-base relaxed prodrel base relaxed prodrel}; do
  d=$R/.dev/w9/$arm
  (cd $d && CAKE_RT_CACHE_DIR=$d/cache PYTHONPATH=$d MAIN=$d ARM=$arm CHECKS=$([ $arm = $CHECKED ] && echo 1 || echo 0) ROWS=nemotron-h,m2-2.7b timeout 200 python3 $R/.dev/w2/probe.py 2>&1 | tail -3)
done
d=$R/.dev/w9/$CHECKED
(cd $d && CAKE_RT_CACHE_DIR=$d/cache PYTHONPATH=$d timeout 300 python3 -m pytest -q -p no:cacheprovider tests/ssd/test_ssd_gpu.py -k "walk" 2>&1 | tail -2)
