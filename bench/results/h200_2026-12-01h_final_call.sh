#!/usr/bin/env bash
# The session's final device call: a pre-check of the phase-3 split programs (SSD_ROWS > 1, never run on a GPU in
# this form: if it fails, the plan's row_parts is pinned to 1 for the rest of the call and the log says FALLBACK),
# then verification and the recorded benchmark, then ncu per SSD row if time allows.
# Run from the device's repo root: bash .dev/final/run_final.sh
R=$PWD
cd "$R/.dev/final"
export CAKE_RT_CACHE_DIR=$PWD/.cubins CAKE_RT_GIT_HASH=$(cat GIT_HASH) PYTHONPATH=$PWD
mkdir -p "$OUT/v" "$OUT/b" "$OUT/p"
echo "[$SECONDS s] pre-check: the split programs"
ok=1
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/ssd/test_ssd_gpu.py -k row_parts > "$OUT/p/precheck_tests.log" 2>&1 || ok=0
tail -2 "$OUT/p/precheck_tests.log"
timeout 45 compute-sanitizer --tool racecheck python3 scripts/ssd-row short --calls 2 > "$OUT/p/precheck_racecheck.log" 2>&1 || ok=0
grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$OUT/p/precheck_racecheck.log"
grep -q "0 hazards displayed (0 errors, 0 warnings)" "$OUT/p/precheck_racecheck.log" || ok=0
if [ $ok = 0 ]; then
    echo "FALLBACK: the split programs failed the pre-check; row_parts pinned to 1"
    sed -i 's/^    return max(r for r in ROW_PARTS if r <= nsub and (r == 1 or tiles \* r <= grid))$/    return 1/' cake_rt/ops/ssd.py
    grep -n "^    return 1$" cake_rt/ops/ssd.py | head -3
else
    echo "pre-check passed"
fi
unset PYTHONPATH
echo "[$SECONDS s] verify"
OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-01g_fingerprints.txt bash scripts/device-verify.sh > /dev/null 2>&1
cat "$OUT/v/verify.log"
echo "[$SECONDS s] bench"
OUT=$OUT/b RECORD=bench/results/h200_2026-12-01g bash scripts/device-bench.sh > /dev/null 2>&1
cat "$OUT/b/bench.log" | cut -c1-200
if [ "${NCU:-1}" = 1 ] && [ $SECONDS -lt 520 ]; then
echo "[$SECONDS s] ncu per SSD row"
mkdir -p "$OUT/c"; C=$(mktemp -d)
for row in short nemotron-h; do
    PYTHONPATH=$PWD timeout 30 ncu --clock-control none -k regex:ssd_ -s 1 -c 1 --section SpeedOfLight --section WarpStateStats \
        --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum \
        python3 scripts/ssd-row $row > "$C/ncu_$row.txt" 2>&1
    echo "ncu $row rc=$?"; grep -E "Duration|hmma_cycles|dram__bytes|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued" "$C/ncu_$row.txt" | head -8
    tar czf "$OUT/c/ncu.tgz" -C "$C" .
done
fi
echo "[$SECONDS s] done"
