# ssd36 device call (issue #13, short's next items), prepared on the CPU in the ninth session (no device time left).
#   run: command "bash .dev/ssd36/call.sh", carry [".dev/ssd36"], timeout_s 200, kind nvidia-h200
# Arms (trees under .dev/ssd36/, each with its own precompiled sm_90a cubins in <arm>/.cubins; .ref names the commit):
#   base  main 216d0f0
#   a     ssd36 94943d8: few-tile programs (SSD_ROWS > 1) issue phase 3's z_i and the ring's first sub-blocks before the
#         wait for phase 2 (C_i already was), and ask L2 for the pair's later row block's C and z
#   b     ssd36 a5a9a24 (head): a + at the kernel's start the producer asks L2 for the segment table, A, dt_bias and
#         D, and the math thread 0 for every B / X sub-block of its phase-1 item before the prep (tensor-map prefetch)
# Every arm carries ssd36's scripts/ssd-phase-trace (a "p1 dt in" stamp after the first phase-1 item's dt wait); the
# step trace of short (phase 3's per-step waits: z, the ring's refills) runs on base and b with each tree's own script.
# One-item programs (SSD_ROWS 1: seed, m2-2.7b, every long row) keep main's SASS in both arms (scripts/sass-diff on the
# CPU), so only short can move; seed and m2-2.7b are the control.
# Prediction (from ssd35's trace of short, kernel ~13 us, bench 18.5 us): a: z's DRAM round trip (~0.7 us) and B_1 / X_1
# leave the path after barrier 2: phase 3's end 0.2-0.5 us earlier; b: the table chain's second link and the ring's first
# copies and two refills of phase 1 wait for L2 instead of DRAM: "p1 dt in" ~0.3 us and phase 1's last CTA ~0.8-1.2 us
# earlier. short 18.5 -> ~17.5 us (b, ~1.06x), a alone ~1.02x; seed and m2-2.7b level (same SASS).
R=$PWD; D=$R/.dev/ssd36
L=$(mktemp -d); export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
trap 'exit 143' TERM
trap 'cp $OUT/summary.log $D/call.sh $L/ 2>/dev/null; tar czf $OUT/ssd36.tgz -C $L . ; echo packed' EXIT
say() { echo "[$SECONDS s] $*" | tee -a $OUT/summary.log; }
arm() { export PYTHONPATH=$D/$1 CAKE_RT_CACHE_DIR=$D/$1/.cubins; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $OUT/summary.log
cat $D/*/.ref | tee -a $OUT/summary.log
ROWS=short,seed,m2-2.7b
n=0
for a in base a b b a base; do
  n=$((n+1)); say "bench $a ($n)"
  (arm $a; cd $D/$a && timeout 25 python3 -m cake_rt.cli bench ssd --no-peers --repeats 8 --warmup 2 --budget-s 0.4 \
      --rows $ROWS --json $L/ab_${a}_$n.json > $L/ab_${a}_$n.log 2>&1); echo "rc $?" >> $L/ab_${a}_$n.log
done
python3 - $L <<'PY' | tee -a $OUT/summary.log
import json, sys, glob, os, statistics
L = sys.argv[1]
res = {}
for f in sorted(glob.glob(os.path.join(L, "ab_*.json"))):
    arm = os.path.basename(f).split("_")[1]
    try:
        d = json.load(open(f))
    except Exception as e:
        print(f, e); continue
    for r in d["records"]:
        if r.get("arm") != "ours" or r.get("error"): continue
        res.setdefault(r["row"], {}).setdefault(arm, []).append((r["ms"]["median"], r["extra"].get("family")))
for name, v in res.items():
    m, ra, rb = ([x for x, _ in v.get(k, [])] for k in ("base", "a", "b"))
    fam = {f for k in v for _, f in v[k]}
    q = lambda x: statistics.mean(m) / statistics.mean(x) if m and x else float("nan")
    print(f"{name:10s} {fam} main {['%.4f' % x for x in m]} a {['%.4f' % x for x in ra]} b {['%.4f' % x for x in rb]} "
          f"main/a {q(ra):.3f} main/b {q(rb):.3f}")
PY
say "fingerprints + tests + sanitizers (parallel)"
for a in base a b; do
  (arm $a; cd $D/$a && timeout 50 python3 scripts/ssd-fingerprint > $L/fp_$a.txt 2> $L/fp_$a.err) &
done
(arm b; cd $D/b && timeout 60 python3 -m pytest -q -ra -p no:cacheprovider -n 4 --dist loadfile tests/ssd tests/acceptance/test_ssd_contract_gpu.py --ignore=tests/ssd/test_ssd_compile.py > $L/tests_b.log 2>&1; echo "tests b rc $?" >> $L/tests_b.log) &
(arm a; cd $D/a && timeout 50 python3 -m pytest -q -ra -p no:cacheprovider -n 2 tests/ssd/test_ssd_gpu.py -k "row_parts or slices or words_zero" > $L/tests_a.log 2>&1; echo "tests a (split, slices) rc $?" >> $L/tests_a.log) &
for t in memcheck racecheck synccheck; do
  (arm b; cd $D/b && timeout 60 compute-sanitizer --tool $t --error-exitcode 9 python3 scripts/sanitize-case ssd > $L/san_b_$t.log 2>&1; echo "b $t (sanitize-case ssd) rc $?" >> $L/san_b_$t.log) &
  for a in a b; do
    (arm $a; cd $D/$a && timeout 60 compute-sanitizer --tool $t --error-exitcode 9 python3 scripts/ssd-row short --calls 1 > $L/san_${a}_short_$t.log 2>&1; echo "$a $t (ssd-row short) rc $?" >> $L/san_${a}_short_$t.log) &
  done
done
wait
wc -l $L/fp_*.txt | tee -a $OUT/summary.log
for a in a b; do
  if diff $L/fp_base.txt $L/fp_$a.txt > $L/fp_$a.diff; then say "fingerprints base == $a: EQUAL"; else say "fingerprints base vs $a: DIFFER"; head -6 $L/fp_$a.diff | tee -a $OUT/summary.log; fi
done
grep -c "families equal" $L/fp_a.txt $L/fp_b.txt | tee -a $OUT/summary.log
for f in $L/tests_b.log $L/tests_a.log; do grep -E "FAILED|Error" $f | head -6 | tee -a $OUT/summary.log; tail -2 $f | tee -a $OUT/summary.log; done
for f in $L/san_*.log; do tail -2 $f | tee -a $OUT/summary.log; done
for a in base a b; do
  say "phase trace $a"
  (arm $a; cd $D/$a && timeout 25 python3 scripts/ssd-phase-trace short --runs 5 > $L/phase_$a.log 2>&1; echo "rc $?" >> $L/phase_$a.log)
  cat $L/phase_$a.log | tee -a $OUT/summary.log
done
for a in base b; do
  say "step trace $a"
  (arm $a; cd $D/$a && timeout 25 python3 scripts/ssd-step-trace short --runs 5 > $L/step_$a.log 2>&1; echo "rc $?" >> $L/step_$a.log)
  tail -40 $L/step_$a.log >> $OUT/summary.log
done
say done
