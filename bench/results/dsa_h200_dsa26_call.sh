#!/usr/bin/env bash
# dsa26 call (round 22's n1 in halves): run  command "bash .dev/dsa26/call.sh"  carry [".dev/dsa26"]  timeout_s 215
# (kind nvidia-h200; ~125 s expected on a warm machine, at most END = 200 s). Trees and cubins first, on the CPU:
# bash bench/results/dsa_h200_dsa26_setup.sh (writes .dev/dsa26: base = main, n1a, n1b, n1h, ~24 MB).
#   n1a: the wgmma descriptors once per unit (tile loop 446 -> 391 SASS instructions at H = 32, 428 -> 372 at H = 64);
#   n1b: the head sum's queries in pairs (446 / 428 -> 446 / 424: the chains' schedule, not fewer instructions);
#   n1h: n1a + the pairs where H <= 32 (its H <= 32 programs are round 22's n1, SASS-identical; 390 / 374).
# Bench A/B base / n1a / n1b / n1h / n1h / n1b / n1a / base (~9 s each), each in its own process with its own cache;
# the summary and the best arm (geometric mean of the ten rows); then the DSA GPU tests and compute-sanitizer memcheck /
# racecheck / synccheck on scripts/sanitize-case dsa of the best arm, and the four trees' fingerprints, side by side
# (the tests get what is left to END: >= 120 s after ~75 s of bench). Everything packed into $OUT/dsa26.tgz.
set -o pipefail
cd .dev/dsa26
V=$PWD
export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
W=$(mktemp -d); mkdir -p $OUT  # the logs outside $OUT: only the packed .tgz comes back
L=$W/log.txt
END=${END:-200}
pack() { cp $V/call.sh $V/summ.py $V/trees.txt $W/ 2>/dev/null; tar czf $OUT/dsa26.tgz -C $W . ; }
trap pack EXIT
say() { echo "== [$SECONDS s] $*" | tee -a $L; }
lim() { local a=$1 b=$((END - SECONDS)); [ $b -lt $a ] && a=$b; [ $a -lt 1 ] && a=1; echo $a; }
run_in() { local d=$1; shift; (cd $V/$d && CAKE_RT_CACHE_DIR=$V/$d/.cubins PYTHONPATH=$V/$d "$@"); }
cat $V/trees.txt | tee -a $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $L
BA="--no-peers --repeats 8 --warmup 2 --budget-s 0.3 --side-stream none --rows S1,S2,C1,Z2cp,Z3cp"
bench() {  # arm round [more bench arguments]
  local a=$1 r=$2; shift 2
  say "bench dsa $a (round $r) $*"
  run_in $a env CAKE_RT_GIT_HASH=$a timeout $(lim 20) python3 -m cake_rt bench dsa $BA "$@" --json $W/dsa_${a}_$r.json --markdown $W/dsa_${a}_$r.md > $W/bench_${a}_$r.log 2>&1; echo "rc=$?" >> $L
}
bench base 1; bench n1a 1; bench n1b 1; bench n1h 1
bench n1h 2; bench n1b 2; bench n1a 2; bench base 2
python3 $V/summ.py $W > $W/summary.txt 2>&1; cat $W/summary.txt >> $L
B=$(sed -n 's/^BEST //p' $W/summary.txt); [ -n "$B" ] || B=n1a
say "GPU tests and sanitize dsa ($B), the four trees' fingerprints, side by side"
for a in base n1a n1b n1h; do (run_in $a timeout $(lim 40) python3 scripts/dsa-fingerprint > $W/fp_$a.txt 2>&1; echo "fingerprint $a rc=$?" >> $L) & done
(run_in $B env OUT=$W/san timeout $(lim 120) bash scripts/sanitize dsa memcheck racecheck synccheck > $W/san.txt 2>&1; echo "sanitize $B rc=$?" >> $W/san.txt) &
run_in $B timeout $(lim 130) python3 -m pytest -q -ra -p no:cacheprovider -n 8 --dist loadfile --timeout 110 tests/dsa tests/acceptance/test_dsa_contract_gpu.py --ignore=tests/dsa/test_dsa_compile.py > $W/tests.log 2>&1; echo "tests $B rc=$?" >> $L
wait
for a in n1a n1b n1h; do
  if diff -q $W/fp_base.txt $W/fp_$a.txt > /dev/null && [ "$(grep -c ' ' $W/fp_$a.txt)" -ge 27 ]; then echo "FINGERPRINTS $a: $(grep -c ' ' $W/fp_$a.txt) EQUAL to base" | tee -a $L; else echo "FINGERPRINTS $a: DIFFER" | tee -a $L; diff $W/fp_base.txt $W/fp_$a.txt | head -20 | tee -a $L; fi
done
cat $W/san.txt >> $L; grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|bitwise equal\|False" $W/san/*.log >> $L 2>&1
echo "tests $B:" >> $L; grep -E "passed|failed|FAILED|ERROR|Timeout" $W/tests.log | tail -8 >> $L
say "end"
ARM=eager python3 $V/summ.py $W > $W/summary_eager.txt 2>&1
grep -E "^FINGERPRINTS|rc=|passed|failed|SUMMARY|== \[" $L | cut -c1-200 | tail -n 36
cat $W/summary_eager.txt $W/summary.txt  # the prepared rows last (output_tail keeps the end)
