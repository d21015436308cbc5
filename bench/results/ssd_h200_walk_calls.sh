#!/usr/bin/env bash
# The walker probe: the exact scan on suite rows, main's program against the ablation without output tiles
# (.dev/walk/walk_arm.diff), alternating processes; then ncu of main's exact scan on nemotron-h.
export CAKE_RT_CACHE_DIR=$PWD/.dev/walk/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 CAKE_RT_SSD_CHUNK_PARALLEL=never MAIN=$PWD
ROWS=nemotron-h,m2-2.7b,m2-2.7b-b8,varlen,seed
for arm in main abl abl main; do
  if [ $arm = main ]; then T=$PWD; else T=$PWD/.dev/walk/abl; fi
  ARM=$arm PYTHONPATH=$T timeout 120 python3 .dev/walk/probe.py $ROWS 12 2>&1 | grep -v "^{" | tee -a $OUT/walk.log
done
echo "== ncu exact nemotron-h" | tee -a $OUT/walk.log
PYTHONPATH=$PWD timeout 150 ncu --clock-control none -k regex:ssd_exact -s 1 -c 1 --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
  --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum \
  python3 scripts/ssd-row nemotron-h --calls 2 > $OUT/ncu_exact_nemotron-h.txt 2>&1; echo "ncu rc=$?"
grep -E "Duration|Tensor|hmma|dram__bytes|Warp Cycles Per Issued|inst_executed|Registers|Achieved Occupancy|Block Limit" $OUT/ncu_exact_nemotron-h.txt | head -20
#!/usr/bin/env bash
# The walker probe, second call: main's exact scan, the walk alone (walk_arm.diff) and the output tiles alone
# (out_arm.diff), alternating processes; rows: nemotron-h, m2-2.7b, and nemotron-h with 256 heads (two CTAs an SM).
export CAKE_RT_CACHE_DIR=$PWD/.dev/walk/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 CAKE_RT_SSD_CHUNK_PARALLEL=never MAIN=$PWD
ROWS="nemotron-h;m2-2.7b;nemotron-h:nheads=256,ngroups=16;m2-2.7b:nheads=160"
for arm in main walk out out walk main; do
  case $arm in main) T=$PWD ;; walk) T=$PWD/.dev/walk/abl ;; out) T=$PWD/.dev/walk/out ;; esac
  ARM=$arm PYTHONPATH=$T timeout 150 python3 .dev/walk/probe.py "$ROWS" 12 2>&1 | grep -v "^{" | tee -a $OUT/walk2.log
done
