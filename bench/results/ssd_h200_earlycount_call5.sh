#!/bin/bash
# The walk's slot-read count before the tile's first epilogue (branch earlycount) against main cadfe3a: probe pairs on
# nemotron-h and m2-2.7b (walk checks: ring 2 against the exact scan, four shapes), then the SSD GPU and acceptance
# tests and compute-sanitizer on the forced walk, on the branch's tree.
# Staged on the CPU: .dev/w13/walkprobe.py = .dev/w11/probe.py (bench/results/ssd_h200_walk2_probe.py + ssd_h200_probe_ring_checks.diff),
# .dev/w13/main = main cadfe3a (git archive) with its two walk cubins, .dev/w13/cache_ec = this tree's `cake-rt warmup` of the
# SSD programs, .dev/w13/sanitize_walk.py = .dev/w12/sanitize_walk.py. Carry .dev/w13.
R=$PWD; W=$R/.dev/w13
export CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
run() {  # label dir cache checks
  (cd $2 && CAKE_RT_CACHE_DIR=$3 PYTHONPATH=$2 MAIN=$2 ARM=$1 CHECKS=$4 ROWS=nemotron-h,m2-2.7b timeout 200 python3 $W/walkprobe.py 2>&1 | grep -a "^check\|^time\|rror" | tail -8)
}
run ec $R $W/cache_ec 1
for r in 1 2 3 4 5; do
  run main $W/main $W/main/cache 0
  run ec $R $W/cache_ec 0
done
export CAKE_RT_CACHE_DIR=$W/cache_ec
PYTHONPATH=$R timeout 400 python3 -m pytest -q -n 4 -p no:cacheprovider tests/ssd/test_ssd_gpu.py tests/acceptance/test_ssd_contract_gpu.py > $OUT/tests.log 2>&1; echo "SSD GPU + acceptance rc=$?: $(tail -1 $OUT/tests.log)"
for tool in memcheck racecheck synccheck; do
  PYTHONPATH=$R timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 python3 $W/sanitize_walk.py > $OUT/san_$tool.log 2>&1
  echo "compute-sanitizer $tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|walk ring' $OUT/san_$tool.log | tr '\n' ' ')"
done
