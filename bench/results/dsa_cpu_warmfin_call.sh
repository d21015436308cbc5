# Round 64 (docs/dsa.md): the call of the warmfin kit (bench/results/dsa_cpu_warmfin_prepare.sh stages it).
#### .dev/h55/call.sh
# 55th session: main / warmfin / warmfin2 / warmfin3 on the six A rows in one process a row (records spread), then the arm with
# the better geomean verified when it is faster than main on A3 and A2 at H = 32 (DSA fingerprints against 12-06b, the
# DSA GPU tests, the sanitizers). VERIFY=ARM verifies that arm whatever the times.
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1
python3 -m pip install --no-deps --no-build-isolation -e . > /dev/null 2>&1
K=$PWD/.dev/h53/k
ARMS=${ARMS:-warmfin warmfin2 warmfin3}
T=main=$K/main/cake_rt/kernels; for a in $ARMS; do T=$T,$a=$K/$a/cake_rt/kernels; done
(
export CAKE_RT_CACHE_DIR=$PWD/.dev/h53/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
for r in ${ROWS:-A3:32:16 A2:32:8 A1:32:8 A3:64:8 A2:64:8 A1:64:8}; do
    IFS=: read row h n <<< "$r"
    echo "== $row H$h"
    timeout 60 python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > $OUT/ab_${row}_${h}.txt 2>&1
    grep -E "^tree|outputs|records left|Error" $OUT/ab_${row}_${h}.txt; echo "[$SECONDS s]"
done
)
med() { grep "^tree $2:" $OUT/ab_$1.txt | sed -E 's/.*medians ([0-9.]+) us.*/\1/'; }
best=; bestg=0
for a in $ARMS; do
    g=1; ok=1
    for f in $OUT/ab_*.txt; do
        r=$(basename $f .txt); r=${r#ab_}
        m=$(med $r main); w=$(med $r $a)
        [ -n "$m" ] && [ -n "$w" ] || continue
        g=$(awk -v g=$g -v m=$m -v w=$w 'BEGIN{print g * (m / w)}')
    done
    n=$(ls $OUT/ab_*.txt | wc -l); g=$(awk -v g=$g -v n=$n 'BEGIN{printf "%.4f", g ^ (1 / n)}')
    for r in A3_32 A2_32; do
        awk -v m="$(med $r main)" -v w="$(med $r $a)" 'BEGIN{exit !(w < m)}' || ok=0
    done
    echo "$a: geomean main/arm ${g}x over $n rows; faster on A3 and A2 at H = 32: $ok"
    if [ $ok = 1 ] && awk -v g=$g -v b=$bestg 'BEGIN{exit !(g > b)}'; then best=$a; bestg=$g; fi
done
best=${VERIFY:-$best}
if [ -n "$best" ]; then
    echo "== verify $best"
    W=.dev/h55/wrec_$best
    mkdir -p $W && tar -xJf $W.txz -C $W || exit 1
    rm -rf cake_rt/kernels && cp -r $K/$best/cake_rt/kernels cake_rt/kernels
    export CAKE_RT_CACHE_DIR=$PWD/$W/cubins PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
    timeout 40 python3 scripts/dsa-fingerprint > $OUT/fp_dsa.txt 2>&1
    echo "dsa fingerprints rc=$?: $(grep -vc '^#' $OUT/fp_dsa.txt) lines, not in 12-06b's: $(grep -v '^#' $OUT/fp_dsa.txt | awk 'NR==FNR{a[$0];next} !($0 in a)' bench/results/h200_2026-12-06b_fingerprints.txt - | wc -l)"
    timeout 170 python3 -m pytest -q -ra -p no:cacheprovider -n 5 --dist loadfile --ignore=tests/dsa/test_dsa_compile.py \
        --ignore=tests/dsa/test_dsa_tail_trace_cpu.py --ignore=tests/dsa/test_dsa_product_trace_cpu.py tests/dsa tests/acceptance/test_dsa_contract_gpu.py > $OUT/suite.log 2>&1
    echo "suite rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/suite.log | tail -8
    OUT=$OUT timeout 100 bash scripts/sanitize dsa 2>&1 | grep -E "rc=|SUMMARY|equal"
else
    echo "no arm faster on A3 and A2 at H = 32: none verified"
fi
echo "[$SECONDS s]"
