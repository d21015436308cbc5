#!/usr/bin/env bash
# Thirty-first session: the walk programs' register split 200 / 56 against main cfe2283: probe pairs, the SSD GPU and
# acceptance tests, compute-sanitizer on the forced walk. Staged on the CPU: .dev/w10/base = main cfe2283 with its
# cubins (`bash bench/results/ssd_h200_memside_call.sh stage` makes it as .dev/ms/base), .dev/w11/probe.py =
# ssd_h200_walk2_probe.py + ssd_h200_probe_ring_checks.diff, .dev/w12/cache = this tree's `cake-rt warmup` of the SSD
# programs, .dev/w12/sanitize_walk.py = h200_2026-12-04e_sanitize_walk.py. Carry the three folders.
R=$PWD
export CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
run() {  # label dir cache
  (cd $2 && CAKE_RT_CACHE_DIR=$3 PYTHONPATH=$2 MAIN=$2 ARM=$1 CHECKS=$4 ROWS=nemotron-h,m2-2.7b timeout 200 python3 $R/.dev/w11/probe.py 2>&1 | grep -a "^check\|^time\|rror" | tail -8)
}
run new $R $R/.dev/w12/cache 1
for r in 1 2 3 4 5; do
  run base $R/.dev/w10/base $R/.dev/w10/base/cache 0
  run new $R $R/.dev/w12/cache 0
done
export CAKE_RT_CACHE_DIR=$R/.dev/w12/cache
PYTHONPATH=$R timeout 400 python3 -m pytest -q -n 4 -p no:cacheprovider tests/ssd/test_ssd_gpu.py tests/acceptance/test_ssd_contract_gpu.py > $OUT/tests.log 2>&1; echo "SSD GPU + acceptance rc=$?: $(tail -1 $OUT/tests.log)"
for tool in memcheck racecheck synccheck; do
  PYTHONPATH=$R timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 python3 .dev/w12/sanitize_walk.py > $OUT/san_$tool.log 2>&1
  echo "compute-sanitizer $tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|walk ring' $OUT/san_$tool.log | tr '\n' ' ')"
done
