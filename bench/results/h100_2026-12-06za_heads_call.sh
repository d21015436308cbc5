#!/usr/bin/env bash
# Round 59: main (aa44a47) against `heads` (a static start's first unit head from the launch parameters), each row's
# processes alternated main / heads / heads / main (the host differs: one tree a process); then the heads tree's
# verification (fingerprints against 12-06b, the GPU suite, the sanitizers); on an H200 its record instead.
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
ROOT=$PWD
for d in .dev/record .dev/record_310306a; do [ -d $d/cubins ] || tar -xJf $d/cubins.txz -C $d || exit 1; done
export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
ab() {  # TREE ROW H
    if [ "$1" = main ]; then
        PYTHONPATH=$ROOT/.dev/h51/main CAKE_RT_CACHE_DIR=$ROOT/.dev/record_310306a/cubins timeout 90 python3 \
            .dev/h51/main/scripts/dsa-placement "$2" --heads "$3" --records spread:8 --repeats 10 \
            --trees main=$ROOT/.dev/h51/main/cake_rt/kernels
    else
        PYTHONPATH=$ROOT CAKE_RT_CACHE_DIR=$ROOT/.dev/record/cubins timeout 90 python3 scripts/dsa-placement "$2" \
            --heads "$3" --records spread:8 --repeats 10 --trees heads=$ROOT/cake_rt/kernels
    fi
}
t0=$SECONDS
rows="A3:32 A3:64 A2:32 A2:64 A1:32 A1:64"
case "$name" in *H200*) rows="A3:32 A3:64" ;; esac
for r in $rows; do
    for t in main heads heads main; do
        echo "== $t ${r%:*} H${r#*:}"
        ab $t "${r%:*}" "${r#*:}" > $OUT/ab_${t}_${r%:*}_${r#*:}_$SECONDS.txt 2>&1
        grep -E "outputs equal|^tree|records left|Error|error" $OUT/ab_${t}_${r%:*}_${r#*:}_*.txt | tail -3
    done
    echo "[$((SECONDS - t0)) s]"
done
tar czf $OUT/ab.tgz -C $OUT $(cd $OUT && ls ab_*.txt) && rm -f $OUT/ab_*.txt
case "$name" in
*H200*) bash .dev/record/record.sh ;;
*) export CAKE_RT_CACHE_DIR=$ROOT/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH)
   OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-06b_fingerprints.txt timeout $((590 - SECONDS)) \
       bash scripts/device-verify.sh > /dev/null 2>&1
   cat $OUT/v/verify.log ;;
esac
