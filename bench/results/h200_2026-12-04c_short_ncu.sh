#!/usr/bin/env bash
# ncu of short on main and on 5dd29fd: where the chain program's phase 1 loses 1.4 us (docs/ssd.md).
export CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1
mkdir -p $OUT/n
M="smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,lts__t_bytes.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for t in main old; do
  if [ $t = main ]; then d=$PWD; c=$PWD/.dev/record/cubins; else d=$PWD/.dev/old; c=$PWD/.dev/old/.cubins; fi
  (cd $d && CAKE_RT_CACHE_DIR=$c PYTHONPATH=$d timeout 90 ncu --clock-control none -k regex:ssd_ -s 4 -c 3 --section SpeedOfLight --section WarpStateStats --section LaunchStats --metrics $M python3 scripts/ssd-row short --calls 8 > $OUT/n/ncu_short_$t.txt 2>&1; echo "$t rc=$?")
  grep -E "Duration|inst_executed|Warp Cycles Per Issued|hmma|lts__t_bytes" $OUT/n/ncu_short_$t.txt | head -12
  grep -E "issue_stalled" $OUT/n/ncu_short_$t.txt | sort -k3 -g -r | head -6
done
