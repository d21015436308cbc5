#!/bin/bash
# Device: the walk at three chains an SM against main, staged by ssd_h200_walk3_prepare.sh. arm: main +
# ssd_cpu_walk3_arm.diff; armc: main + ssd_cpu_walk3c_arm.diff (one copy of the tile code, the walker lowering its
# registers after its walk); armd: main + ssd_cpu_walk3d_arm.diff (arm c, its chunk-256 chain step in column halves). First both arms' bitwise checks of the forced walk (a deadlock ends in the probe's
# timeout), then probe rounds of nemotron-h, m2-2.7b and seed in alternating processes (each tree's own plan: the arms'
# walk runs one CTA an SM, 132). Then, on the arm of the lower nemotron-h median (ARM=arm or ARM=armc before the
# command picks one): the walk GPU tests, compute-sanitizer on small forced walks, ncu of nemotron-h's kernel, and the
# walk trace if time is left. Carry [".dev/w15"], timeout_s 600.
R=$PWD; W=$R/.dev/w15
export CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
probe() {  # tree checks rows
  (cd "$W/$1" && CAKE_RT_CACHE_DIR="$W/$1/.cubins" PYTHONPATH="$W/$1" ARM=$1 CHECKS=$2 ROWS=$3 timeout 200 \
     python3 "$W/ssd_h200_walk3_probe.py" 2>&1 | grep -a "^check\|^time\|rror\|Traceback" | tail -12)
}
# an arm whose checks do not all pass (a wrong bit, or a hang cut by the timeout) is not timed
ok=""
for t in arm armc armd; do
  out=$(probe $t 1 ""); echo "$out"
  echo "$out" | grep -q "^checks $t: 5 of 5 equal" && ok="$ok $t"
done
echo "arms timed:${ok:- none} ($SECONDS s)"
# armd differs from armc only in the chunk-256 programs: timed on the chunk-256 rows alone
for r in 1 2 3; do
  probe main 0 nemotron-h,m2-2.7b,seed | tee -a "$OUT/times.txt"
  for t in $ok; do
    if [ $t = armd ]; then probe $t 0 m2-2.7b,seed | tee -a "$OUT/times.txt"
    else probe $t 0 nemotron-h,m2-2.7b,seed | tee -a "$OUT/times.txt"; fi
  done
  echo "round $r done ($SECONDS s)"
done
# the checks below run on ARM if set, else on the arm of the lower nemotron-h median
A=${ARM:-$(python3 - "$OUT/times.txt" $ok <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.startswith("time ")]
med = {t: statistics.median(float(r[r.index("median") + 1]) for r in rows if r[1] == t and r[2] == "nemotron-h")
       for t in sys.argv[2:] if any(r[1] == t and r[2] == "nemotron-h" for r in rows)}
print(min(med, key=med.get) if med else "arm")
PY
)}
echo "checks on: $A"
case " $ok " in *" $A "*) ;; *) echo "$A's checks failed: no tests, sanitizers or ncu"; exit 1;; esac
cd "$W/$A"
export CAKE_RT_CACHE_DIR="$W/$A/.cubins" PYTHONPATH="$W/$A"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/ssd/test_ssd_gpu.py -k walk > "$OUT/walk_tests.log" 2>&1
echo "walk GPU tests rc=$?: $(tail -1 "$OUT/walk_tests.log")"
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 python3 "$W/ssd_h200_walk3_sanitize.py" \
    > "$OUT/san_$tool.log" 2>&1
  echo "compute-sanitizer $tool rc=$?: $(grep -aE 'ERROR SUMMARY|RACECHECK SUMMARY|sanitize checks' "$OUT/san_$tool.log" | tr '\n' ' ')"
done
ARM=$A CHECKS=0 ROWS=nemotron-h timeout 120 ncu --kernel-name ssd_chunkpar --launch-skip 2 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy \
  python3 "$W/ssd_h200_walk3_probe.py" > "$OUT/ncu_nemotron_$A.txt" 2>&1
echo "ncu rc=$?"; grep -aE "Duration|Issue Slots Busy|No Eligible|Registers Per|Achieved Occupancy|Stall|Block Limit" \
  "$OUT/ncu_nemotron_$A.txt" | head -24
# if time is left: the walk trace of nemotron-h on the same arm (each chain's tiles and end, the walks' end)
left=$((580 - SECONDS))
if [ $left -gt 60 ]; then
  timeout $left python3 scripts/ssd-walk-trace nemotron-h --runs 1 > "$OUT/walk_trace_$A.txt" 2>&1
  echo "walk trace rc=$?"; grep -aE "walks' end|tiles a chain|a chunk " "$OUT/walk_trace_$A.txt" | head -6
else
  echo "no time left for the walk trace ($SECONDS s used)"
fi
