#!/usr/bin/env bash
# The session's final device call: verification, the recorded benchmark, and an A/B of m2-2.7b without C B^T staging.
# Run from the device's repo root: bash .dev/final/run_final.sh
R=$PWD
cd "$R/.dev/final"
export CAKE_RT_CACHE_DIR=$PWD/.cubins CAKE_RT_GIT_HASH=$(cat GIT_HASH)
mkdir -p "$OUT/v" "$OUT/b" "$OUT/n"
echo "[$SECONDS s] verify"
OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-01c_fingerprints.txt bash scripts/device-verify.sh > /dev/null 2>&1
cat "$OUT/v/verify.log"
echo "[$SECONDS s] bench"
OUT=$OUT/b RECORD=bench/results/h200_2026-12-01c bash scripts/device-bench.sh > /dev/null 2>&1
cat "$OUT/b/bench.log" | cut -c1-200
echo "[$SECONDS s] m2-2.7b staged (main) vs unstaged (nost)"
N=$OUT/n/runs; mkdir -p "$N"
ab() {  # ab TREE NAME
    (cd "$1" && PYTHONPATH=$PWD timeout 60 python3 -m cake_rt bench ssd --no-peers --repeats 8 --warmup 2 --budget-s 0.4 \
        --rows m2-2.7b,m2-2.7b-b8 --json "$N/$2.json" > "$N/$2.log" 2>&1; echo "$2 rc=$?")
    python3 -c "import json,sys; d=json.load(open('$N/$2.json')); [print('  ', r['row'], round(r['ms']['median'],4)) for r in d['records'] if r.get('arm')=='ours']" 2>&1 | head -4
}
ab "$PWD" main_1; ab "$R/.dev/nost" nost_1; ab "$R/.dev/nost" nost_2; ab "$PWD" main_2
tar czf "$OUT/n/nost.tgz" -C "$N" . && rm -rf "$N"
echo "[$SECONDS s] ncu per SSD row"
mkdir -p "$OUT/c"; C=$(mktemp -d)
for row in seed m2-2.7b nemotron-h short; do
    PYTHONPATH=$PWD timeout 40 ncu --clock-control none -k regex:ssd_ -s 1 -c 1 --section SpeedOfLight --section WarpStateStats \
        --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
        python3 ncu_rows.py $row > "$C/ncu_$row.txt" 2>&1
    echo "ncu $row rc=$?"; grep -E "Duration|hmma_cycles|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued" "$C/ncu_$row.txt" | head -6
    tar czf "$OUT/c/ncu.tgz" -C "$C" .
done
echo "[$SECONDS s] done"
