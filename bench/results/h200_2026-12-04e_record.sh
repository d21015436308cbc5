#!/usr/bin/env bash
# After the fix: compute-sanitizer on the forced walk, the walk's GPU tests, then the SSD bench with both peers.
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:$PWD/.peers CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH)
mkdir -p $OUT/v; LOG=$OUT/v/verify2.log
echo "tree $(cat .dev/record/GIT_HASH)" > $LOG
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 python3 .dev/v/sanitize_walk.py > $OUT/v/san_$tool.log 2>&1
  echo "compute-sanitizer $tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|walk ring' $OUT/v/san_$tool.log | tr '\n' ' ')" >> $LOG
done
timeout 150 python3 -m pytest -q -n 4 tests/ssd/test_ssd_gpu.py -k "walk or plans" -p no:cacheprovider > $OUT/v/walk_tests.log 2>&1; echo "walk GPU tests rc=$?: $(tail -1 $OUT/v/walk_tests.log)" >> $LOG
cat $LOG
OUT=$OUT/b OPS=ssd RECORD=bench/results/h200_2026-12-04d ACCURACY=0 timeout 330 bash scripts/device-bench.sh > /dev/null 2>&1
cat "$OUT/b/bench.log"
