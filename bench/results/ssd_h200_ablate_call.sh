#!/bin/bash
cd "$(dirname "$0")/../.."
R=$PWD
for arm in ${ARMS:-base nogate base nogate}; do
  d=$R/.dev/w6/$arm
  (cd $d && CAKE_RT_CACHE_DIR=$d/cache PYTHONPATH=$d MAIN=$d ARM=$arm CHECKS=0 ROWS=nemotron-h,m2-2.7b timeout 200 python3 $R/.dev/w2/probe.py 2>&1 | tail -2)
done
