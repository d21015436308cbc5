#!/usr/bin/env bash
# Session 44's call (budget-limited): (1) probe_hist: the split records' placement against the histogram layout
# (main, nocount, s1, s1k runners alternated in one process); (2) the tree with s1 (branch hspread 7201111, its cubins
# staged in .dev/record44): the DSA bench against 12-04b; the DSA fingerprints against 12-04d; compute-sanitizer on
# the DSA case; the DSA GPU tests, in the time left. LIMIT: seconds this script may take.
set -u
t0=$SECONDS; LIMIT=${LIMIT:-420}
left() { echo $((LIMIT - (SECONDS - t0))); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader
P=.dev/p44/probe_hist.py
O16=$(python3 -c "print(','.join(hex(i*0x20000+0x10) for i in range(16)))")
O8=$(python3 -c "print(','.join(hex(i*0x40000+0x20010) for i in range(8)))")
( export CAKE_RT_CACHE_DIR=$PWD/.dev/p44/cache PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
{ echo "== A3 H32 16 offsets"; timeout 80 python3 $P run A3 32 main,nocount,s1,s1k $O16 10 2>&1; echo "[$((SECONDS-t0)) s]"
  echo "== A3 H64"; timeout 40 python3 $P run A3 64 main,s1,s1k $O8 10 2>&1; echo "[$((SECONDS-t0)) s]"
  echo "== A1 H32"; timeout 40 python3 $P run A1 32 main,s1,s1k $O8 10 2>&1; echo "[$((SECONDS-t0)) s]"
} > $OUT/probe.txt )
cat $OUT/probe.txt
cp .dev/p44/selection_s1.cuh cake_rt/kernels/dsa/selection.cuh
cp .dev/p44/layout_s1.cuh cake_rt/kernels/dsa/layout.cuh
[ -d .dev/record44/cubins ] || tar -xJf .dev/record44/cubins.txz -C .dev/record44 || exit 1
export CAKE_RT_CACHE_DIR=$PWD/.dev/record44/cubins CAKE_RT_GIT_HASH=$(cat .dev/record44/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
echo "[$((SECONDS-t0)) s] bench"
OUT=$OUT/b OPS=dsa RECORD=bench/results/h200_2026-12-04b ACCURACY=0 timeout $(( $(left) - 20 )) bash scripts/device-bench.sh > /dev/null 2>&1
cat "$OUT/b/bench.log"
export PYTHONPATH=$PWD
echo "[$((SECONDS-t0)) s] fingerprints"
timeout 90 python3 scripts/dsa-fingerprint > $OUT/fp_dsa.txt 2>&1
grep -v "^#" $OUT/fp_dsa.txt | sort > /tmp/new; grep -v "^#" bench/results/h200_2026-12-04d_fingerprints.txt | sort > /tmp/old
echo "dsa fingerprint lines: $(wc -l < /tmp/new); not in the 12-04d record: $(comm -13 /tmp/old /tmp/new | wc -l)"; comm -13 /tmp/old /tmp/new | head -5
echo "[$((SECONDS-t0)) s] sanitize"
OUT=$OUT/s timeout $(( $(left) - 10 )) bash scripts/sanitize dsa > $OUT/sanitize.txt 2>&1; grep -E "rc=|SUMMARY" $OUT/sanitize.txt
echo "[$((SECONDS-t0)) s] tests"
timeout $(( $(left) - 5 )) python3 -m pytest -q -p no:cacheprovider -n 5 --dist loadfile tests/dsa tests/acceptance/test_dsa_contract_gpu.py \
    --ignore=tests/dsa/test_dsa_compile.py --ignore=tests/dsa/test_dsa_tail_trace_cpu.py > $OUT/tests.txt 2>&1
tail -n 4 $OUT/tests.txt
echo "[$((SECONDS-t0)) s] end"
