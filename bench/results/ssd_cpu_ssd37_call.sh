# ssd37 device call (issue #13, short's first loads without the table chain), prepared on the CPU.
#   run: command "bash .dev/ssd37/call.sh", carry [".dev/ssd37"], timeout_s 102, kind nvidia-h200
# Arms (trees under .dev/ssd37/, each with its own precompiled sm_90a cubins in <arm>/.cubins; .ref names the commit):
#   base  main (kernel tree e3fe439)
#   a     ssd37 dbada5f: few-tile programs (SSD_ROWS > 1) on calls whose segments are the batch rows compute a chunk's
#         token and length from its index (kernel argument row_tokens), not from the table's two dependent loads; the
#         segment records asked of L2 at the start (phase 2 reads them)
#   b     ssd37 head: a + the producer issues the ring's first B / X sub-blocks of its phase-1 item before the dt, and the
#         math thread 0 asks L2 for the item's later sub-blocks before the prep
# Every arm carries ssd37's scripts/ssd-phase-trace (stamps: producer start, producer dt in, p1 dt in, no stamp waits
# for a load). One-item programs keep main's SASS in both arms (scripts/sass-diff on the CPU): seed, m2-2.7b control.
R=$PWD; D=$R/.dev/ssd37
L=$(mktemp -d); export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
trap 'exit 143' TERM
trap 'cp $OUT/summary.log $D/call.sh $L/ 2>/dev/null; tar czf $OUT/ssd37.tgz -C $L . ; echo packed' EXIT
say() { echo "[$SECONDS s] $*" | tee -a $OUT/summary.log; }
arm() { export PYTHONPATH=$D/$1 CAKE_RT_CACHE_DIR=$D/$1/.cubins; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $OUT/summary.log
cat $D/*/.ref | tee -a $OUT/summary.log
ROWS=short,seed,m2-2.7b
n=0
for a in base a b b a base; do
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
    m, ra, rb = ([x for x, _ in v.get(k, [])] for k in ("base", "a", "b"))
    fam = {f for k in v for _, f in v[k]}
    q = lambda x: statistics.mean(m) / statistics.mean(x) if m and x else float("nan")
    print(f"{name:10s} {fam} main {['%.4f' % x for x in m]} a {['%.4f' % x for x in ra]} b {['%.4f' % x for x in rb]} "
          f"main/a {q(ra):.3f} main/b {q(rb):.3f}")
PY
for a in base a b; do
  say "phase trace $a"
  (arm $a; cd $D/$a && timeout 12 python3 scripts/ssd-phase-trace short --runs 5 > $L/phase_$a.log 2>&1; echo "rc $?" >> $L/phase_$a.log)
  cat $L/phase_$a.log | tee -a $OUT/summary.log
done
say "fingerprints + tests + sanitizers (parallel)"
for a in base a b; do
  (arm $a; cd $D/$a && timeout 37 python3 scripts/ssd-fingerprint > $L/fp_$a.txt 2> $L/fp_$a.err) &
done
(arm b; cd $D/b && timeout 40 python3 -m pytest -q -ra -p no:cacheprovider -n 4 --dist loadfile tests/ssd tests/acceptance/test_ssd_contract_gpu.py --ignore=tests/ssd/test_ssd_compile.py > $L/tests_b.log 2>&1; echo "tests b rc $?" >> $L/tests_b.log) &
(arm a; cd $D/a && timeout 37 python3 -m pytest -q -ra -p no:cacheprovider -n 2 tests/ssd/test_ssd_gpu.py -k "row_parts or slices or chunk_sizes or dt_in_bf16 or short_sequences" > $L/tests_a.log 2>&1; echo "tests a (split, slices, batch rows) rc $?" >> $L/tests_a.log) &
for t in memcheck racecheck synccheck; do
  (arm b; cd $D/b && timeout 37 compute-sanitizer --tool $t --error-exitcode 9 python3 scripts/ssd-row short --calls 1 > $L/san_b_short_$t.log 2>&1; echo "b $t (ssd-row short) rc $?" >> $L/san_b_short_$t.log) &
done
wait
wc -l $L/fp_*.txt | tee -a $OUT/summary.log
for a in a b; do
  if diff $L/fp_base.txt $L/fp_$a.txt > $L/fp_$a.diff; then say "fingerprints base == $a: EQUAL"; else say "fingerprints base vs $a: DIFFER"; head -6 $L/fp_$a.diff | tee -a $OUT/summary.log; fi
done
grep -c "families equal" $L/fp_a.txt $L/fp_b.txt | tee -a $OUT/summary.log
for f in $L/tests_b.log $L/tests_a.log; do grep -E "FAILED|Error" $f | head -6 | tee -a $OUT/summary.log; tail -2 $f | tee -a $OUT/summary.log; done
for f in $L/san_*.log; do tail -2 $f | tee -a $OUT/summary.log; done
say done
