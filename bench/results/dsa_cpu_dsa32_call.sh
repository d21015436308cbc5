#!/usr/bin/env bash
# dsa32 call (round 29, issue #12): the append's keys and ballots before its stores (a), and with round 26's armS, the
# head sum's queries in pairs (b); both the same bits as main. First, on the CPU: bash
# bench/results/dsa_cpu_dsa32_prepare.sh. Then: run command "bash .dev/dsa32/call.sh", carry [".dev/dsa32"], timeout_s
# 240 (END = 220 s of command at most).
# 1. Side by side: a's and b's DSA GPU tests, compute-sanitizer memcheck / racecheck / synccheck on scripts/sanitize-case
#    dsa for a and b (lineinfo programs), the three trees' fingerprints (a and b must equal base).
# 2. Bench base / a / b / b / a / base on S1, S2, C1, Z3cp, A3 at H = 32 and 64, each in its own process and cache.
# 3. The trace at S2 H = 64 and S1 H = 32 of a and b (the append segment, the EMPTY waits, the periods).
set -o pipefail
cd .dev/dsa32
V=$PWD
export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
W=$(mktemp -d); mkdir -p $OUT
L=$W/log.txt
END=${END:-220}
pack() { cp $V/*.sh $V/trees.txt $V/setup.log $W/ 2>/dev/null; tar czf $OUT/dsa32.tgz -C $W . ; }
trap pack EXIT
say() { echo "== [$SECONDS s] $*" | tee -a $L; }
lim() { local a=$1 b=$((END - SECONDS)); [ $b -lt $a ] && a=$b; [ $a -lt 1 ] && a=1; echo $a; }
run_in() { local d=$1; shift; (cd $V/$d && CAKE_RT_CACHE_DIR=$V/$d/.cubins PYTHONPATH=$V/$d "$@"); }
cat $V/trees.txt | tee -a $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $L
say "a's and b's GPU tests beside their sanitizers and the three fingerprints"
for t in a b; do
  (run_in $t env OUT=$W/san_$t timeout $(lim 80) bash scripts/sanitize dsa memcheck racecheck synccheck > $W/san_$t.txt 2>&1; echo "sanitize $t rc=$?" >> $W/san_$t.txt) &
done
fp() { run_in $1 timeout $(lim 50) python3 scripts/dsa-fingerprint > $W/fp_$1.txt 2>&1; echo "fingerprint $1 rc=$?" >> $L; }
fp base & fp a & fp b &
for t in a b; do
  (run_in $t timeout $(lim 80) python3 -m pytest -q -ra -p no:cacheprovider -n 3 --dist loadfile --timeout 75 tests/dsa tests/acceptance/test_dsa_contract_gpu.py --ignore=tests/dsa/test_dsa_compile.py --ignore=tests/dsa/test_dsa_product_trace_cpu.py > $W/tests_$t.log 2>&1; echo "tests $t rc=$?" >> $L) &
done
wait
for t in a b; do cat $W/san_$t.txt >> $L; grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|bitwise equal\|False" $W/san_$t/*.log >> $L 2>&1; echo "tests $t:" >> $L; grep -E "passed|failed|FAILED|ERROR|Timeout" $W/tests_$t.log | tail -6 >> $L; done
for t in a b; do
  n=$(grep -c ' ' $W/fp_$t.txt)
  if diff -q $W/fp_base.txt $W/fp_$t.txt > /dev/null && [ "$n" -ge 27 ]; then echo "FINGERPRINTS: $t EQUAL to base ($n lines)" | tee -a $L; else echo "FINGERPRINTS: $t DIFFERS from base (or short: $n lines)" | tee -a $L; diff $W/fp_base.txt $W/fp_$t.txt | head -6 | tee -a $L; fi
done
BA="--no-peers --repeats 8 --warmup 2 --budget-s 0.4 --side-stream none --heads 32,64 --rows S1,S2,C1,Z3cp,A3"
bench() {  # tree round limit
  local a=$1 r=$2 t=$3
  say "bench dsa $a (round $r)"
  run_in $a env CAKE_RT_GIT_HASH=$a timeout $(lim $t) python3 -m cake_rt bench dsa $BA --json $W/dsa_${a}_$r.json --markdown $W/dsa_${a}_$r.md > $W/bench_${a}_$r.log 2>&1; echo "bench $a $r rc=$?" >> $L
}
bench base 1 22; bench a 1 15; bench b 1 15; bench b 2 15; bench a 2 15; bench base 2 15
python3 $V/a/scripts/dsa-ab-summary $W > $W/summary.txt 2>&1
ARM=eager python3 $V/a/scripts/dsa-ab-summary $W > $W/summary_eager.txt 2>&1
for t in a b; do
  [ $((END - SECONDS)) -ge 12 ] || break
  say "trace $t: S2 H = 64, S1 H = 32"
  run_in $t timeout $(lim 12) python3 scripts/dsa-product-trace S2 --H 64 --runs 3 > $W/trace_${t}_S2_H64.txt 2>&1; echo "trace $t S2 H64 rc=$?" >> $L
  run_in $t timeout $(lim 10) python3 scripts/dsa-product-trace S1 --H 32 --runs 2 > $W/trace_${t}_S1_H32.txt 2>&1; echo "trace $t S1 H32 rc=$?" >> $L
done
say "end"
grep -E "^FINGERPRINTS|rc=|passed|failed|SUMMARY|bitwise|== \[" $L | cut -c1-200 | tail -n 30
for f in $W/trace_*.txt; do echo "# $(basename $f)"; grep -E "H=|period|EMPTY wait  |head sum  |sel: append|sel: compaction  |sel: FULL wait" $f | cut -c1-110; done
cat $W/summary_eager.txt $W/summary.txt
