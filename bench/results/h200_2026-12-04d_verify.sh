#!/usr/bin/env bash
# The verification of a selection-only change: self-test, fingerprints against 12-04c, the SSD GPU and acceptance tests
# (the mamba_ssm accuracy comparison among them), the plan of every suite row.
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
export PYTHONPATH=$PWD:$PWD/.peers
mkdir -p $OUT/v; LOG=$OUT/v/verify.log
{ echo "tree $(cat .dev/record/GIT_HASH)"; date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $LOG
timeout 60 python3 -m cake_rt > $OUT/v/selftest.log 2>&1; echo "self-test rc=$?" >> $LOG
timeout 90 python3 scripts/dsa-fingerprint > $OUT/v/fp_dsa.txt 2>&1; echo "dsa fingerprints rc=$?" >> $LOG
timeout 120 python3 scripts/ssd-fingerprint > $OUT/v/fp_ssd.txt 2>&1; echo "ssd fingerprints rc=$?" >> $LOG
cat $OUT/v/fp_dsa.txt $OUT/v/fp_ssd.txt > $OUT/v/fingerprints.txt
if diff bench/results/h200_2026-12-04c_fingerprints.txt $OUT/v/fingerprints.txt > $OUT/v/fp_diff.txt; then echo "fingerprints: equal to 12-04c ($(wc -l < $OUT/v/fingerprints.txt) lines)" >> $LOG; else echo "fingerprints: DIFFER (fp_diff.txt)" >> $LOG; fi
timeout 330 python3 -m pytest -q -n 4 --dist loadfile tests/ssd tests/acceptance/test_ssd_contract_gpu.py tests/compat --ignore=tests/ssd/test_ssd_compile.py -p no:cacheprovider > $OUT/v/suite.log 2>&1; echo "ssd GPU suite rc=$?: $(tail -1 $OUT/v/suite.log)" >> $LOG
for r in seed m2-2.7b m2-2.7b-b8 nemotron-h short varlen; do timeout 60 python3 scripts/ssd-row $r --calls 0 2>&1 | grep -m1 -i "plan\|family\|cost model" >> $LOG; done
cat $LOG
