# ssd41 device call (issue #13, the chunk-parallel kernel's chunk prep in its producer warpgroup), prepared on the CPU
# in the twelfth session.
#   stage: bash bench/results/ssd_cpu_ssd41_prepare.sh (CPU: the arms under .dev/ssd41/ and their sm_90a cubins)
#   run: command "bash .dev/ssd41/call.sh", carry [".dev/ssd41"] (~20 MB), timeout_s 170, kind nvidia-h200
#   (~110 s of command expected: 9 bench runs ~60 s, the parallel checks ~40 s; every step under its own timeout; one
#   tgz under $OUT, $OUT/ssd41.tgz)
# Arms (trees under .dev/ssd41/, each with its own precompiled sm_90a cubins in <arm>/.cubins; .ref names the tree):
#   base  main
#   a     + ssd_cpu_ssd41_a.diff (branch ssd41): ssd_chunkpar's producer computes each phase-1 item's chunk prep (ssd39's
#         produce_chunk_prep) into one of two prep sets an item ahead (after the current item's state loads; a slice's
#         first item's before its loads), the math warpgroup waits for the set instead of running the prep; phase 3's
#         saved cs and dt' are copied by the producer into the next set (no copy and two barriers fewer on the math
#         warpgroup a tile). The same arithmetic on the same thread positions: the same bits. The exact scan and sm_80
#         compile to main's SASS (bench/results/ssd_cpu_ssd41_sass_diff.log).
#   b     a + ssd_cpu_ssd41_b.diff: a slice's first item's prep after its first B / X loads (they land under it)
# Prediction: a: m2-2.7b 0.293 -> ~0.289 ms (1.01-1.02x), nemotron-h 0.988 -> ~0.97 (1.01-1.03x), seed 1.00-1.02x,
# short 17.6 -> ~18.2 us (0.96-0.99x: its one phase-1 item's copies now wait for the producer's prep), b8 (exact, main's
# SASS) level. b: short level with main or better (1.00-1.03x), the long rows as a.
R=$PWD; D=$R/.dev/ssd41
L=$(mktemp -d); export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
trap 'exit 143' TERM
trap 'cp $OUT/summary.log $D/call.sh $L/ 2>/dev/null; tar czf $OUT/ssd41.tgz -C $L . ; echo packed' EXIT
say() { echo "[$SECONDS s] $*" | tee -a $OUT/summary.log; }
arm() { export PYTHONPATH=$D/$1 CAKE_RT_CACHE_DIR=$D/$1/.cubins; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $OUT/summary.log
cat $D/*/.ref | tee -a $OUT/summary.log
ROWS=seed,m2-2.7b,nemotron-h,short,m2-2.7b-b8
n=0
for a in base a b b a base base a b; do  # three runs an arm, each in its own process and cache
  n=$((n+1)); say "bench $a ($n)"
  (arm $a; cd $D/$a && timeout 25 python3 -m cake_rt.cli bench ssd --no-peers --repeats 8 --warmup 2 --budget-s 0.4 \
      --rows $ROWS --json $L/ab_${a}_$n.json > $L/ab_${a}_$n.log 2>&1); echo "rc $?" >> $L/ab_${a}_$n.log
done
python3 $D/base/scripts/ssd-ab-summary $L | tee -a $OUT/summary.log  # means and mins of the medians, base / a and base / b
say "fingerprints + tests + sanitizers (parallel)"
for a in base a b; do
  (arm $a; cd $D/$a && timeout 45 python3 scripts/ssd-fingerprint > $L/fp_$a.txt 2> $L/fp_$a.err) &
done
(arm a; cd $D/a && timeout 55 python3 -m pytest -q -ra -p no:cacheprovider -n 4 --dist loadfile tests/ssd tests/acceptance/test_ssd_contract_gpu.py --ignore=tests/ssd/test_ssd_compile.py > $L/tests_a.log 2>&1; echo "tests a rc $?" >> $L/tests_a.log) &
for t in memcheck racecheck synccheck; do
  (arm a; cd $D/a && timeout 50 compute-sanitizer --tool $t --error-exitcode 9 python3 scripts/sanitize-case ssd > $L/san_a_case_$t.log 2>&1; echo "a $t (sanitize-case ssd) rc $?" >> $L/san_a_case_$t.log) &
done
wait
wc -l $L/fp_*.txt | tee -a $OUT/summary.log
for a in a b; do
  if diff $L/fp_base.txt $L/fp_$a.txt > $L/fp_$a.diff; then say "fingerprints base == $a: EQUAL"; else say "fingerprints base vs $a: DIFFER"; head -6 $L/fp_$a.diff | tee -a $OUT/summary.log; fi
done
grep -c "families equal" $L/fp_base.txt $L/fp_a.txt $L/fp_b.txt | tee -a $OUT/summary.log
grep -E "FAILED|Error" $L/tests_a.log | head -6 | tee -a $OUT/summary.log; tail -2 $L/tests_a.log | tee -a $OUT/summary.log
for f in $L/san_*.log; do grep -E "ERROR SUMMARY|bitwise" $f | head -8 | tee -a $OUT/summary.log; tail -1 $f | tee -a $OUT/summary.log; done
say done
