# ssd40 device call (issue #13, the sm_90a exact scan: its first copies, and its chunk-local state fused into the last
# row block), prepared on the CPU in the eleventh session.
#   stage: bash bench/results/ssd_cpu_ssd40_prepare.sh (CPU: the arms under .dev/ssd40/ and their sm_90a cubins)
#   run: command "bash .dev/ssd40/call.sh", carry [".dev/ssd40"] (~17 MB), timeout_s 170, kind nvidia-h200
#   (~120 s of command expected: 9 bench runs ~65 s, the trace ~12 s, the parallel checks ~40 s; every step under its own timeout; one tgz under $OUT)
# Arms (trees under .dev/ssd40/, each with its own precompiled sm_90a cubins in <arm>/.cubins; .ref names the tree):
#   base  main
#   a     + ssd_cpu_ssd40_a.diff: the exact scan's producer prefetches the x / B / C / z tensor-map descriptors at the
#         kernel's start and issues chunk 0's C_0, B_0 / X_0, z_0 ahead of chunk 0's prep
#   b     + ssd_cpu_ssd40_b.diff (branch ssd40): a, and in the programs of one unit and one pass of the state columns
#         (b8's, varlen's) the chunk-local state's products in the output's last row block, on the B_j / X_j it loads
#         anyway: no state pass of loads (a chunk's sub-block loads 14 -> 10 at chunk 256, 5 -> 3 at 128, each a round
#         trip with the one B / X slot of dstate 128). The same products in the same order: the same bits. Every
#         chunk-parallel and sm_80 program compiles to main's SASS (bench/results/ssd_cpu_ssd40_sass_diff.log).
#         Also scripts/ssd-exact-trace (run here on b)
# Prediction: a: b8 and varlen level (1.000-1.005x: ~1-2 us a CTA start). b: b8 0.502 -> ~0.47-0.49 ms (1.03-1.07x),
# varlen 1.283 -> ~1.20-1.25 ms (1.03-1.07x); seed, short (chunk-parallel, main's SASS) level.
R=$PWD; D=$R/.dev/ssd40
L=$(mktemp -d); export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
trap 'exit 143' TERM
trap 'cp $OUT/summary.log $D/call.sh $L/ 2>/dev/null; tar czf $OUT/ssd40.tgz -C $L . ; echo packed' EXIT
say() { echo "[$SECONDS s] $*" | tee -a $OUT/summary.log; }
arm() { export PYTHONPATH=$D/$1 CAKE_RT_CACHE_DIR=$D/$1/.cubins; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $OUT/summary.log
cat $D/*/.ref | tee -a $OUT/summary.log
ROWS=m2-2.7b-b8,varlen,seed,short
n=0
for a in base a b b a base base a b; do  # three runs an arm: b8's base runs spread 0.52-0.55 ms in ssd39's call
  n=$((n+1)); say "bench $a ($n)"
  (arm $a; cd $D/$a && timeout 25 python3 -m cake_rt.cli bench ssd --no-peers --repeats 8 --warmup 2 --budget-s 0.4 \
      --rows $ROWS --json $L/ab_${a}_$n.json > $L/ab_${a}_$n.log 2>&1); echo "rc $?" >> $L/ab_${a}_$n.log
done
python3 $D/base/scripts/ssd-ab-summary $L | tee -a $OUT/summary.log  # means and mins of the medians, base / a and base / b
say "exact-scan trace (b)"
(arm b; cd $D/b && timeout 30 python3 scripts/ssd-exact-trace m2-2.7b-b8 varlen --runs 3 > $L/trace_b.log 2>&1; echo "rc $?" >> $L/trace_b.log)
grep -E "^[a-z0-9-]+: |first tile|last tile|row 0: C wait|chunk: set in|^    j=0|rc " $L/trace_b.log | head -24 | tee -a $OUT/summary.log
say "fingerprints + tests + sanitizers (parallel)"
for a in base a b; do
  (arm $a; cd $D/$a && timeout 45 python3 scripts/ssd-fingerprint > $L/fp_$a.txt 2> $L/fp_$a.err) &
done
(arm b; cd $D/b && timeout 50 python3 -m pytest -q -ra -p no:cacheprovider -n 4 --dist loadfile tests/ssd tests/acceptance/test_ssd_contract_gpu.py --ignore=tests/ssd/test_ssd_compile.py > $L/tests_b.log 2>&1; echo "tests b rc $?" >> $L/tests_b.log) &
for t in memcheck racecheck synccheck; do
  (arm b; cd $D/b && timeout 45 compute-sanitizer --tool $t --error-exitcode 9 python3 scripts/sanitize-case ssd > $L/san_b_case_$t.log 2>&1; echo "b $t (sanitize-case ssd) rc $?" >> $L/san_b_case_$t.log) &
done
(arm b; cd $D/b && timeout 45 compute-sanitizer --tool memcheck --error-exitcode 9 python3 scripts/ssd-row m2-2.7b-b8 --calls 1 > $L/san_b_b8_memcheck.log 2>&1; echo "b memcheck (ssd-row m2-2.7b-b8) rc $?" >> $L/san_b_b8_memcheck.log) &
wait
wc -l $L/fp_*.txt | tee -a $OUT/summary.log
for a in a b; do
  if diff $L/fp_base.txt $L/fp_$a.txt > $L/fp_$a.diff; then say "fingerprints base == $a: EQUAL"; else say "fingerprints base vs $a: DIFFER"; head -6 $L/fp_$a.diff | tee -a $OUT/summary.log; fi
done
grep -c "families equal" $L/fp_base.txt $L/fp_a.txt $L/fp_b.txt | tee -a $OUT/summary.log
grep -E "FAILED|Error" $L/tests_b.log | head -6 | tee -a $OUT/summary.log; tail -2 $L/tests_b.log | tee -a $OUT/summary.log
for f in $L/san_*.log; do grep -E "ERROR SUMMARY|bitwise" $f | head -8 | tee -a $OUT/summary.log; tail -1 $f | tee -a $OUT/summary.log; done
say done
