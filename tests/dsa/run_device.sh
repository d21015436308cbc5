#!/bin/bash
# One device call: GPU tests (full log), compute-sanitizer on a small case, quick timings. Logs to $OUT.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/dsa_out}; mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
PHASES=${PHASES:-tests,sanitize,bench}
if [[ $PHASES == *tests* ]]; then
  timeout ${TEST_TIMEOUT:-240} python3 -m pytest -q -ra tests/dsa/test_dsa_gpu.py ${PYTEST_ARGS} > $OUT/gpu_tests.log 2>&1
  echo "pytest rc=$?" >> $OUT/gpu_tests.log; tail -25 $OUT/gpu_tests.log
fi
if [[ $PHASES == *sanitize* ]]; then
  for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
    CAKE_RT_DSA_LINEINFO=1 timeout ${SAN_TIMEOUT:-60} compute-sanitizer --tool $tool --error-exitcode 9 python3 tests/dsa/sanitize_case.py > $OUT/sanitize_$tool.log 2>&1
    echo "$tool rc=$?" | tee -a $OUT/sanitize_$tool.log; tail -3 $OUT/sanitize_$tool.log
  done
  if [[ -n "$SAN_SYNC" ]]; then  # the mma.sync program too (memcheck)
    CAKE_RT_DSA_MMA=sync timeout ${SAN_TIMEOUT:-60} compute-sanitizer --tool memcheck --error-exitcode 9 python3 tests/dsa/sanitize_case.py > $OUT/sanitize_memcheck_sync.log 2>&1
    echo "memcheck(sync) rc=$?" | tee -a $OUT/sanitize_memcheck_sync.log; tail -3 $OUT/sanitize_memcheck_sync.log
  fi
fi
if [[ $PHASES == *bench* ]]; then
  timeout ${BENCH_TIMEOUT:-200} python3 -m cake_rt.cli bench dsa ${BENCH_ARGS:---rows S1,A1} --json $OUT/bench_dsa.json > $OUT/bench.log 2>&1
  echo "bench rc=$?" >> $OUT/bench.log; cat $OUT/bench.log | cut -c1-400
fi
