#!/usr/bin/env bash
# The walk schedule's verification: self-test, SSD fingerprints against 12-04d, the SSD GPU and acceptance tests (the
# walk's bitwise tests among them), compute-sanitizer memcheck / racecheck / synccheck on a call forced onto the walk.
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:$PWD/.peers
mkdir -p $OUT/v; LOG=$OUT/v/verify.log
{ echo "tree $(cat .dev/record/GIT_HASH)"; date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $LOG
timeout 60 python3 -m cake_rt > $OUT/v/selftest.log 2>&1; echo "self-test rc=$?" >> $LOG
timeout 120 python3 scripts/ssd-fingerprint > $OUT/v/fp_ssd.txt 2>&1; echo "ssd fingerprints rc=$?" >> $LOG
tail -14 bench/results/h200_2026-12-04d_fingerprints.txt > $OUT/v/fp_ssd_12-04d.txt
if diff $OUT/v/fp_ssd_12-04d.txt $OUT/v/fp_ssd.txt > $OUT/v/fp_diff.txt; then echo "ssd fingerprints: equal to 12-04d (14 lines)" >> $LOG; else echo "ssd fingerprints: DIFFER (fp_diff.txt)" >> $LOG; fi
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 python3 .dev/v/sanitize_walk.py > $OUT/v/san_$tool.log 2>&1
  echo "compute-sanitizer $tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|walk ring' $OUT/v/san_$tool.log | tr '\n' ' ')" >> $LOG
done
timeout 330 python3 -m pytest -q -n 4 --dist loadfile tests/ssd tests/acceptance/test_ssd_contract_gpu.py --ignore=tests/ssd/test_ssd_compile.py -p no:cacheprovider > $OUT/v/suite.log 2>&1; echo "ssd GPU suite rc=$?: $(tail -1 $OUT/v/suite.log)" >> $LOG
grep -E "FAILED|Error" $OUT/v/suite.log | head -20 >> $LOG
cat $LOG
