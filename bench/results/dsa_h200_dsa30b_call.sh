#!/usr/bin/env bash
# dsa30b call (issue #12: dsa30's register-operand product at H = 16, 32, 64 with warpgroup 1's waits on warpgroup 0's
# key copies moved ahead of the steps that let warpgroup 0 copy the next tile: dsa30's call hung at S1 H = 32, warpgroup
# 0's FULL mbarrier two phases past warpgroup 1's parity wait; other score bits there, deterministic).
# First, on the CPU (~4 min): the setup dsa_h200_dsa30b_setup.sh (it copies this kit to /work/main/.dev/dsa30b and
# builds base = main, arm = branch dsa30b, their cubins). Then:
#   run  command "bash .dev/dsa30b/call.sh"  carry [".dev/dsa30b"]  timeout_s 180  (kind nvidia-h200; END = 165 s of
#   command at most)
# 0. The arm's fingerprints alone, 20 s at most (base: ~3 s): the S1 H = 32 case hung dsa30. If they do not finish, the
#    call stops there (the rest would hang the same way): exit 3, "HANG" in the output.
# 1. Side by side: the arm's DSA GPU tests (the float64 references; the bitwise claims: splits, block sizes, schedules,
#    side stream, entries), compute-sanitizer memcheck / racecheck / synccheck on scripts/sanitize-case dsa (H = 32, 64
#    take the new product, 24 the old), the arm's fingerprints twice (deterministic) and base's once (the H = 16, 32, 64
#    cases differ from base, the others are equal).
# 2. Bench A/B base / arm / arm / base on S1, S2, C1, Z3cp, A3 at H = 32 and 64, each in its own process and cache.
# 3. If 22 s are left: ncu of S2 at H = 64 on the arm (tensor pipe, L1 / shared throughput).
# Everything packed into $OUT/dsa30b.tgz; the output's tail: the verdicts, then the eager and prepared tables.
set -o pipefail
cd .dev/dsa30b
V=$PWD
export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
W=$(mktemp -d); mkdir -p $OUT
L=$W/log.txt
END=${END:-165}
pack() { cp $V/*.sh $V/trees.txt $V/setup.log $W/ 2>/dev/null; tar czf $OUT/dsa30b.tgz -C $W . ; }
trap pack EXIT
say() { echo "== [$SECONDS s] $*" | tee -a $L; }
lim() { local a=$1 b=$((END - SECONDS)); [ $b -lt $a ] && a=$b; [ $a -lt 1 ] && a=1; echo $a; }
run_in() { local d=$1; shift; (cd $V/$d && CAKE_RT_CACHE_DIR=$V/$d/.cubins PYTHONPATH=$V/$d "$@"); }
cat $V/trees.txt | tee -a $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $L
say "the arm's fingerprints alone (20 s at most)"
run_in arm timeout 20 python3 scripts/dsa-fingerprint > $W/fp_arm1.txt 2>&1; rc=$?; echo "fingerprint arm1 rc=$rc" >> $L
echo "fingerprint arm1 rc=$rc, $(grep -c ' ' $W/fp_arm1.txt) lines (27 expected)"
if [ $rc -ne 0 ]; then echo "HANG (or failure) in the arm's fingerprints; last lines:"; tail -5 $W/fp_arm1.txt; exit 3; fi
say "the arm's GPU tests beside sanitize dsa and the fingerprints (arm once more, base once)"
(run_in arm env OUT=$W/san timeout $(lim 80) bash scripts/sanitize dsa memcheck racecheck synccheck > $W/san.txt 2>&1; echo "sanitize arm rc=$?" >> $W/san.txt) &
fp() { run_in $1 timeout $(lim 40) python3 scripts/dsa-fingerprint > $W/fp_$2.txt 2>&1; echo "fingerprint $2 rc=$?" >> $L; }
fp base base & fp arm arm2 &
run_in arm timeout $(lim 80) python3 -m pytest -q -ra -p no:cacheprovider -n 4 --dist loadfile --timeout 75 tests/dsa tests/acceptance/test_dsa_contract_gpu.py --ignore=tests/dsa/test_dsa_compile.py > $W/tests_arm.log 2>&1; echo "tests arm rc=$?" >> $L
wait
cat $W/san.txt >> $L; grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|bitwise equal\|False" $W/san/*.log >> $L 2>&1
echo "tests arm:" >> $L; grep -E "passed|failed|FAILED|ERROR|Timeout" $W/tests_arm.log | tail -8 >> $L
n1=$(grep -c ' ' $W/fp_arm1.txt); nb=$(grep -c ' ' $W/fp_base.txt)
if diff -q $W/fp_arm1.txt $W/fp_arm2.txt > /dev/null && [ "$n1" -ge 27 ]; then echo "FINGERPRINTS arm: $n1 lines, DETERMINISTIC (two runs equal)" | tee -a $L; else echo "FINGERPRINTS arm: the two runs DIFFER (or fewer than 27 lines: $n1)" | tee -a $L; diff $W/fp_arm1.txt $W/fp_arm2.txt | head -10 | tee -a $L; fi
diff $W/fp_base.txt $W/fp_arm1.txt > $W/fp_arm_vs_base.diff
echo "FINGERPRINTS arm against base ($nb lines): $(grep -c '^>' $W/fp_arm_vs_base.diff) lines of the arm differ (expected: the H = 16, 32, 64 cases)" | tee -a $L
BA="--no-peers --repeats 8 --warmup 2 --budget-s 0.4 --side-stream none --heads 32,64 --rows S1,S2,C1,Z3cp,A3"
bench() {  # arm round limit
  local a=$1 r=$2 t=$3
  say "bench dsa $a (round $r)"
  run_in $a env CAKE_RT_GIT_HASH=$a timeout $(lim $t) python3 -m cake_rt bench dsa $BA --json $W/dsa_${a}_$r.json --markdown $W/dsa_${a}_$r.md > $W/bench_${a}_$r.log 2>&1; echo "bench $a $r rc=$?" >> $L
}
bench base 1 20; bench arm 1 17; bench arm 2 17; bench base 2 17
python3 $V/arm/scripts/dsa-ab-summary $W > $W/summary.txt 2>&1
ARM=eager python3 $V/arm/scripts/dsa-ab-summary $W > $W/summary_eager.txt 2>&1
NCU="--clock-control none -k regex:dsa_scan -s 1 -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum"
if [ $((END - SECONDS)) -gt 22 ]; then
  n=ncu_arm_S2_H64
  say "ncu S2 H = 64 (arm)"
  run_in arm timeout $(lim $((END - SECONDS - 4))) ncu $NCU python3 scripts/dsa-row S2 --heads 64 > $W/$n.txt 2>&1; echo "$n rc=$?" >> $L
  grep -h "Duration\|Elapsed Cycles\|tensor_op_hmma\|L1/TEX Cache Throughput\|Shared Memory\|wavefronts_mem_shared\|op_shared" $W/$n.txt | head -12 > $W/${n}_short.txt
fi
say "end"
cat $W/ncu_*_short.txt 2>/dev/null
grep -E "^FINGERPRINTS|rc=|passed|failed|SUMMARY|bitwise|== \[" $L | cut -c1-200 | tail -n 30
cat $W/summary_eager.txt $W/summary.txt  # the prepared rows last (output_tail keeps the end)
