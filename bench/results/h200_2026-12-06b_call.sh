#!/usr/bin/env bash
# Session 47's second full call, branch rfvar (2bde625: the running floor in DSA_RFLOOR programs) checked out.
# main's and rfvar's kernels in one process a row first (scripts/dsa-trees: the A rows; S1 at H = 32 on the H100 path).
# On an H200: then the record of rfvar (.dev/record: the DSA bench against 12-06's, then scripts/device-verify.sh).
# Otherwise: rfvar's checks from the record's cubins: DSA fingerprints against 12-06's, the DSA GPU tests,
# compute-sanitizer on the DSA cases.
# run "bash .dev/next47/c48.sh", carry .dev/next47 .dev/record .peers.
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"
ROOT=$PWD
export PYTHONPATH=$ROOT PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
K=.dev/next47/k
big=(); [[ $name == *H200* ]] || big=(S1:32)
CAKE_RT_CACHE_DIR=$ROOT/.dev/next47/cache timeout 100 bash scripts/dsa-trees \
    main=$K/main/cake_rt/kernels,rfvar=$K/rfvar/cake_rt/kernels "${big[@]}" > $OUT/trees48.txt 2>&1
grep -E "^(==|tree|records left|\[)" $OUT/trees48.txt
if [[ $name == *H200* ]]; then
    timeout 555 bash .dev/record/record.sh
    exit
fi
[ -d .dev/record/cubins ] || tar -xJf .dev/record/cubins.txz -C .dev/record || exit 1
export CAKE_RT_CACHE_DIR=$ROOT/.dev/record/cubins
timeout 30 python3 scripts/dsa-fingerprint > $OUT/fp_dsa.txt 2>&1
echo "fingerprints: $(wc -l < $OUT/fp_dsa.txt) lines, not in 12-06's: $(awk 'NR==FNR{a[$0];next} !($0 in a)' bench/results/h200_2026-12-06_fingerprints.txt $OUT/fp_dsa.txt | wc -l)"
timeout 220 python3 -m pytest -q -n 8 tests/dsa tests/acceptance/test_dsa_contract_gpu.py --ignore=tests/dsa/test_dsa_compile.py \
    --ignore=tests/dsa/test_dsa_product_trace_cpu.py --ignore=tests/dsa/test_dsa_tail_trace_cpu.py > $OUT/tests.txt 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.txt
OUT=$OUT/san timeout 180 bash scripts/sanitize dsa > $OUT/sanitize.txt 2>&1; echo "sanitize rc=$?"
grep -E "rc=|SUMMARY|bitwise" $OUT/sanitize.txt $OUT/san/*.log 2>/dev/null | head -12
