#!/usr/bin/env bash
# Twenty-ninth session, calls 2-4, one script: the walk GPU tests, compute-sanitizer on the forced walk, the arms BASE and
# NEW alternating (the checked one: NEW), then the clock trace of TRACE (each a tree under .dev/w2 with its cubins).
#   call 2: BASE=base NEW=new  TRACE=trace2          (walk2: S_prev staged, counted after the state pass)
#   call 3: BASE=base NEW=pub  TRACE=trace3          (the count published by the producer)
#   call 4: BASE=pub  NEW=prep TRACE=trace4 SHOW=head (the prep in the producer)
: "${BASE:?}" "${NEW:?}" "${TRACE:?}"
export CAKE_RT_CACHE_DIR=$PWD/.dev/w2/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 MAIN=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
L=$OUT/call2.log
PYTHONPATH=$PWD timeout 150 python3 -m pytest -q -n 4 tests/ssd/test_ssd_gpu.py -k walk -p no:cacheprovider > $OUT/walk_tests.log 2>&1; echo "walk GPU tests rc=$?: $(tail -1 $OUT/walk_tests.log)" | tee -a $L
for tool in memcheck racecheck synccheck; do
  PYTHONPATH=$PWD timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 python3 .dev/w2/sanitize_walk.py > $OUT/san_$tool.log 2>&1
  echo "compute-sanitizer $tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|walk ring' $OUT/san_$tool.log | tr '\n' ' ')" | tee -a $L
done
run() { env ARM=$1 CHECKS=$2 PYTHONPATH=$PWD/.dev/w2/$1 timeout 60 python3 .dev/w2/probe.py 2>&1 | grep -v "^cake-rt: compiling" | tee -a $L; }
run $BASE 0
run $NEW 1
run $NEW 0
run $BASE 0
run $BASE 0
run $NEW 0
env ARM=$TRACE CHECKS=0 TRACE=1 PYTHONPATH=$PWD/.dev/w2/$TRACE timeout 60 python3 .dev/w2/probe.py 2>&1 | grep -v "^cake-rt: compiling" > $OUT/$TRACE.log
if [ "${SHOW:-grep}" = head ]; then head -45 $OUT/$TRACE.log
else grep -E "^time|run 0|S_prev|prep |count|state |chunk  |walk end|CTA end|tiles a|wait us" $OUT/$TRACE.log; fi
