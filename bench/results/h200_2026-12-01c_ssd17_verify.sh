#!/usr/bin/env bash
# Verification of tree b170cdf (one SSD program per family, ssd17) on the H200: the SSD fingerprints against the
# record, the SSD GPU tests, warmup and the SSD robustness tests, cold compile times of the split programs, and a
# short SSD bench against the record. Everything under $OUT/v17, packed into v17.tgz.
set -o pipefail
cd .dev/v17
export CAKE_RT_QUIET=1 PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CAKE_RT_CACHE_DIR=$PWD/.cubins CAKE_RT_GIT_HASH=$(cat GIT_HASH)
L=$OUT/v17; mkdir -p $L; M=$L/verify.log
trap 'cd $L && tar czf $OUT/v17.tgz . && rm -rf $L' EXIT
say() { echo "[$SECONDS s] $*" | tee -a $M; }
say "tree $(cat GIT_HASH)"
timeout 40 python3 scripts/ssd-fingerprint > $L/fp_ssd.txt 2>&1; echo "ssd fp rc=$? lines=$(wc -l < $L/fp_ssd.txt)" | tee -a $M
if diff <(grep -v "^#" bench/results/h200_2026-12-01c_fingerprints.txt | grep families | sort) <(grep families $L/fp_ssd.txt | sort) > $L/fp_diff.txt; then
  echo "ssd fingerprints EQUAL to h200_2026-12-01c" | tee -a $M; else echo "ssd fingerprints DIFFER" | tee -a $M; head -20 $L/fp_diff.txt | tee -a $M; fi
say "tests"
timeout 45 python3 -m pytest -q -ra -p no:cacheprovider -n 6 --dist loadfile --timeout=60 tests/ssd tests/acceptance/test_ssd_contract_gpu.py \
  tests/test_warmup_gpu.py --ignore=tests/ssd/test_ssd_compile.py \
  --ignore=tests/ssd/test_ssd_phase_trace_cpu.py --ignore=tests/ssd/test_ssd_step_trace_cpu.py > $L/tests.log 2>&1
echo "tests rc=$?" | tee -a $M; tail -3 $L/tests.log | tee -a $M
say "compile time"
timeout 25 python3 scripts/compile-time sm_90a --ops ssd --shapes dstate=128,chunk=256,headdim=64,dtype=bfloat16 \
  --shapes dtype=float32,headdim=128,dstate=128,chunk=256 > $L/compile_time.log 2>&1; echo "rc=$?" >> $L/compile_time.log; cat $L/compile_time.log | tee -a $M
say "bench"
timeout 20 python3 -m cake_rt bench ssd --no-peers --repeats 8 --warmup 2 --budget-s 0.3 --rows short,seed \
  --json $L/ssd.json --markdown $L/ssd.md --compare bench/results/h200_2026-12-01c_ssd.json > $L/bench.log 2>&1; echo "bench rc=$?" | tee -a $M
grep -A6 "^| row | old" $L/ssd.md | tee -a $M
say done
