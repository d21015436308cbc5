#!/usr/bin/env bash
# The session's last call (lean: ~360 s of device time left): verification of the merged tree against the 12-02
# record's fingerprints, the GPU suite with more workers and the sanitizers beside it, then host20's host-time spread.
R=$PWD
cd "$R/.dev/final"
export CAKE_RT_CACHE_DIR=$PWD/.cubins CAKE_RT_GIT_HASH=$(cat GIT_HASH) PYTHONPATH=$PWD:$PWD/.peers PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
V=$(mktemp -d); LOG=$V/verify.log
trap 'cp $LOG $OUT/ 2>/dev/null; tar czf $OUT/verify2.tgz -C $V .' EXIT
say() { echo "[$SECONDS s] $*" | tee -a "$LOG"; }
say "tree $(cat GIT_HASH)"; python3 -m cake_rt info 2>&1 | grep -E "gpu 0|cache" | tee -a $LOG
timeout 40 python3 -m cake_rt > $V/selftest.log 2>&1; say "self-test rc=$?"
timeout 60 python3 scripts/dsa-fingerprint > $V/fp_dsa.txt 2>&1; say "dsa fp rc=$?"
timeout 60 python3 scripts/ssd-fingerprint > $V/fp_ssd.txt 2>&1; say "ssd fp rc=$?"
cat $V/fp_dsa.txt $V/fp_ssd.txt > $V/fingerprints.txt
if diff <(grep -v "^#" bench/results/h200_2026-12-02_fingerprints.txt | sort) <(grep -v "^#" $V/fingerprints.txt | sort) > $V/fp_diff.txt; then
  say "fingerprints EQUAL to h200_2026-12-02 ($(grep -vc '^#' $V/fingerprints.txt) lines)"; else say "fingerprints DIFFER"; head -20 $V/fp_diff.txt | tee -a $LOG; fi
say "suite + sanitizers"
(OUT=$V/san timeout 150 bash scripts/sanitize all > $V/sanitize.log 2>&1; echo "sanitize rc=$?" >> $V/sanitize.log) &
timeout 190 python3 -m pytest -q -ra -p no:cacheprovider -n 10 --dist loadfile --junitxml=$V/junit.xml \
    --ignore=tests/ssd/test_ssd_compile.py --ignore=tests/dsa/test_dsa_compile.py \
    --ignore=tests/ssd/test_ssd_phase_trace_cpu.py --ignore=tests/ssd/test_ssd_step_trace_cpu.py tests > $V/suite.log 2>&1
echo "suite rc=$?" >> $V/suite.log
wait
grep -E "passed|failed|FAILED|ERROR|rc=" $V/suite.log | tail -20 | tee -a $LOG
grep -E "rc=|SUMMARY|equal" $V/sanitize.log | tee -a $LOG
if [ $SECONDS -lt 215 ]; then
  say "host time"
  timeout 35 python3 scripts/host_time.py --calls 300 --entry-costs > $V/host_time.log 2>&1; say "host time rc=$?"
  grep -E "real|probe" $V/host_time.log | tee -a $LOG
fi
say "done"
