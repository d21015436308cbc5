#!/usr/bin/env bash
# Session 48: main (50d1bb2's kernels) / arm hpre in one process a row (A rows), then the arm's checks from the root
# (the arm's tree): DSA fingerprints against 12-06's, the DSA GPU tests, compute-sanitizer on the DSA cases.
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"
ROOT=$PWD
export PYTHONPATH=$ROOT PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1 CAKE_RT_CACHE_DIR=$ROOT/.dev/h48/cache
K=.dev/h48/k
timeout 200 bash scripts/dsa-trees main=$K/main/cake_rt/kernels,arm=$K/arm/cake_rt/kernels > $OUT/trees48.txt 2>&1
grep -E "^(==|tree|records left|\[)" $OUT/trees48.txt
timeout 30 python3 scripts/dsa-fingerprint > $OUT/fp_dsa.txt 2>&1
echo "fingerprints: $(wc -l < $OUT/fp_dsa.txt) lines, not in 12-06's: $(awk 'NR==FNR{a[$0];next} !($0 in a)' $ROOT/bench/results/h200_2026-12-06_fingerprints.txt $OUT/fp_dsa.txt | wc -l)"
timeout 200 python3 -m pytest -q -n 8 tests/dsa tests/acceptance/test_dsa_contract_gpu.py --ignore=tests/dsa/test_dsa_compile.py \
    --ignore=tests/dsa/test_dsa_product_trace_cpu.py --ignore=tests/dsa/test_dsa_tail_trace_cpu.py > $OUT/tests.txt 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.txt
OUT=$OUT/san timeout 150 bash scripts/sanitize dsa > $OUT/sanitize.txt 2>&1; echo "sanitize rc=$?"
grep -E "rc=|SUMMARY" $OUT/sanitize.txt
