#!/usr/bin/env bash
# Session 48, rfone (cd32d33) against main's kernels: A rows in one process, then the arm's checks (lean form).
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"
ROOT=$PWD
export PYTHONPATH=$ROOT PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1 CAKE_RT_CACHE_DIR=$ROOT/.dev/h49/cache
K=.dev/h49/k
timeout 120 bash scripts/dsa-trees main=$K/main/cake_rt/kernels,arm=$K/arm/cake_rt/kernels > $OUT/trees49.txt 2>&1
grep -E "^(==|tree|records left|\[)" $OUT/trees49.txt
timeout 30 python3 scripts/dsa-fingerprint > $OUT/fp_dsa.txt 2>&1
echo "fingerprints: $(wc -l < $OUT/fp_dsa.txt) lines, not in 12-06's: $(awk 'NR==FNR{a[$0];next} !($0 in a)' $ROOT/bench/results/h200_2026-12-06_fingerprints.txt $OUT/fp_dsa.txt | wc -l)"
timeout 120 python3 -m pytest -q -n 8 tests/dsa/test_dsa_gpu.py tests/acceptance/test_dsa_contract_gpu.py \
    -k "split or raise or merge or part or tail or bitwise" > $OUT/tests.txt 2>&1
echo "tests rc=$?"; tail -2 $OUT/tests.txt
OUT=$OUT/san timeout 100 bash scripts/sanitize dsa > $OUT/sanitize.txt 2>&1; echo "sanitize rc=$?"
grep -E "rc=|SUMMARY" $OUT/sanitize.txt
