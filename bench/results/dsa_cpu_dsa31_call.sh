#!/usr/bin/env bash
# dsa31 call (round 28, issue #12): where the H = 64 tile period goes (scripts/dsa-product-trace on main), then the
# candidate's A/B: the append of a query's score tile by 4 warps at BQ <= 2 (H >= 48), 2 at BQ <= 4 (H = 32 .. 40),
# instead of one warp a query (bench/results/dsa_cpu_dsa31_arm.diff; the same keys in the same order: the same bits).
# First, on the CPU (~5 min): bash bench/results/dsa_cpu_dsa31_prepare.sh (builds /work/main/.dev/dsa31: base = main,
# arm = main + the diff, their cubins and the traced programs'). Then:
#   run  command "bash .dev/dsa31/call.sh"  carry [".dev/dsa31"]  timeout_s 178  (kind nvidia-h200; END = 162 s of
#   command at most)
# 1. The trace on base: S2 at H = 64 (3 runs) and S1 at H = 32 (2 runs), ~25 s.
# 2. Side by side: the arm's DSA GPU tests, compute-sanitizer memcheck / racecheck / synccheck on scripts/sanitize-case
#    dsa (the arm's lineinfo programs), both trees' fingerprints (the diff must be empty).
# 3. Bench A/B base / arm / arm / base on S1, S2, C1, Z3cp, A3 at H = 32 and 64, each in its own process and cache.
# 4. If 18 s are left: the trace of the arm at S2 H = 64 (the append's segment and the EMPTY waits after the change).
# Everything packed into $OUT/dsa31.tgz; the output's tail: the verdicts, the S2 H = 64 trace of base, the eager and
# prepared A/B tables.
set -o pipefail
cd .dev/dsa31
V=$PWD
export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
W=$(mktemp -d); mkdir -p $OUT
L=$W/log.txt
END=${END:-162}
pack() { cp $V/*.sh $V/trees.txt $V/setup.log $W/ 2>/dev/null; tar czf $OUT/dsa31.tgz -C $W . ; }
trap pack EXIT
say() { echo "== [$SECONDS s] $*" | tee -a $L; }
lim() { local a=$1 b=$((END - SECONDS)); [ $b -lt $a ] && a=$b; [ $a -lt 1 ] && a=1; echo $a; }
run_in() { local d=$1; shift; (cd $V/$d && CAKE_RT_CACHE_DIR=$V/$d/.cubins PYTHONPATH=$V/$d "$@"); }
cat $V/trees.txt | tee -a $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $L
say "trace base: S2 H = 64, S1 H = 32"
run_in base timeout $(lim 16) python3 scripts/dsa-product-trace S2 --H 64 --runs 3 > $W/trace_base_S2_H64.txt 2>&1; echo "trace base S2 H64 rc=$?" >> $L
run_in base timeout $(lim 12) python3 scripts/dsa-product-trace S1 --H 32 --runs 2 > $W/trace_base_S1_H32.txt 2>&1; echo "trace base S1 H32 rc=$?" >> $L
say "the arm's GPU tests beside sanitize dsa and both trees' fingerprints"
(run_in arm env OUT=$W/san timeout $(lim 68) bash scripts/sanitize dsa memcheck racecheck synccheck > $W/san.txt 2>&1; echo "sanitize arm rc=$?" >> $W/san.txt) &
fp() { run_in $1 timeout $(lim 40) python3 scripts/dsa-fingerprint > $W/fp_$1.txt 2>&1; echo "fingerprint $1 rc=$?" >> $L; }
fp base & fp arm &
run_in arm timeout $(lim 68) python3 -m pytest -q -ra -p no:cacheprovider -n 4 --dist loadfile --timeout 70 tests/dsa tests/acceptance/test_dsa_contract_gpu.py --ignore=tests/dsa/test_dsa_compile.py --ignore=tests/dsa/test_dsa_product_trace_cpu.py > $W/tests_arm.log 2>&1; echo "tests arm rc=$?" >> $L
wait
cat $W/san.txt >> $L; grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|bitwise equal\|False" $W/san/*.log >> $L 2>&1
echo "tests arm:" >> $L; grep -E "passed|failed|FAILED|ERROR|Timeout" $W/tests_arm.log | tail -8 >> $L
nb=$(grep -c ' ' $W/fp_base.txt); na=$(grep -c ' ' $W/fp_arm.txt)
if diff -q $W/fp_base.txt $W/fp_arm.txt > /dev/null && [ "$na" -ge 27 ]; then echo "FINGERPRINTS: arm EQUAL to base ($na lines)" | tee -a $L; else echo "FINGERPRINTS: arm DIFFERS from base (or short: base $nb, arm $na lines)" | tee -a $L; diff $W/fp_base.txt $W/fp_arm.txt | head -10 | tee -a $L; fi
BA="--no-peers --repeats 8 --warmup 2 --budget-s 0.4 --side-stream none --heads 32,64 --rows S1,S2,C1,Z3cp,A3"
bench() {  # arm round limit
  local a=$1 r=$2 t=$3
  say "bench dsa $a (round $r)"
  run_in $a env CAKE_RT_GIT_HASH=$a timeout $(lim $t) python3 -m cake_rt bench dsa $BA --json $W/dsa_${a}_$r.json --markdown $W/dsa_${a}_$r.md > $W/bench_${a}_$r.log 2>&1; echo "bench $a $r rc=$?" >> $L
}
bench base 1 22; bench arm 1 14; bench arm 2 14; bench base 2 14
python3 $V/arm/scripts/dsa-ab-summary $W > $W/summary.txt 2>&1
ARM=eager python3 $V/arm/scripts/dsa-ab-summary $W > $W/summary_eager.txt 2>&1
if [ $((END - SECONDS)) -ge 18 ]; then
  say "trace arm: S2 H = 64"
  run_in arm timeout $(lim 16) python3 scripts/dsa-product-trace S2 --H 64 --runs 3 > $W/trace_arm_S2_H64.txt 2>&1; echo "trace arm S2 H64 rc=$?" >> $L
fi
say "end"
grep -E "^FINGERPRINTS|rc=|passed|failed|SUMMARY|bitwise|== \[" $L | cut -c1-200 | tail -n 24
cat $W/trace_base_S2_H64.txt | cut -c1-110
grep -E "H=32|period|waited at TURN|EMPTY wait  |sel: append|sel: FULL wait" $W/trace_base_S1_H32.txt | cut -c1-110
grep -E "H=64|period|EMPTY wait  |sel: append|sel: FULL wait" $W/trace_arm_S2_H64.txt 2>/dev/null | cut -c1-110
cat $W/summary_eager.txt $W/summary.txt  # the prepared rows last (output_tail keeps the end)
