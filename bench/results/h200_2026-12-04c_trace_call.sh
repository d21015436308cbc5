#!/usr/bin/env bash
# short's phase trace on main and on the tree before the chain (5dd29fd), then ncu of m2-2.7b and b8 on main.
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1
mkdir -p $OUT/t
echo "== main $(cat .dev/record/GIT_HASH)"; PYTHONPATH=$PWD timeout 100 python3 scripts/ssd-phase-trace short seed --runs 5 2>&1 | tee $OUT/t/phase_main.txt | tail -32
echo "== old 5dd29fd"; (cd .dev/old && CAKE_RT_CACHE_DIR=$PWD/.cubins PYTHONPATH=$PWD timeout 100 python3 scripts/ssd-phase-trace short seed --runs 5 2>&1 | tee $OUT/t/phase_old.txt | tail -32)
M="sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for row in m2-2.7b m2-2.7b-b8; do
  echo "[$SECONDS s] ncu $row"
  PYTHONPATH=$PWD timeout 60 ncu --clock-control none -k regex:ssd_ -s 2 -c 2 --section SpeedOfLight --section WarpStateStats --metrics $M python3 scripts/ssd-row $row --calls 4 > $OUT/t/ncu_$row.txt 2>&1; echo "rc=$?"
  grep -E "^  ssd_|Duration|tensor_op|dram__bytes|Warp Cycles Per Issued" $OUT/t/ncu_$row.txt | head -12
  grep -E "issue_stalled" $OUT/t/ncu_$row.txt | sort -k3 -g -r | head -3
done
