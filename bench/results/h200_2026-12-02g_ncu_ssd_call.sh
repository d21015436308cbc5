#!/usr/bin/env bash
# ncu of every SSD suite row on main (one or two launches a row: SpeedOfLight, WarpStateStats, tensor pipe, DRAM bytes).
cd "$(dirname "$0")/../.."
export CAKE_RT_CACHE_DIR=$PWD/.dev/ssdncu/.cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1
mkdir -p $OUT/ssdncu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/ssdncu/machine.txt
git log -1 --format='%h %s' >> $OUT/ssdncu/machine.txt 2>/dev/null
M="sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for row in seed m2-2.7b m2-2.7b-b8 nemotron-h short varlen; do
  echo "[$SECONDS s] $row"
  timeout 60 ncu --clock-control none -k regex:ssd_ -s 2 -c 2 --section SpeedOfLight --section WarpStateStats --section LaunchStats --metrics $M python3 scripts/ssd-row $row --calls 4 > $OUT/ssdncu/ncu_$row.txt 2>&1; echo "rc=$?"
  grep -E "^  ssd_|Duration|tensor_op|dram__bytes|Warp Cycles Per Issued|Stall|Compute \(SM\) Thr|Memory Thr|: (chunkpar|exact)" $OUT/ssdncu/ncu_$row.txt | head -16
  grep -E "issue_stalled" $OUT/ssdncu/ncu_$row.txt | sort -k3 -g -r | head -5
done
