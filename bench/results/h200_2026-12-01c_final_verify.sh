#!/usr/bin/env bash
# Final verification and recorded run of the merged tree .dev/final (third session of 2026-12-01): self-test,
# fingerprints against the 2026-12-01 record, the whole GPU suite (compile and trace-patch tests left to CI), the three
# sanitizers on scripts/sanitize-case, host time, cold device compile time (scripts/compile-time), the DSA bench (side stream
# 1 SM), the SSD bench with both peers (varlen without them). Everything under $OUT, packed into final.tgz.
set -o pipefail
R=$(pwd)
cd .dev/final
export CAKE_RT_QUIET=1 PYTHONPATH=$PWD:$R/.peers PYTHONUNBUFFERED=1 CAKE_RT_CACHE_DIR=$PWD/.cubins CAKE_RT_GIT_HASH=$(cat GIT_HASH)
M=$OUT/verify.log
say() { echo "[$SECONDS s] $*" | tee -a $M; }
say "tree $(cat GIT_HASH)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> $M
say "selftest"; timeout 40 python3 -m cake_rt > $OUT/selftest.log 2>&1; echo "cake-rt rc=$?" | tee -a $M
say "fingerprints"
timeout 60 python3 scripts/dsa-fingerprint > $OUT/fp_dsa.txt 2>&1; echo "dsa fp rc=$? lines=$(wc -l < $OUT/fp_dsa.txt)" | tee -a $M
timeout 90 python3 scripts/ssd-fingerprint > $OUT/fp_ssd.txt 2>&1; echo "ssd fp rc=$? lines=$(wc -l < $OUT/fp_ssd.txt)" | tee -a $M
cat $OUT/fp_dsa.txt $OUT/fp_ssd.txt > $OUT/fingerprints.txt
if diff <(grep -v "^#" bench/results/h200_2026-12-01_fingerprints.txt | sort) <(grep -v "^#" $OUT/fingerprints.txt | sort) > $OUT/fp_diff.txt; then
  echo "fingerprints EQUAL to h200_2026-12-01" | tee -a $M; else echo "fingerprints DIFFER: $(wc -l < $OUT/fp_diff.txt) lines" | tee -a $M; head -20 $OUT/fp_diff.txt | tee -a $M; fi
say "GPU suite"
timeout 230 python3 -m pytest -q -ra -p no:cacheprovider -n 5 --dist loadfile --timeout=200 --junitxml=$OUT/junit.xml \
  --ignore=tests/ssd/test_ssd_compile.py --ignore=tests/dsa/test_dsa_compile.py \
  --ignore=tests/ssd/test_ssd_phase_trace_cpu.py --ignore=tests/ssd/test_ssd_step_trace_cpu.py tests > $OUT/suite.log 2>&1
echo "suite rc=$?" >> $OUT/suite.log; grep -E "passed|failed|FAILED|ERROR|rc=" $OUT/suite.log | tail -20 | tee -a $M
say "compute-sanitizer"
OUT=$OUT timeout 120 bash scripts/sanitize all > $OUT/sanitize.log 2>&1; echo "sanitize rc=$?" >> $OUT/sanitize.log
grep -E "rc=|SUMMARY|equal" $OUT/sanitize.log | tee -a $M
say "host time"; timeout 40 python3 scripts/host_time.py --calls 500 --entry-costs > $OUT/host_time.log 2>&1; echo "host rc=$?" | tee -a $M
say "device compile time (fresh texts)"
timeout 60 python3 scripts/compile-time sm_90a --shapes dstate=128,chunk=256,headdim=64,dtype=bfloat16 --shapes heads=64,head_dim=128 --shapes heads=32,head_dim=128 --limit 3 > $OUT/compile_time.log 2>&1; echo "compile-time rc=$?" >> $OUT/compile_time.log; cat $OUT/compile_time.log | tee -a $M
say "bench dsa"
timeout 120 python3 -m cake_rt bench dsa --no-peers --repeats 10 --warmup 2 --budget-s 0.5 --side-stream 1 --time-limit 90 \
  --json $OUT/dsa.json --markdown $OUT/dsa.md --compare bench/results/h200_2026-12-01b_dsa.json > $OUT/bench_dsa.log 2>&1
echo "bench dsa rc=$?" | tee -a $M; grep -E "prepared|hold" $OUT/bench_dsa.log | cut -c1-150 | head -24 | tee -a $M
say "bench ssd with peers"
timeout 170 python3 -m cake_rt bench ssd --repeats 10 --warmup 2 --budget-s 0.6 --rows seed,m2-2.7b,m2-2.7b-b8,nemotron-h,short \
  --json $OUT/ssd.json --markdown $OUT/ssd.md --compare bench/results/h200_2026-12-01b_ssd.json > $OUT/bench_ssd.log 2>&1; echo "bench ssd rc=$?" | tee -a $M
grep -E "ssd " $OUT/bench_ssd.log | cut -c1-170 | tail -8 | tee -a $M
say "bench ssd varlen (no peers)"
timeout 45 python3 -m cake_rt bench ssd --no-peers --repeats 10 --warmup 2 --budget-s 0.6 --rows varlen \
  --json $OUT/ssd_varlen.json --markdown $OUT/ssd_varlen.md --compare bench/results/h200_2026-12-01b_ssd_varlen.json > $OUT/bench_ssd_varlen.log 2>&1; echo "bench varlen rc=$?" | tee -a $M
grep -E "ssd " $OUT/bench_ssd_varlen.log | cut -c1-170 | tail -3 | tee -a $M
say "done"
cd $OUT && tar czf final.tgz *.log *.json *.md *.txt *.xml 2>/dev/null; rm -f $(ls | grep -v final.tgz); echo "files $(ls | wc -l)"
