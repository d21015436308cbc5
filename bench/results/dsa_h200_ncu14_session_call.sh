#!/usr/bin/env bash
# Session 14, call 1: ncu14 (main's source counters), dsa34's A/B, the capture-metadata GPU tests on main.
cd "$(dirname "$0")/../.."
R=$PWD; mkdir -p $OUT
echo "[$SECONDS s] ncu14"; timeout 160 bash .dev/ncu14/call.sh > $OUT/ncu14_call.log 2>&1; echo "ncu14 rc=$?"
tail -c 6000 $OUT/ncu14_call.log
echo "[$SECONDS s] dsa34"; timeout 250 bash .dev/dsa34/call.sh > $OUT/dsa34_call.log 2>&1; echo "dsa34 rc=$?"
echo "[$SECONDS s] capture metadata tests (main)"
(cd .dev/dsa34/base && CAKE_RT_CACHE_DIR=$R/.dev/dsa34/base/.cubins PYTHONPATH=$PWD CAKE_RT_QUIET=1 timeout 100 python3 -m pytest -q -x tests/test_capture_metadata_gpu.py -p no:cacheprovider > $OUT/capture_tests.log 2>&1; echo "capture rc=$?")
tail -5 $OUT/capture_tests.log
echo "[$SECONDS s] done"; tail -c 5000 $OUT/dsa34_call.log
