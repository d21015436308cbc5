#!/usr/bin/env bash
# Call A: the SSD A/B kit (base dc6c3d5, a = tilebudget a140acc, b = tilebudget2 b3c48cf), the DSA A/B kit (base
# dc6c3d5, a = vend32 4b959a7, b = append44b 6bc7334), then landtb (main + both SSD arms) benched without peers and the
# two fixed GPU test files on it.
R=$(cd "$(dirname "$0")/../.." && pwd); cd $R
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
tar -xJf .dev/pack/ab_ssd.txz -C .dev && tar -xJf .dev/pack/ab_dsa.txz -C .dev || exit 1
sed -i 's/--end [0-9]*/--end 150/' .dev/tilebudget/call.sh .dev/dsa3/call.sh
echo "== ssd ab [$SECONDS s]"; bash .dev/tilebudget/call.sh > $OUT/ab_ssd.log 2>&1; tail -12 $OUT/ab_ssd.log
echo "== dsa ab [$SECONDS s]"; bash .dev/dsa3/call.sh > $OUT/ab_dsa.log 2>&1; tail -16 $OUT/ab_dsa.log
echo "== landtb [$SECONDS s]"; bash .dev/pack/setup_land.sh || exit 1; L=/tmp/landtb; cd $L
export CAKE_RT_CACHE_DIR=$L/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
OUT=$OUT/b OPS=ssd RECORD=bench/results/h200_2026-12-04f ACCURACY=0 timeout 150 bash scripts/device-bench.sh > /dev/null 2>&1
cat $OUT/b/bench.log | cut -c1-200
echo "== fixed tests [$SECONDS s]"
PYTHONPATH=$L timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_dlpack_stream_gpu.py tests/test_capture_beside_gpu.py > $OUT/fixed_tests.log 2>&1; tail -4 $OUT/fixed_tests.log
echo "== end [$SECONDS s]"
