# ssd42 device call (issue #13: ssd41's producer prep for the chunk-256 chunk-parallel programs only), prepared on the
# CPU in the twelfth session.
#   stage: bash bench/results/ssd_cpu_ssd42_prepare.sh (CPU: the arms under .dev/ssd42/ and their sm_90a cubins)
#   run: command "bash .dev/ssd42/call.sh", carry [".dev/ssd42"] (~15 MB), timeout_s 150, kind nvidia-h200
#   (~100 s of command expected: 6 bench runs ~45 s, the parallel checks ~45 s; every step under its own timeout; one
#   tgz under $OUT, $OUT/ssd42.tgz)
# Arms (trees under .dev/ssd42/, each with its own precompiled sm_90a cubins in <arm>/.cubins; .ref names the tree):
#   base  main
#   arm   + ssd_cpu_ssd42_a.diff (branch ssd42): in the chunk-parallel sm_90a programs of 256-token chunks with
#         unsplit tiles (SSD_PREP_AHEAD: seed's and m2-2.7b's) the producer computes phase 1's chunk prep an item ahead into two prep sets and copies phase
#         3's saved prep into them (ssd41); a slice's first item's prep stays on the math warpgroup (from global dt,
#         into the set; its threads complete the set's full barrier, which the producer's next prep waits for). Every
#         other program is main's SASS (bench/results/ssd_cpu_ssd42_sass_diff.log).
# Prediction: seed 1.00-1.015x, m2-2.7b 1.01-1.02x (ssd41's a: 1.007x, 1.014x, the same code after a CTA's first
# item); nemotron-h, short (a split program: SSD_ROWS 4) and b8 level (main's SASS: noise only).
R=$PWD; D=$R/.dev/ssd42
L=$(mktemp -d); export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
trap 'exit 143' TERM
trap 'cp $OUT/summary.log $D/call.sh $L/ 2>/dev/null; tar czf $OUT/ssd42.tgz -C $L . ; echo packed' EXIT
say() { echo "[$SECONDS s] $*" | tee -a $OUT/summary.log; }
arm() { export PYTHONPATH=$D/$1 CAKE_RT_CACHE_DIR=$D/$1/.cubins; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $OUT/summary.log
cat $D/*/.ref | tee -a $OUT/summary.log
ROWS=seed,m2-2.7b,nemotron-h,short,m2-2.7b-b8
n=0
for a in base arm arm base base arm; do  # three runs an arm, each in its own process and cache
  n=$((n+1)); say "bench $a ($n)"
  (arm $a; cd $D/$a && timeout 25 python3 -m cake_rt.cli bench ssd --no-peers --repeats 8 --warmup 2 --budget-s 0.4 \
      --rows $ROWS --json $L/ab_${a}_$n.json > $L/ab_${a}_$n.log 2>&1); echo "rc $?" >> $L/ab_${a}_$n.log
done
python3 $D/base/scripts/ssd-ab-summary $L | tee -a $OUT/summary.log  # means and mins of the medians, base / arm
say "fingerprints + tests + sanitizers (parallel)"
for a in base arm; do
  (arm $a; cd $D/$a && timeout 45 python3 scripts/ssd-fingerprint > $L/fp_$a.txt 2> $L/fp_$a.err) &
done
(arm arm; cd $D/arm && timeout 55 python3 -m pytest -q -ra -p no:cacheprovider -n 4 --dist loadfile tests/ssd tests/acceptance/test_ssd_contract_gpu.py --ignore=tests/ssd/test_ssd_compile.py > $L/tests_arm.log 2>&1; echo "tests arm rc $?" >> $L/tests_arm.log) &
for t in memcheck racecheck synccheck; do
  (arm arm; cd $D/arm && timeout 55 compute-sanitizer --tool $t --error-exitcode 9 python3 scripts/sanitize-case ssd > $L/san_case_$t.log 2>&1; echo "arm $t (sanitize-case ssd) rc $?" >> $L/san_case_$t.log) &
  (arm arm; cd $D/arm && timeout 55 compute-sanitizer --tool $t --error-exitcode 9 python3 $D/case.py > $L/san_q256_$t.log 2>&1; echo "arm $t (case.py: chunk 256) rc $?" >> $L/san_q256_$t.log) &
done
wait
wc -l $L/fp_*.txt | tee -a $OUT/summary.log
if diff $L/fp_base.txt $L/fp_arm.txt > $L/fp_arm.diff; then say "fingerprints base == arm: EQUAL"; else say "fingerprints base vs arm: DIFFER"; head -6 $L/fp_arm.diff | tee -a $OUT/summary.log; fi
grep -c "families equal" $L/fp_base.txt $L/fp_arm.txt | tee -a $OUT/summary.log
grep -E "FAILED|Error" $L/tests_arm.log | head -6 | tee -a $OUT/summary.log; tail -2 $L/tests_arm.log | tee -a $OUT/summary.log
for f in $L/san_*.log; do grep -E "ERROR SUMMARY|bitwise" $f | head -8 | tee -a $OUT/summary.log; tail -1 $f | tee -a $OUT/summary.log; done
say done
