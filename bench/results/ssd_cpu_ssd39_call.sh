# ssd39 device call (issue #13, the exact scan's chunk prep off the math warpgroup's path), prepared on the CPU in the
# eleventh session.
#   stage: bash bench/results/ssd_cpu_ssd39_prepare.sh (CPU: the arms under .dev/ssd39/ and their sm_90a cubins)
#   run: command "bash .dev/ssd39/call.sh", carry [".dev/ssd39"] (~25 MB), timeout_s 170, kind nvidia-h200
#   (~150 s of command expected; every step under its own timeout; one tgz under $OUT)
# Arms (trees under .dev/ssd39/, each with its own precompiled sm_90a cubins in <arm>/.cubins; .ref names the tree):
#   base  main
#   arm   + ssd_cpu_ssd39_kernel.diff (branch ssd39): the sm_90a exact scan's producer warpgroup computes each chunk's
#         prep (dt', cs, w, the decay) a chunk ahead into one of two prep sets, the math warpgroup waits on the set's
#         full barrier instead of running the prep (four barriers) on its sequential path; the same bits. Every sm_90a
#         exact-scan program changes; the chunk-parallel and sm_80 programs compile to main's SASS
# Prediction: m2-2.7b-b8 (exact) 0.515 -> ~0.50 ms (1.02-1.04x), varlen (exact, chunk 128) 1.37 -> ~1.32 ms
# (1.03-1.05x); seed, nemotron-h, short (chunk-parallel, the same SASS) level within noise.
R=$PWD; D=$R/.dev/ssd39
L=$(mktemp -d); export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
trap 'exit 143' TERM
trap 'cp $OUT/summary.log $D/call.sh $L/ 2>/dev/null; tar czf $OUT/ssd39.tgz -C $L . ; echo packed' EXIT
say() { echo "[$SECONDS s] $*" | tee -a $OUT/summary.log; }
arm() { export PYTHONPATH=$D/$1 CAKE_RT_CACHE_DIR=$D/$1/.cubins; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $OUT/summary.log
cat $D/*/.ref | tee -a $OUT/summary.log
ROWS=m2-2.7b-b8,varlen,seed,nemotron-h,short
n=0
for a in base arm arm base; do
  n=$((n+1)); say "bench $a ($n)"
  (arm $a; cd $D/$a && timeout 28 python3 -m cake_rt.cli bench ssd --no-peers --repeats 8 --warmup 2 --budget-s 0.4 \
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
    m, b = ([x for x, _ in v.get(k, [])] for k in ("base", "arm"))
    fam = {f for k in v for _, f in v[k]}
    q = statistics.mean(m) / statistics.mean(b) if m and b else float("nan")
    print(f"{name:11s} {fam} main {['%.4f' % x for x in m]} arm {['%.4f' % x for x in b]} main/arm {q:.3f}")
PY
say "fingerprints + tests + sanitizers (parallel)"
for a in base arm; do
  (arm $a; cd $D/$a && timeout 40 python3 scripts/ssd-fingerprint > $L/fp_$a.txt 2> $L/fp_$a.err) &
done
(arm arm; cd $D/arm && timeout 45 python3 -m pytest -q -ra -p no:cacheprovider -n 4 --dist loadfile tests/ssd tests/acceptance/test_ssd_contract_gpu.py --ignore=tests/ssd/test_ssd_compile.py > $L/tests_arm.log 2>&1; echo "tests arm rc $?" >> $L/tests_arm.log) &
for t in memcheck racecheck synccheck; do
  (arm arm; cd $D/arm && timeout 40 compute-sanitizer --tool $t --error-exitcode 9 python3 scripts/sanitize-case ssd > $L/san_arm_case_$t.log 2>&1; echo "arm $t (sanitize-case ssd) rc $?" >> $L/san_arm_case_$t.log) &
done
(arm arm; cd $D/arm && timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 python3 scripts/ssd-row m2-2.7b-b8 --calls 1 > $L/san_arm_b8_memcheck.log 2>&1; echo "arm memcheck (ssd-row m2-2.7b-b8) rc $?" >> $L/san_arm_b8_memcheck.log) &
wait
wc -l $L/fp_*.txt | tee -a $OUT/summary.log
if diff $L/fp_base.txt $L/fp_arm.txt > $L/fp_arm.diff; then say "fingerprints base == arm: EQUAL"; else say "fingerprints base vs arm: DIFFER"; head -6 $L/fp_arm.diff | tee -a $OUT/summary.log; fi
grep -c "families equal" $L/fp_base.txt $L/fp_arm.txt | tee -a $OUT/summary.log
grep -E "FAILED|Error" $L/tests_arm.log | head -6 | tee -a $OUT/summary.log; tail -2 $L/tests_arm.log | tee -a $OUT/summary.log
for f in $L/san_*.log; do grep -E "ERROR SUMMARY|bitwise" $f | head -8 | tee -a $OUT/summary.log; tail -1 $f | tee -a $OUT/summary.log; done
say done
