#!/usr/bin/env bash
# rfloor's last form (f35bef4, branch rfloor checked out): the in-process A/B (.dev/next46), the DSA fingerprints
# against 12-06's, the DSA GPU tests, compute-sanitizer on the DSA cases (lineinfo programs in .dev/rfv/cache).
# run "bash .dev/rfv/call.sh", carry [".dev/next46", ".dev/rfv"] (~4 min).
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 100 bash .dev/next46/call.sh
export CAKE_RT_CACHE_DIR=$PWD/.dev/rfv/cache CAKE_RT_QUIET=1 PYTHONPATH=$PWD PYTHONUNBUFFERED=1
timeout 30 python3 scripts/dsa-fingerprint > $OUT/fp_dsa.txt 2>&1
echo "fingerprints: $(wc -l < $OUT/fp_dsa.txt) lines, not in 12-06's: $(awk 'NR==FNR{a[$0];next} !($0 in a)' bench/results/h200_2026-12-06_fingerprints.txt $OUT/fp_dsa.txt | wc -l)"
timeout 75 python3 -m pytest -q -n 8 tests/dsa tests/acceptance/test_dsa_contract_gpu.py --ignore=tests/dsa/test_dsa_compile.py \
    --ignore=tests/dsa/test_dsa_product_trace_cpu.py --ignore=tests/dsa/test_dsa_tail_trace_cpu.py > $OUT/tests.txt 2>&1
echo "tests rc=$?"; tail -2 $OUT/tests.txt
OUT=$OUT/san timeout 150 bash scripts/sanitize dsa > $OUT/sanitize.txt 2>&1; echo "sanitize rc=$?"
grep -E "rc=|SUMMARY" $OUT/sanitize.txt
