#!/usr/bin/env bash
# ncu36 (issue #12, docs/dsa.md round 36): where the H = 32 rows' cycles go by pipe and memory (shared-memory wavefronts,
# L1 throughput, issue slots, the tensor pipe) on main's programs, C1 and S1 at H = 32 and C1 at H = 64 for comparison.
# Setup (CPU, repo root): mkdir -p .dev/ncu36; CAKE_RT_QUIET=1 CAKE_RT_CACHE_DIR=$PWD/.dev/ncu36/cubins PYTHONPATH=. python3 -c
#   "from cake_rt.warmup import warmup, parse_shapes; print(warmup(('dsa',), 'sm_90a', jobs=2,
#    shapes=parse_shapes(['heads=64,head_dim=128', 'heads=32,head_dim=128'])))"; cp this file .dev/ncu36/call.sh.
# Then: run command "bash .dev/ncu36/call.sh", carry [".dev/ncu36"], timeout_s 480 (24 s of command in round 36).
set -o pipefail
export CAKE_RT_QUIET=1 CAKE_RT_CACHE_DIR=$PWD/.dev/ncu36/cubins PYTHONUNBUFFERED=1
mkdir -p $OUT
SECT="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section InstructionStats --section SchedulerStats --section LaunchStats"
MET="--metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed"
for p in "C1 32" "S1 32" "C1 64"; do set -- $p
  echo "[$SECONDS s] ncu $1 H = $2"
  timeout 150 ncu --clock-control none -k regex:dsa_scan -s 1 -c 1 $SECT $MET python3 scripts/dsa-row $1 --heads $2 --calls 2 > $OUT/ncu36_$1_H$2.txt 2>&1; echo "rc=$?"
done
for f in $OUT/ncu36_*.txt; do echo "#### $f"; grep -E "Duration|Issue Slots Busy|Shared Memory|L1/TEX Hit|Mem Pipes|tensor_op|wavefronts|bank_conflicts|issue_active|l1tex__throughput|Warp Cycles Per Issued|Executed Ipc A|SM Busy|No Eligible|inst_executed.sum|Compute \(SM\) Throughput|Memory Throughput" $f | head -40; done
