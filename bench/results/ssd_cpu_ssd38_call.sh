# ssd38 device call (issue #13, short's phase-1 path), prepared on the CPU in the tenth session for the next one.
#   stage: bash bench/results/ssd_cpu_ssd38_prepare.sh (CPU: the arms under .dev/ssd38/ and their sm_90a cubins)
#   run: command "bash .dev/ssd38/call.sh", carry [".dev/ssd38"] (~33 MB), timeout_s 140, kind nvidia-h200
#   (~100 s of command expected: ssd37's call took 83 s with the same steps; every step under its own timeout)
# Arms (trees under .dev/ssd38/, each with its own precompiled sm_90a cubins in <arm>/.cubins; .ref names the tree):
#   base  main (kernel tree e3fe439 in the tenth session)
#   a     + ssd_cpu_ssd38_kernel_a.diff (branch ssd38 c93ca7f): the chunk-parallel kernel's first producer thread
#         prefetches the x / B / C / z tensor-map descriptors (prefetch.tensormap) at the kernel's start; every sm_90a
#         chunk-parallel program
#   ab    + ssd_cpu_ssd38_kernel_b.diff (ssd38 7945b3b): a + the chunk prep's group-total prefix from totals loaded at
#         once (one unrolled chain of additions in the same left-to-right order, no load behind an addition: the same
#         bits); every program (both families share the prep)
# Prediction (the phase trace of short, us from the first CTA's start, base 3.36 / 6.88 / 14.50 at "p1 prep done" /
# phase 1's last CTA / phase 3's last end): a 3.36 / ~6.4 / ~14.0 (the first B / X and C / z copies no longer wait for
# their descriptors), ab ~3.2 / ~6.3 / ~13.9; the bench short 17.6 -> ~17.1 (a) / ~17.0 us (ab), seed and m2-2.7b level.
# base and a carry no tests (the GPU tests run on ab). Every arm's scripts/ssd-phase-trace is main's.
R=$PWD; D=$R/.dev/ssd38
L=$(mktemp -d); export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
trap 'exit 143' TERM
trap 'cp $OUT/summary.log $D/call.sh $L/ 2>/dev/null; tar czf $OUT/ssd38.tgz -C $L . ; echo packed' EXIT
say() { echo "[$SECONDS s] $*" | tee -a $OUT/summary.log; }
arm() { export PYTHONPATH=$D/$1 CAKE_RT_CACHE_DIR=$D/$1/.cubins; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $OUT/summary.log
cat $D/*/.ref | tee -a $OUT/summary.log
ROWS=short,seed,m2-2.7b
n=0
for a in base a ab ab a base; do
  n=$((n+1)); say "bench $a ($n)"
  (arm $a; cd $D/$a && timeout 20 python3 -m cake_rt.cli bench ssd --no-peers --repeats 8 --warmup 2 --budget-s 0.4 \
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
    m, ra, rb = ([x for x, _ in v.get(k, [])] for k in ("base", "a", "ab"))
    fam = {f for k in v for _, f in v[k]}
    q = lambda x: statistics.mean(m) / statistics.mean(x) if m and x else float("nan")
    print(f"{name:10s} {fam} main {['%.4f' % x for x in m]} a {['%.4f' % x for x in ra]} ab {['%.4f' % x for x in rb]} "
          f"main/a {q(ra):.3f} main/ab {q(rb):.3f}")
PY
for a in base a ab; do
  say "phase trace $a"
  (arm $a; cd $D/$a && timeout 12 python3 scripts/ssd-phase-trace short --runs 5 > $L/phase_$a.log 2>&1; echo "rc $?" >> $L/phase_$a.log)
  cat $L/phase_$a.log | tee -a $OUT/summary.log
done
say "fingerprints + tests + sanitizers (parallel)"
for a in base a ab; do
  (arm $a; cd $D/$a && timeout 37 python3 scripts/ssd-fingerprint > $L/fp_$a.txt 2> $L/fp_$a.err) &
done
(arm ab; cd $D/ab && timeout 40 python3 -m pytest -q -ra -p no:cacheprovider -n 4 --dist loadfile tests/ssd tests/acceptance/test_ssd_contract_gpu.py --ignore=tests/ssd/test_ssd_compile.py > $L/tests_ab.log 2>&1; echo "tests ab rc $?" >> $L/tests_ab.log) &
for t in memcheck racecheck synccheck; do
  (arm ab; cd $D/ab && timeout 37 compute-sanitizer --tool $t --error-exitcode 9 python3 scripts/ssd-row short --calls 1 > $L/san_ab_short_$t.log 2>&1; echo "ab $t (ssd-row short) rc $?" >> $L/san_ab_short_$t.log) &
done
wait
wc -l $L/fp_*.txt | tee -a $OUT/summary.log
for a in a ab; do
  if diff $L/fp_base.txt $L/fp_$a.txt > $L/fp_$a.diff; then say "fingerprints base == $a: EQUAL"; else say "fingerprints base vs $a: DIFFER"; head -6 $L/fp_$a.diff | tee -a $OUT/summary.log; fi
done
grep -c "families equal" $L/fp_a.txt $L/fp_ab.txt | tee -a $OUT/summary.log
grep -E "FAILED|Error" $L/tests_ab.log | head -6 | tee -a $OUT/summary.log; tail -2 $L/tests_ab.log | tee -a $OUT/summary.log
for f in $L/san_*.log; do tail -2 $f | tee -a $OUT/summary.log; done
say done
