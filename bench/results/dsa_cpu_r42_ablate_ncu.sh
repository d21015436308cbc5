#!/usr/bin/env bash
# ncu of the selection-alone arm (bench/results/dsa_h200_r42_ablate_selection_alone_arm.diff, staged as .dev/abl/s by scripts/ab-kit) (s) on S1 and C1 at H = 32 (the sections and metrics of bench/results/dsa_cpu_r42_ncu_call.sh).
set -o pipefail
V=$PWD/.dev/abl
export CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1
SECT="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section InstructionStats --section SchedulerStats --section LaunchStats"
MET="--metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed"
for p in "S1 32" "C1 32"; do set -- $p
  echo "[$SECONDS s] ncu s $1 H = $2"
  (cd $V/s && CAKE_RT_CACHE_DIR=$V/s/.cubins PYTHONPATH=$V/s timeout 150 ncu --clock-control none -k regex:dsa_scan -s 1 -c 1 \
      $SECT $MET python3 scripts/dsa-row $1 --heads $2 --calls 2 > $OUT/ncu42_s_$1_H$2.txt 2>&1); echo "rc=$?"
done
for f in $OUT/ncu42_s_*.txt; do echo "#### $f"; grep -E "Duration|Issue Slots Busy|tensor_op|wavefronts|bank_conflicts|issue_active|No Eligible|inst_executed.sum|Warp Cycles Per Issued|SM Frequency" $f | head -30; done
