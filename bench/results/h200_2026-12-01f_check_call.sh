#!/usr/bin/env bash
# Lead's first call of the session: main's fingerprints against the 12-01e record, ncu source counters (lineinfo) of
# the chunk-parallel SSD kernel on m2-2.7b and nemotron-h, the per-phase trace of m2-2.7b / nemotron-h / seed.
R=$PWD; cd "$R/.dev/final"
export CAKE_RT_CACHE_DIR=$PWD/.cubins PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
W=$(mktemp -d); trap 'tar czf $OUT/first.tgz -C $W .' EXIT
say() { echo "== [$SECONDS s] $*"; }
say "main $(cat GIT_HASH)"; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
say fingerprints
timeout 60 python3 scripts/dsa-fingerprint > $W/fp_dsa.txt 2>&1; echo "dsa rc=$?"
timeout 90 python3 scripts/ssd-fingerprint > $W/fp_ssd.txt 2>&1; echo "ssd rc=$?"
cat $W/fp_dsa.txt $W/fp_ssd.txt > $W/fp.txt
if diff <(grep -v "^#" bench/results/h200_2026-12-01e_fingerprints.txt | sort) <(grep -v "^#" $W/fp.txt | sort) > $W/fp_diff.txt; then echo "FINGERPRINTS EQUAL to 12-01e"; else echo "FINGERPRINTS DIFFER"; head $W/fp_diff.txt; fi
for row in m2-2.7b nemotron-h; do
  say "ncu $row"
  CAKE_RT_LINEINFO=1 timeout 100 ncu --clock-control none -k regex:ssd_chunkpar -s 1 -c 1 --section SpeedOfLight \
      --section WarpStateStats --section SchedulerStats --section SourceCounters --section InstructionStats \
      --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
      -o $W/ncu_$row python3 scripts/ssd-row $row > $W/ncu_${row}.log 2>&1; echo "rc=$?"
  timeout 60 ncu -i $W/ncu_$row.ncu-rep --page source --csv --print-source sass > $W/ncu_${row}_sass.csv 2>&1; echo "csv rc=$?"
  timeout 30 ncu -i $W/ncu_$row.ncu-rep --page details > $W/ncu_${row}_details.txt 2>&1
  grep -E "Duration|hmma|Warp Cycles Per Issued|Issued Warp Per Scheduler|No Eligible" $W/ncu_${row}_details.txt | head -8
  ls -la $W/ncu_$row.ncu-rep
done
say "phase trace"
timeout 150 python3 scripts/ssd-phase-trace m2-2.7b nemotron-h seed --runs 5 > $W/phase.log 2>&1; echo "rc=$?"
tail -40 $W/phase.log
say done
