#!/usr/bin/env bash
# Fifteenth session's last call (run from the repo root on the device; carry [".dev/rc", ".dev/cubins", ".dev/GIT_HASH"];
# first, on the CPU: scripts/racecheck-pattern stage .dev/rc, and the record kit's .dev/cubins):
#   1. scripts/racecheck-pattern: the score-slot handoff alone, five variants, run and under racecheck (docs/dsa.md,
#      round 32);
#   2. ncu of A3 (H = 32 and 64): the split tails' one launch, SpeedOfLight / LaunchStats / Occupancy / WarpStateStats /
#      SchedulerStats (issue #12's A3 target);
#   3. the side-stream table of C1 and Z3cp at H = 64 as medians over 3 processes (the record's two calls read C1 1.190x and Z3cp
#      1.166x, each under 1.15x in the other call).
export CAKE_RT_CACHE_DIR=$PWD/.dev/cubins CAKE_RT_GIT_HASH=$(cat .dev/GIT_HASH) PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
mkdir -p $OUT
echo "[$SECONDS s] racecheck-pattern"
timeout 30 python3 scripts/racecheck-pattern run .dev/rc 2>&1 | tee $OUT/rc_run.txt
timeout 120 python3 scripts/racecheck-pattern sanitize .dev/rc 2>&1 | tee $OUT/rc_sanitize.txt
cp .dev/rc/racecheck_*.log $OUT/ 2>/dev/null
echo "[$SECONDS s] ncu A3"
for h in 32 64; do
  timeout 60 ncu --clock-control none -k regex:dsa_scan -s 1 -c 1 --section SpeedOfLight --section LaunchStats \
      --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
      python3 scripts/dsa-row A3 --heads $h > $OUT/ncu_A3_H$h.txt 2>&1; echo "ncu A3 H=$h rc=$?"
  grep -E "Duration|Elapsed Cycles|Registers|Shared Memory Config|Waves|Achieved Occupancy|Issue Slots Busy|Stall|Warp Cycles Per Issued|No Eligible|Block Size|Grid Size" $OUT/ncu_A3_H$h.txt | head -24
done
echo "[$SECONDS s] side stream, 3 processes"
timeout 90 python3 -m cake_rt bench dsa --no-peers --rows C1,Z3cp --heads 64 --repeats 10 --warmup 2 --budget-s 0.4 \
    --side-stream 1 --processes 3 --time-limit 80 --json $OUT/side3.json --markdown $OUT/side3.md > $OUT/side3.log 2>&1
echo "side rc=$?"; grep "^| " $OUT/side3.md | grep -A20 "SMs held" | cut -c1-130
echo "[$SECONDS s] done"
