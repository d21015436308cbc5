#!/usr/bin/env bash
# 58th session, call 4: the tail trace (scripts/dsa-tail-trace A2 A3 --H 32 --runs 5 --dump) of main and of early (two
# key copies in flight; .dev/h62/early, its own script and kernels), alternated: where early's A2 loses the 1.9 us its
# slowest part's loop gains (docs/dsa.md round 67).
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
root=$PWD
for pass in 1 2; do
for t in main early; do
    dir=$PWD; [ $t = early ] && dir=$PWD/.dev/h62/early
    (cd $dir && CAKE_RT_CACHE_DIR=$root/.dev/h62/tt_$t CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$dir \
        timeout 60 python3 scripts/dsa-tail-trace A2 A3 --H 32 --runs 5 --dump /tmp/tt_${t}_$pass > $OUT/tail_${t}_$pass.txt 2>&1)
    echo "$t pass $pass rc=$? [$SECONDS s]"
done
done
tar -czf $OUT/tt.tgz -C /tmp tt_main_1 tt_early_1 tt_main_2 tt_early_2
for f in $OUT/tail_*_1.txt; do echo "== $f"; head -40 $f; done
echo "[$SECONDS s]"
