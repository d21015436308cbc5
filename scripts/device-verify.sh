#!/usr/bin/env bash
# One device call that verifies everything (the benchmark is scripts/device-bench.sh):
#   1. the whole GPU test suite on the default paths (JUnit + log);
#   2. the alternative paths under their GPU tests (CAKE_RT_DSA_FAST=0, the first DSA program;
#      CAKE_RT_SSD_EXACT_NARROW=force, the off-by-default 4-warp exact scan) and timed against the defaults;
#   3. scripts/decide_switches.py says whether each switch earned its place: its tests passed, its bits
#      equal the default's, and it was faster.
# Usage on the device (repo root): bash scripts/device-verify.sh
set -o pipefail
export PYTHONPATH=$PWD:$PWD/.peers PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
W=/tmp/cake-final; mkdir -p $W
LOG=$OUT/verify.log
say() { echo "[$SECONDS s] $*" | tee -a $LOG; }
say "info"; python3 -m cake_rt info >> $LOG 2>&1
say "prewarm DSA programs"; timeout 90 python3 tests/dsa/prewarm_dsa.py sm_90a > $W/prewarm.log 2>&1; tail -2 $W/prewarm.log >> $LOG
say "GPU suite (default paths)"
# Four workers, one test file per worker (side-stream tests keep their file's order); most of the wall time
# is NVRTC compiling the test programs, which the workers share through the disk cache.
timeout 400 python3 -m pytest -q -ra -p no:cacheprovider --timeout=150 -n 4 --dist loadfile --junitxml=$OUT/junit.xml tests -k "not fast_variant" > $W/suite.log 2>&1
echo "suite rc=$?" >> $W/suite.log; grep -E "passed|failed|error|FAILED|ERROR" $W/suite.log | tail -25 >> $LOG
say "DSA first program (CAKE_RT_DSA_FAST=0): tests"
CAKE_RT_DSA_FAST=0 timeout 80 python3 -m pytest -q -ra -p no:cacheprovider tests/dsa/test_dsa_gpu.py tests/acceptance/test_dsa_contract_gpu.py > $W/dsa_fast.log 2>&1
echo $? > $W/dsa_fast_rc; tail -6 $W/dsa_fast.log >> $LOG
say "SSD narrow exact: tests"
CAKE_RT_SSD_EXACT_NARROW=force timeout 200 python3 -m pytest -q -ra -p no:cacheprovider -n 4 tests/ssd/test_ssd_gpu.py tests/acceptance/test_ssd_contract_gpu.py -k "not mamba" > $W/ssd_narrow.log 2>&1
echo $? > $W/ssd_narrow_rc; tail -6 $W/ssd_narrow.log >> $LOG
say "DSA variants timing"
timeout 60 python3 tests/dsa/bench_dsa.py --rows S1,C1,A1 --heads 32,64 --variants default,fast --schedules ticket --entries prepared --side "" --repeats 5 --delay-us 400 --json $W/dsa_variants.json > $W/dsa_bench.log 2>&1
grep -h "bitwise" $W/dsa_bench.log | sort | uniq -c >> $LOG
say "SSD narrow timing"
CAKE_RT_SSD_EXACT_NARROW=0 timeout 40 python3 tests/ssd/time_ssd.py --rows m2-2.7b-b8,varlen,nemotron-h --reps 5 --no-mamba --families exact --json $W/ssd_wide.json >> $LOG 2>&1
CAKE_RT_SSD_EXACT_NARROW=1 timeout 40 python3 tests/ssd/time_ssd.py --rows m2-2.7b-b8,varlen,nemotron-h --reps 5 --no-mamba --families exact --json $W/ssd_narrow.json >> $LOG 2>&1
python3 scripts/decide_switches.py $W > $W/exports.sh; cat $W/exports.sh | tee -a $LOG
cp $W/dsa_variants.json $W/ssd_wide.json $W/ssd_narrow.json $OUT/ 2>/dev/null
tar czf $OUT/logs.tgz -C $W . 2>/dev/null
say "done"
