#!/usr/bin/env bash
# Twenty-ninth session, call 2: walk2 (S_prev staged through shared memory, counted after the state pass, the producer
# gated on the walk's end): the walk GPU tests, compute-sanitizer on the forced walk, base / new alternating, the trace.
export CAKE_RT_CACHE_DIR=$PWD/.dev/w2/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 MAIN=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
L=$OUT/call2.log
PYTHONPATH=$PWD timeout 150 python3 -m pytest -q -n 4 tests/ssd/test_ssd_gpu.py -k walk -p no:cacheprovider > $OUT/walk_tests.log 2>&1; echo "walk GPU tests rc=$?: $(tail -1 $OUT/walk_tests.log)" | tee -a $L
for tool in memcheck racecheck synccheck; do
  PYTHONPATH=$PWD timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 python3 .dev/w2/sanitize_walk.py > $OUT/san_$tool.log 2>&1
  echo "compute-sanitizer $tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|walk ring' $OUT/san_$tool.log | tr '\n' ' ')" | tee -a $L
done
run() { env ARM=$1 CHECKS=$3 PYTHONPATH=$PWD/.dev/w2/$2 timeout 60 python3 .dev/w2/probe.py 2>&1 | grep -v "^cake-rt: compiling" | tee -a $L; }
run base base 0
run pub pub 1
run pub pub 0
run base base 0
run base base 0
run pub pub 0
env ARM=trace3 CHECKS=0 TRACE=1 PYTHONPATH=$PWD/.dev/w2/trace3 timeout 60 python3 .dev/w2/probe.py 2>&1 | grep -v "^cake-rt: compiling" > $OUT/trace3.log
grep -E "^time|run 0|S_prev|prep |count|state |chunk  |walk end|CTA end|tiles a|wait us" $OUT/trace3.log
