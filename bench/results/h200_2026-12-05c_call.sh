# The call (run "bash .dev/rec2/h100.sh", carry .dev/rec2 (landrec.txz: 12eee0b's cubins; ab_ssd.txz: the A/B kit, its base tree dc6c3d5) and .peers, kind nvidia-h200, 241 s) = .dev/rec2/h100.sh, then the .dev/rec2/bench.sh it runs:
# ---- .dev/rec2/h100.sh
#!/usr/bin/env bash
# H100: the landed tree (kernels of 12eee0b) benched with both peers in the same process, then ncu of nemotron-h's walk
# on the landed tree and on the base (dc6c3d5's kernels, the A/B kit's base tree).
R=$PWD
tar -xJf .dev/rec2/landrec.txz && tar -xJf .dev/rec2/ab_ssd.txz -C .dev || exit 1
export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
bash .dev/rec2/bench.sh | cut -c1-260
ncu_row() {  # DIR CACHE NAME
  (cd $1 && CAKE_RT_CACHE_DIR=$2 PYTHONPATH=$1:$R/.peers timeout 40 ncu --clock-control none -k regex:ssd_chunkpar -s 1 -c 1 \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats \
    --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
    python3 scripts/ssd-row nemotron-h --calls 2 > $OUT/ncu_$3.txt 2>&1; echo "ncu $3 rc=$?")
  grep -E "Duration|hmma|inst_executed.sum|issue_active|Warp Cycles Per Issued|Issue Slots Busy" $OUT/ncu_$3.txt | head -8
}
ncu_row $R $R/.dev/record/cubins new
ncu_row $R/.dev/tilebudget/base $R/.dev/tilebudget/base/.cubins base
# ---- .dev/rec2/bench.sh
#!/usr/bin/env bash
# The SSD record of main e4c3edf (kernels of 12eee0b: the tilebudget arms landed): scripts/device-bench.sh OPS=ssd, both peers in the same
# process, this tree's cubins compiled on the CPU (scripts/record-prepare, RECORD=bench/results/h200_2026-12-04d OPS=ssd).
tar -xJf .dev/rec2/landrec.txz || exit 1
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=e4c3edf PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
OUT=$OUT/b OPS=ssd RECORD=bench/results/h200_2026-12-04f ACCURACY=0 timeout 225 bash scripts/device-bench.sh > /dev/null 2>&1
cat "$OUT/b/bench.log"
