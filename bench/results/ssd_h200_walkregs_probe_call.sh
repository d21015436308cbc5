#!/bin/bash
# Thirty-first session, the first walkregs call: main (.dev/w10/base) against w4s (main + ssd_h200_walkring4_arm.diff + the
# register split 200 / 56 for walk programs) and r56 (main + the split alone), trees staged like ssd_h200_memside_call.sh's.
cd "$(dirname "$0")/../.."
R=$PWD
run() {  # tree arm checks
  local d=$R/.dev/$1
  (cd $d && CAKE_RT_CACHE_DIR=$d/cache PYTHONPATH=$d MAIN=$d ARM=$2 CHECKS=$3 ROWS=nemotron-h,m2-2.7b timeout 200 python3 $R/.dev/w11/probe.py 2>&1 | grep -a "^check\|^time\|rror" | tail -8)
}
run w11/w4s w4s 1
for r in 1 2 3; do run w10/base base 0; run w11/w4s w4s 0; run w11/r56 r56 0; done
run w10/base base 0
d=$R/.dev/w11/w4s
(cd $d && CAKE_RT_CACHE_DIR=$d/cache PYTHONPATH=$d timeout 300 python3 -m pytest -q -p no:cacheprovider tests/ssd/test_ssd_gpu.py -k "walk" 2>&1 | tail -2)
