#!/usr/bin/env bash
# dsa29 call (issue #12: the H = 64 head sum's chains). arm: two fmaf chains a sum and a block's queries in pairs (a new
# fixed order: other score bits); armS: the pairs alone (main's order: the same bits), to tell what the order change buys.
# First, on the CPU (~5 min): bash bench/results/dsa_h200_dsa29_setup.sh (it copies this kit to .dev/dsa29 and builds
# base = main, arm = main + dsa_h200_dsa29_arm.diff, armS = main + dsa_h200_dsa29_armS.diff, their cubins). Then:
#   run  command "bash .dev/dsa29/call.sh"  carry [".dev/dsa29"] (~21 MB)  timeout_s 195  (kind nvidia-h200; END = 180 s
#   of command at most, ~150 s expected on a warm machine)
# 1. Bench A/B base / arm / armS / armS / arm / base, each in its own process and cache (summ.py, prepared and eager).
# 2. Side by side: the arm's fingerprints twice (deterministic: equal to each other; against base: the H >= 16 cases
#    differ, H = 8's not), armS's and base's once (armS equal to base: the same bits), the arm's DSA GPU tests (the
#    float64 references; the bitwise claims: splits, block sizes, schedules, side stream, entries) and compute-sanitizer
#    memcheck / racecheck / synccheck on scripts/sanitize-case dsa (its bitwise checks).
# 3. If 45 s are left: armS's GPU tests and sanitizers. 4. If 24 s are left: ncu of S2 at H = 64 on the arm, per role and
#    source region (regions.py, as round 25's).
# Everything packed into $OUT/dsa29.tgz; the output's tail: the verdicts, the regions, the prepared table.
set -o pipefail
cd .dev/dsa29
V=$PWD
export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
W=$(mktemp -d); mkdir -p $OUT
L=$W/log.txt
END=${END:-180}
pack() { cp $V/*.sh $V/*.py $V/*.diff $V/trees.txt $V/static.txt $V/setup.log $W/ 2>/dev/null; tar czf $OUT/dsa29.tgz -C $W . ; }
trap pack EXIT
say() { echo "== [$SECONDS s] $*" | tee -a $L; }
lim() { local a=$1 b=$((END - SECONDS)); [ $b -lt $a ] && a=$b; [ $a -lt 1 ] && a=1; echo $a; }
run_in() { local d=$1; shift; (cd $V/$d && CAKE_RT_CACHE_DIR=$V/$d/.cubins PYTHONPATH=$V/$d "$@"); }
cat $V/trees.txt | tee -a $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $L
BA="--no-peers --repeats 8 --warmup 2 --budget-s 0.3 --side-stream none --rows S1,S2,C1,Z2cp,Z3cp,A1,A2,A3"
bench() {  # arm round limit
  local a=$1 r=$2 t=$3
  say "bench dsa $a (round $r)"
  run_in $a env CAKE_RT_GIT_HASH=$a timeout $(lim $t) python3 -m cake_rt bench dsa $BA --json $W/dsa_${a}_$r.json --markdown $W/dsa_${a}_$r.md > $W/bench_${a}_$r.log 2>&1; echo "bench $a $r rc=$?" >> $L
}
bench base 1 26; bench arm 1 20; bench armS 1 20; bench armS 2 20; bench arm 2 20; bench base 2 20
python3 $V/summ.py $W > $W/summary.txt 2>&1; cat $W/summary.txt >> $L
checks() {  # arm: its DSA GPU tests and sanitize dsa, side by side
  local a=$1
  (run_in $a env OUT=$W/san_$a timeout $(lim 60) bash scripts/sanitize dsa memcheck racecheck synccheck > $W/san_$a.txt 2>&1; echo "sanitize $a rc=$?" >> $W/san_$a.txt) &
  run_in $a timeout $(lim 60) python3 -m pytest -q -ra -p no:cacheprovider -n 8 --dist loadfile --timeout 55 tests/dsa tests/acceptance/test_dsa_contract_gpu.py --ignore=tests/dsa/test_dsa_compile.py > $W/tests_$a.log 2>&1; echo "tests $a rc=$?" >> $L
  wait
  cat $W/san_$a.txt >> $L; grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|bitwise equal\|False" $W/san_$a/*.log >> $L 2>&1
  echo "tests $a:" >> $L; grep -E "passed|failed|FAILED|ERROR|Timeout" $W/tests_$a.log | tail -8 >> $L
}
say "fingerprints (arm twice, armS and base once) beside the arm's GPU tests and sanitize dsa"
fp() { run_in $1 timeout $(lim 40) python3 scripts/dsa-fingerprint > $W/fp_$2.txt 2>&1; echo "fingerprint $2 rc=$?" >> $L; }
fp arm arm1 & fp base base & fp arm arm2 & fp armS armS &
checks arm
wait
n1=$(grep -c ' ' $W/fp_arm1.txt); nb=$(grep -c ' ' $W/fp_base.txt)
if diff -q $W/fp_arm1.txt $W/fp_arm2.txt > /dev/null && [ "$n1" -ge 27 ]; then echo "FINGERPRINTS arm: $n1 lines, DETERMINISTIC (two runs equal)" | tee -a $L; else echo "FINGERPRINTS arm: the two runs DIFFER (or fewer than 27 lines: $n1)" | tee -a $L; diff $W/fp_arm1.txt $W/fp_arm2.txt | head -10 | tee -a $L; fi
echo "FINGERPRINTS arm against base ($nb lines): $(diff $W/fp_base.txt $W/fp_arm1.txt | grep -c '^>') lines of the arm differ (expected: the H >= 16 cases; H = 8's equal)" | tee -a $L
diff $W/fp_base.txt $W/fp_arm1.txt > $W/fp_arm_vs_base.diff
if diff -q $W/fp_base.txt $W/fp_armS.txt > /dev/null && [ "$nb" -ge 27 ]; then echo "FINGERPRINTS armS: $nb EQUAL to base" | tee -a $L; else echo "FINGERPRINTS armS: DIFFER from base" | tee -a $L; diff $W/fp_base.txt $W/fp_armS.txt | head -10 | tee -a $L; fi
if [ $((END - SECONDS)) -gt 45 ]; then say "armS: GPU tests and sanitize dsa"; checks armS; fi
NCU="--clock-control none -k regex:dsa_scan -s 1 -c 1 --section SpeedOfLight --section WarpStateStats --section SourceCounters --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sectors_op_read.sum"
if [ $((END - SECONDS)) -gt 24 ]; then
  n=ncu_arm_S2_H64
  say "ncu S2 H = 64 (arm)"
  run_in arm env CAKE_RT_LINEINFO=1 timeout $(lim $((END - SECONDS - 8))) ncu $NCU -o $W/$n python3 scripts/dsa-row S2 --heads 64 > $W/$n.log 2>&1; echo "$n rc=$?" >> $L
  if [ -f $W/$n.ncu-rep ]; then
    timeout 20 ncu -i $W/$n.ncu-rep --page source --csv --print-source sass > $W/${n}_sass.csv 2>&1
    timeout 10 ncu -i $W/$n.ncu-rep --page details > $W/${n}_details.txt 2>&1
    { echo "#### S2 H = 64 (arm)"
      grep -h "Duration\|Elapsed Cycles\|tensor_op_hmma\|L1/TEX Cache Throughput\|L2 Cache Throughput\|Warp Cycles Per Issued" $W/${n}_details.txt | head -8
      python3 $V/regions.py $V/src/FULL_arm_H64.cu $V/src/LI_arm_H64.sass $W/${n}_sass.csv; } > $W/${n}_regions.txt 2>&1
  fi
fi
say "end"
ARM=eager python3 $V/summ.py $W > $W/summary_eager.txt 2>&1
cat $W/ncu_*_regions.txt 2>/dev/null | head -40
grep -E "^FINGERPRINTS|rc=|passed|failed|SUMMARY|== \[" $L | cut -c1-200 | tail -n 34
cat $W/summary_eager.txt $W/summary.txt  # the prepared rows last (output_tail keeps the end)
