#!/bin/bash
# ncu of main's walk kernels (nemotron-h, m2-2.7b): pipe utilizations, issue slots, instruction counts. The tree and its
# cubins: `bash bench/results/ssd_h200_memside_call.sh stage` (.dev/ms/base), then `run` this script, carry [".dev/ms"].
cd "$(dirname "$0")/../.."
R=$PWD
ncu --version | tail -1
d=$R/.dev/ms/base
for row in nemotron-h m2-2.7b; do
  CAKE_RT_CACHE_DIR=$d/cache CAKE_RT_QUIET=1 PYTHONPATH=$d timeout 200 ncu --clock-control none -k regex:ssd_chunkpar -s 1 -c 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section WarpStateStats --section SchedulerStats \
    --metrics gpu__time_duration.sum,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_uniform.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__inst_executed_op_mufu.sum,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed_pipe_xu.sum \
    python3 $d/scripts/ssd-row $row --calls 2 > $OUT/ncu_pipes_$row.txt 2>&1; echo "ncu $row rc=$?"
done
for f in $OUT/ncu_pipes_*.txt; do echo "== $f"; grep -E "gpu__time|pipe_|issue_active|inst_executed|Issue Slots|Executed Ipc|SM Busy|No Eligible|Active Warps|Eligible Warps" $f | head -30; done
