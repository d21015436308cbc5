#!/usr/bin/env bash
# Session 52, call 1: main (cb89147 kernels) verified (on an H200: the whole record, bench + verification); then
# main against hp (heads + pf: a unit head from the launch parameters with the key map prefetched), one process a
# tree, alternated main / hp / hp / main a row.
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"
ROOT=$PWD
[ -d .dev/record/cubins ] || tar -xJf .dev/record/cubins.txz -C .dev/record || exit 1
case "$name" in
  *H200*) bash .dev/record/record.sh ;;
  *) bash .dev/h51/v60.sh ;;
esac
echo "[verification done at $SECONDS s]"
cp .dev/h52/hpc/*.cubin .dev/record/cubins/
export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1 CAKE_RT_CACHE_DIR=$ROOT/.dev/record/cubins
ab() {  # TREE ROW H
    if [ "$1" = main ]; then
        PYTHONPATH=$ROOT timeout 60 python3 scripts/dsa-placement "$2" --heads "$3" --records spread:8 --repeats 10 \
            --trees main=$ROOT/cake_rt/kernels
    else
        PYTHONPATH=$ROOT/.dev/h52/hp timeout 60 python3 .dev/h52/hp/scripts/dsa-placement "$2" --heads "$3" \
            --records spread:8 --repeats 10 --trees hp=$ROOT/.dev/h52/hp/cake_rt/kernels
    fi
}
for r in A3:32 A3:64 A2:32 A1:32 A3:32; do
    [ $SECONDS -gt 540 ] && { echo "time: stop before $r"; break; }
    for t in main hp hp main; do
        f=$OUT/ab_${t}_${r%:*}_${r#*:}_$SECONDS.txt
        echo "== $t ${r%:*} H${r#*:}"
        ab $t "${r%:*}" "${r#*:}" > $f 2>&1
        grep -E "outputs equal|^tree|records left|Error|error" $f | tail -3
    done
    echo "[$SECONDS s]"
done
