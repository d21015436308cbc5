#!/usr/bin/env bash
# After the tile words' double buffering: the walk's GPU tests, compute-sanitizer on the forced walk, nemotron-h and
# m2-2.7b timed (no peers).
export CAKE_RT_CACHE_DIR=$PWD/.dev/slim/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CAKE_RT_GIT_HASH=$(cat .dev/slim/GIT_HASH)
mkdir -p $OUT/v; LOG=$OUT/v/recheck.log
echo "tree $(cat .dev/slim/GIT_HASH)" > $LOG
timeout 120 python3 -m pytest -q -n 4 tests/ssd/test_ssd_gpu.py -k "walk or plans" -p no:cacheprovider > $OUT/v/walk_tests.log 2>&1; echo "walk GPU tests rc=$?: $(tail -1 $OUT/v/walk_tests.log)" >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 python3 .dev/v/sanitize_walk.py > $OUT/v/san_$tool.log 2>&1
  echo "compute-sanitizer $tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|walk ring' $OUT/v/san_$tool.log | tr '\n' ' ')" >> $LOG
done
timeout 90 python3 -m cake_rt bench ssd --no-peers --rows nemotron-h,m2-2.7b --repeats 8 --warmup 2 --budget-s 0.4 --json $OUT/v/rows.json --markdown $OUT/v/rows.md > $OUT/v/rows.log 2>&1; echo "bench rc=$?" >> $LOG
grep "^| nemotron\|^| m2" $OUT/v/rows.md | cut -c1-120 >> $LOG
cat $LOG
