# ssd40c: base (c2ec705) vs c (the chunk-local state fused into the last row block, without ssd40's first-copies change)
R=$PWD; D=$R/.dev/ssd40c
L=$(mktemp -d); export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
trap 'cp $OUT/ssd40c_summary.log $D/call.sh $L/ 2>/dev/null; tar czf $OUT/ssd40c.tgz -C $L . ; echo packed' EXIT
say() { echo "[$SECONDS s] $*" | tee -a $OUT/ssd40c_summary.log; }
arm() { export PYTHONPATH=$D/$1 CAKE_RT_CACHE_DIR=$D/$1/.cubins; }
cat $D/*/.ref | tee -a $OUT/ssd40c_summary.log
ROWS=m2-2.7b-b8,varlen,seed,short
n=0
for a in base c c base base c; do
  n=$((n+1)); say "bench $a ($n)"
  (arm $a; cd $D/$a && timeout 25 python3 -m cake_rt.cli bench ssd --no-peers --repeats 8 --warmup 2 --budget-s 0.4 \
      --rows $ROWS --json $L/ab_${a}_$n.json > $L/ab_${a}_$n.log 2>&1); echo "rc $?" >> $L/ab_${a}_$n.log
done
python3 $D/base/scripts/ssd-ab-summary $L | tee -a $OUT/ssd40c_summary.log
for a in base c; do
  (arm $a; cd $D/$a && timeout 45 python3 scripts/ssd-fingerprint > $L/fp_$a.txt 2> $L/fp_$a.err) &
done
wait
if diff $L/fp_base.txt $L/fp_c.txt > $L/fp_c.diff; then say "fingerprints base == c: EQUAL ($(wc -l < $L/fp_c.txt) lines)"; else say "fingerprints DIFFER"; head -6 $L/fp_c.diff | tee -a $OUT/ssd40c_summary.log; fi
say done
