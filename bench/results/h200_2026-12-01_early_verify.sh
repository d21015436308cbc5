#!/usr/bin/env bash
# Early verification of merged main (ssd10 + dsa10) in .dev/v4: self-test, fingerprints against the 2026-11-30d
# record, the whole GPU suite with the peers (compile tests excluded: CPU-side).
set -o pipefail
R=$(pwd)
cd .dev/v4
export CAKE_RT_QUIET=1 PYTHONPATH=$PWD:$R/.peers PYTHONUNBUFFERED=1 CAKE_RT_CACHE_DIR=$PWD/.cubins CAKE_RT_GIT_HASH=$(cat GIT_HASH)
M=$OUT/verify.log
say() { echo "[$SECONDS s] $*" | tee -a $M; }
say "tree $(cat GIT_HASH)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> $M
say "selftest"; timeout 40 python3 -m cake_rt >> $OUT/selftest.log 2>&1; echo "cake-rt rc=$?" | tee -a $M
say "fingerprints"
timeout 60 python3 scripts/dsa-fingerprint > $OUT/fp_dsa.txt 2>&1; echo "dsa fp rc=$? lines=$(wc -l < $OUT/fp_dsa.txt)" | tee -a $M
timeout 90 python3 scripts/ssd-fingerprint > $OUT/fp_ssd.txt 2>&1; echo "ssd fp rc=$? lines=$(wc -l < $OUT/fp_ssd.txt)" | tee -a $M
cat $OUT/fp_dsa.txt $OUT/fp_ssd.txt > $OUT/fingerprints.txt
if diff <(grep -v "^#" bench/results/h200_2026-11-30d_fingerprints.txt | sort) <(grep -v "^#" $OUT/fingerprints.txt | sort) > $OUT/fp_diff.txt; then
  echo "fingerprints EQUAL to h200_2026-11-30d" | tee -a $M; else echo "fingerprints DIFFER: $(wc -l < $OUT/fp_diff.txt) lines" | tee -a $M; head -20 $OUT/fp_diff.txt | tee -a $M; fi
say "GPU suite"
timeout 330 python3 -m pytest -q -ra -p no:cacheprovider -n 4 --dist loadfile --timeout=250 \
  --ignore=tests/ssd/test_ssd_compile.py --ignore=tests/dsa/test_dsa_compile.py \
  tests > $OUT/suite.log 2>&1; echo "suite rc=$?" >> $OUT/suite.log
grep -E "passed|failed|FAILED|ERROR|rc=" $OUT/suite.log | tail -30 | tee -a $M
say "done"
cd $OUT && tar czf early.tgz verify.log selftest.log fp_*.txt fingerprints.txt suite.log 2>/dev/null; ls -la $OUT | tail -3
