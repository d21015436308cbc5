#!/usr/bin/env bash
# Session 47's first full call. On an H200: the record of main (.dev/record, staged for 04d5bfd, main's kernels).
# Otherwise: main / rfloor10 (f35bef4) / rfloor11 in one process a row (scripts/dsa-trees), then rfloor11's checks from
# its own tree (.dev/t11): DSA fingerprints against 12-06's, the DSA GPU tests, compute-sanitizer on the DSA cases.
# run "bash .dev/next47/c47.sh" with main checked out, carry .dev/next47 .dev/rfv11p .dev/t11 .dev/record .peers.
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"
if [[ $name == *H200* ]]; then
    timeout 585 bash .dev/record/record.sh
    exit
fi
ROOT=$PWD
mkdir -p .dev/rfv11 && tar -xJf .dev/rfv11p/rfv11.txz -C .dev/rfv11 || exit 1
export PYTHONPATH=$ROOT PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
K=.dev/next47/k
CAKE_RT_CACHE_DIR=$ROOT/.dev/next47/cache timeout 170 bash scripts/dsa-trees \
    main=$K/main/cake_rt/kernels,rfloor10=$K/rfloor/cake_rt/kernels,rfloor11=$K/rfloor11/cake_rt/kernels S1:32 S1:64 \
    > $OUT/trees47.txt 2>&1
grep -E "^(==|tree|records left|\[)" $OUT/trees47.txt
cd .dev/t11 || exit 1
export CAKE_RT_CACHE_DIR=$ROOT/.dev/rfv11/cache PYTHONPATH=$PWD
timeout 30 python3 scripts/dsa-fingerprint > $OUT/fp_dsa.txt 2>&1
echo "fingerprints: $(wc -l < $OUT/fp_dsa.txt) lines, not in 12-06's: $(awk 'NR==FNR{a[$0];next} !($0 in a)' $ROOT/bench/results/h200_2026-12-06_fingerprints.txt $OUT/fp_dsa.txt | wc -l)"
timeout 200 python3 -m pytest -q -n 8 tests/dsa tests/acceptance/test_dsa_contract_gpu.py --ignore=tests/dsa/test_dsa_compile.py \
    --ignore=tests/dsa/test_dsa_product_trace_cpu.py --ignore=tests/dsa/test_dsa_tail_trace_cpu.py > $OUT/tests.txt 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.txt
OUT=$OUT/san timeout 150 bash scripts/sanitize dsa > $OUT/sanitize.txt 2>&1; echo "sanitize rc=$?"
grep -E "rc=|SUMMARY" $OUT/sanitize.txt
