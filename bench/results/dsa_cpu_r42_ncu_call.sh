#!/usr/bin/env bash
# ncu42 call (issue #12): where the product's tile goes with and without the selection beside it. ncu (round 36's sections
# and metrics: the tensor pipe, shared-memory LSU wavefronts by op, issue slots, warp states) of S1 and C1 at H = 32 on
# main (base) and on main with no appends (n, the product alone), one launch each, then the same grep as round 36.
# Staged by bench/results/dsa_cpu_r42_ncu_prepare.sh; run command "bash .dev/ncu42/call.sh", carry [".dev/ncu42"],
# timeout_s 300 (round 36's three profiles took 24 s of command).
set -o pipefail
V=$PWD/.dev/ncu42
export CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1
mkdir -p $OUT
cat $V/trees.txt
SECT="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section InstructionStats --section SchedulerStats --section LaunchStats"
MET="--metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed"
for t in base n; do for p in "S1 32" "C1 32"; do set -- $p
  echo "[$SECONDS s] ncu $t $1 H = $2"
  (cd $V/$t && CAKE_RT_CACHE_DIR=$V/$t/cubins PYTHONPATH=$V/$t timeout 150 ncu --clock-control none -k regex:dsa_scan -s 1 -c 1 \
      $SECT $MET python3 scripts/dsa-row $1 --heads $2 --calls 2 > $OUT/ncu42_${t}_$1_H$2.txt 2>&1); echo "rc=$?"
done; done
for f in $OUT/ncu42_*.txt; do echo "#### $f"; grep -E "Duration|Issue Slots Busy|Shared Memory|L1/TEX Hit|Mem Pipes|tensor_op|wavefronts|bank_conflicts|issue_active|l1tex__throughput|Warp Cycles Per Issued|Executed Ipc A|SM Busy|No Eligible|inst_executed.sum|Compute \(SM\) Throughput|Memory Throughput" $f | head -40; done
