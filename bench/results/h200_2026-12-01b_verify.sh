#!/usr/bin/env bash
# First call of the session: main 918dcb7's whole GPU suite + the three sanitizers + fingerprints + a probe of the
# compile report on the device.
set -o pipefail
R=$(pwd)
export CAKE_RT_QUIET=1 PYTHONPATH=$R:$R/.peers PYTHONUNBUFFERED=1 CAKE_RT_CACHE_DIR=$R/.dev/maincache
M=$OUT/verify.log
say() { echo "[$SECONDS s] $*" | tee -a $M; }
say "tree 918dcb7"; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> $M
say "selftest"; timeout 40 python3 -m cake_rt >> $OUT/selftest.log 2>&1; echo "cake-rt rc=$?" | tee -a $M
say "fingerprints"
timeout 60 python3 scripts/dsa-fingerprint > $OUT/fp_dsa.txt 2>&1; echo "dsa fp rc=$? lines=$(wc -l < $OUT/fp_dsa.txt)" | tee -a $M
timeout 90 python3 scripts/ssd-fingerprint > $OUT/fp_ssd.txt 2>&1; echo "ssd fp rc=$? lines=$(wc -l < $OUT/fp_ssd.txt)" | tee -a $M
cat $OUT/fp_dsa.txt $OUT/fp_ssd.txt > $OUT/fingerprints.txt
if diff <(grep -v "^#" bench/results/h200_2026-12-01_fingerprints.txt | sort) <(grep -v "^#" $OUT/fingerprints.txt | sort) > $OUT/fp_diff.txt; then
  echo "fingerprints EQUAL to h200_2026-12-01" | tee -a $M; else echo "fingerprints DIFFER: $(wc -l < $OUT/fp_diff.txt) lines" | tee -a $M; head -20 $OUT/fp_diff.txt | tee -a $M; fi
say "compile report probe"
timeout 60 python3 - > $OUT/probe.log 2>&1 <<'PY'
from cake_rt.launch import compile as c
from cake_rt.ops import dsa
print("nvrtc", c.nvrtc_version())
path, d = dsa.programs("sm_90a")[0]
_, log = c._run_nvrtc(c._full_text(c.load_source(path), d), "indexer.cu", "sm_90a", (), verbose=True)
print("log chars", len(log)); print(log[:1500])
print(c.compile_report(c.load_source(path), name="indexer.cu", target="sm_90a", defines=d))
PY
echo "probe rc=$?" >> $OUT/probe.log; tail -4 $OUT/probe.log | tee -a $M
say "GPU suite"
timeout 300 python3 -m pytest -q -ra -p no:cacheprovider -n 4 --dist loadfile --timeout=250 --junitxml=$OUT/junit.xml \
  --ignore=tests/ssd/test_ssd_compile.py --ignore=tests/dsa/test_dsa_compile.py \
  tests > $OUT/suite.log 2>&1; echo "suite rc=$?" >> $OUT/suite.log
grep -E "passed|failed|FAILED|ERROR|rc=" $OUT/suite.log | tail -30 | tee -a $M
say "compute-sanitizer"
OUT=$OUT timeout 200 bash scripts/sanitize all > $OUT/sanitize.log 2>&1; echo "sanitize rc=$?" >> $OUT/sanitize.log
tail -15 $OUT/sanitize.log | tee -a $M
say "done"
cd $OUT && tar czf v5.tgz *.log *.txt junit.xml 2>/dev/null; ls $OUT | head -40
