#!/usr/bin/env bash
# ncu's stall reasons of the walk rows' kernel (nemotron-h, m2-2.7b), lineinfo programs of main 8bb4af9's kernels
# (12eee0b's) staged on the CPU. run "bash .dev/stalls/call.sh", carry [".dev/stalls"], ~150 s. $OUT/stalls.tgz.
R=$PWD
[ -d .dev/stalls/cubins ] || tar -xJf .dev/stalls/cubins.txz -C .dev/stalls || exit 1
export CAKE_RT_CACHE_DIR=$R/.dev/stalls/cubins CAKE_RT_LINEINFO=1 CAKE_RT_QUIET=1 PYTHONPATH=$R PYTHONUNBUFFERED=1
W=$(mktemp -d)
for row in nemotron-h m2-2.7b; do
  timeout 150 ncu --clock-control none -k regex:ssd_chunkpar -s 1 -c 1 --section WarpStateStats --section SourceCounters \
    --section SchedulerStats --import-source yes \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active" \
    -o $W/walk_$row python3 scripts/ssd-row $row --calls 2 > $W/ncu_$row.log 2>&1; echo "ncu $row rc=$?"
  ncu -i $W/walk_$row.ncu-rep --page details --csv > $W/walk_${row}_details.csv 2>&1; echo "details rc=$?"
  ncu -i $W/walk_$row.ncu-rep --page source --csv --print-source sass > $W/walk_${row}_sass.csv 2>&1; echo "source rc=$?"
  grep -E "issue_stalled|Duration|issue_active|inst_executed" $W/walk_${row}_details.csv | sed 's/","/ | /g' | cut -c1-220 | sort -t'|' -k1,1 | head -40
done
tar czf $OUT/stalls.tgz -C $W .
