#!/usr/bin/env bash
# dsa28 call (issue #12: where the H = 32 and H = 64 tiles go after round 24, and the H = 64 product in two column
# groups). First, on the CPU (~4 min): bash bench/results/dsa_h200_dsa28_setup.sh (it copies this kit to .dev/dsa28 and
# builds base = main, arm = main + dsa_h200_dsa28_arm.diff, their cubins and the ncu summaries' program text). Then:
#   run  command "bash .dev/dsa28/call.sh"  carry [".dev/dsa28"] (~26 MB)  timeout_s 210  (kind nvidia-h200; END = 195 s
#   of command at most, ~170 s expected on a warm machine)
# 1. ncu on base (main), lineinfo programs, one launch each: S1 and S2 at H = 32, S2 at H = 64 (SpeedOfLight,
#    WarpStateStats, SourceCounters); per profile the samples per role and source region (regions.py), the top lines
#    (lines.py) and their stall reasons (reasons.py), from the programs' text and SASS in src/.
# 2. Bench A/B base / arm / arm / base, each in its own process and cache (the summary: summ.py).
# 3. Both trees' fingerprints, the arm's DSA GPU tests and compute-sanitizer memcheck / racecheck / synccheck on
#    scripts/sanitize-case dsa, side by side. 4. If time is left: ncu of S2 at H = 64 on the arm (its regions).
# Everything packed into $OUT/dsa28.tgz; the output's tail: the regions, the verdicts, the prepared table.
set -o pipefail
cd .dev/dsa28
V=$PWD
export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
W=$(mktemp -d); mkdir -p $OUT
L=$W/log.txt
END=${END:-195}
pack() { cp $V/*.sh $V/*.py $V/arm.diff $V/trees.txt $V/setup.log $W/ 2>/dev/null; tar czf $OUT/dsa28.tgz -C $W . ; }
trap pack EXIT
say() { echo "== [$SECONDS s] $*" | tee -a $L; }
lim() { local a=$1 b=$((END - SECONDS)); [ $b -lt $a ] && a=$b; [ $a -lt 1 ] && a=1; echo $a; }
run_in() { local d=$1; shift; (cd $V/$d && CAKE_RT_CACHE_DIR=$V/$d/.cubins PYTHONPATH=$V/$d "$@"); }
cat $V/trees.txt | tee -a $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $L
NCU="--clock-control none -k regex:dsa_scan -s 1 -c 1 --section SpeedOfLight --section WarpStateStats --section SourceCounters --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sectors_op_read.sum"
prof() {  # arm row H limit
  local a=$1 row=$2 h=$3 t=$4 n=ncu_$1_$2_H$3
  say "ncu $row H = $h ($a)"
  run_in $a env CAKE_RT_LINEINFO=1 timeout $(lim $t) ncu $NCU -o $W/$n python3 scripts/dsa-row $row --heads $h > $W/$n.log 2>&1; echo "$n rc=$?" >> $L
}
summarize() {  # arm row H: the source page, details and the summaries (CPU only)
  local a=$1 row=$2 h=$3 n=ncu_$1_$2_H$3
  [ -f $W/$n.ncu-rep ] || return
  timeout 30 ncu -i $W/$n.ncu-rep --page source --csv --print-source sass > $W/${n}_sass.csv 2>&1
  timeout 15 ncu -i $W/$n.ncu-rep --page details > $W/${n}_details.txt 2>&1
  local F=$V/src/FULL_${a}_H$h.cu S=$V/src/LI_${a}_H$h.sass
  {
    echo "#### $row H = $h ($a)"
    grep -h "Duration\|Elapsed Cycles\|tensor_op_hmma\|L1/TEX Cache Throughput\|L2 Cache Throughput\|Issue Slots Busy\|Warp Cycles Per Issued" $W/${n}_details.txt | head -8
    python3 $V/regions.py $F $S $W/${n}_sass.csv
  } > $W/${n}_regions.txt 2>&1
  python3 $V/lines.py $F $S $W/${n}_sass.csv 25 > $W/${n}_lines.txt 2>&1
  python3 $V/reasons.py $F $S $W/${n}_sass.csv $(grep -oE '%  L[0-9]+ ' $W/${n}_lines.txt | grep -oE '[0-9]+' | awk '!s[$0]++' | head -16) > $W/${n}_reasons.txt 2>&1
}
prof base S1 32 16; prof base S2 32 22; prof base S2 64 22
(for p in "S1 32" "S2 32" "S2 64"; do summarize base $p; done) &
SUMPID=$!
BA="--no-peers --repeats 8 --warmup 2 --budget-s 0.3 --side-stream none --rows S1,S2,C1,Z2cp,Z3cp,A1,A2,A3"
bench() {  # arm round limit
  local a=$1 r=$2 t=$3
  say "bench dsa $a (round $r)"
  run_in $a env CAKE_RT_GIT_HASH=$a timeout $(lim $t) python3 -m cake_rt bench dsa $BA --json $W/dsa_${a}_$r.json --markdown $W/dsa_${a}_$r.md > $W/bench_${a}_$r.log 2>&1; echo "rc=$?" >> $L
}
bench base 1 24; bench arm 1 20; bench arm 2 20; bench base 2 20
python3 $V/summ.py $W > $W/summary.txt 2>&1; cat $W/summary.txt >> $L
say "GPU tests and sanitize dsa (arm), both trees' fingerprints, side by side"
for a in base arm; do (run_in $a timeout $(lim 40) python3 scripts/dsa-fingerprint > $W/fp_$a.txt 2>&1; echo "fingerprint $a rc=$?" >> $L) & done
(run_in arm env OUT=$W/san timeout $(lim 60) bash scripts/sanitize dsa memcheck racecheck synccheck > $W/san.txt 2>&1; echo "sanitize arm rc=$?" >> $W/san.txt) &
run_in arm timeout $(lim 60) python3 -m pytest -q -ra -p no:cacheprovider -n 8 --dist loadfile --timeout 55 tests/dsa tests/acceptance/test_dsa_contract_gpu.py --ignore=tests/dsa/test_dsa_compile.py > $W/tests.log 2>&1; echo "tests arm rc=$?" >> $L
wait
if diff -q $W/fp_base.txt $W/fp_arm.txt > /dev/null && [ "$(grep -c ' ' $W/fp_arm.txt)" -ge 27 ]; then echo "FINGERPRINTS arm: $(grep -c ' ' $W/fp_arm.txt) EQUAL to base" | tee -a $L; else echo "FINGERPRINTS arm: DIFFER" | tee -a $L; diff $W/fp_base.txt $W/fp_arm.txt | head -20 | tee -a $L; fi
cat $W/san.txt >> $L; grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|bitwise equal\|False" $W/san/*.log >> $L 2>&1
echo "tests arm:" >> $L; grep -E "passed|failed|FAILED|ERROR|Timeout" $W/tests.log | tail -8 >> $L
if [ $((END - SECONDS)) -gt 24 ]; then prof arm S2 64 $((END - SECONDS - 10)); summarize arm S2 64; fi
say "end"
ARM=eager python3 $V/summ.py $W > $W/summary_eager.txt 2>&1
cat $W/ncu_*_regions.txt
grep -E "^FINGERPRINTS|rc=|passed|failed|SUMMARY|== \[" $L | cut -c1-200 | tail -n 30
cat $W/summary_eager.txt $W/summary.txt  # the prepared rows last (output_tail keeps the end)
