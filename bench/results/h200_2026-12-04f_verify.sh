#!/usr/bin/env bash
# Record 12-04f, the SSD verification: fingerprints against 12-04d's, the SSD GPU and acceptance tests, compute-sanitizer
# on a call forced onto the walk (rings of 8 and 2, bitwise the exact scan), then ncu of nemotron-h's walk.
export CAKE_RT_CACHE_DIR=$PWD/.dev/slim2/cubins CAKE_RT_GIT_HASH=$(cat .dev/slim2/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1 PYTHONPATH=$PWD:$PWD/.peers
mkdir -p $OUT/v; L=$OUT/v/verify.log; echo "tree $(cat .dev/slim2/GIT_HASH)" > $L
timeout 120 python3 scripts/ssd-fingerprint > $OUT/v/fp_ssd.txt 2>&1; echo "ssd fingerprints rc=$?" >> $L
grep -v "^#" bench/results/h200_2026-12-04d_fingerprints.txt | grep "^ssd" | sort > /tmp/old; grep -v "^#" $OUT/v/fp_ssd.txt | sort > /tmp/new
echo "fingerprints: $(comm -23 /tmp/old /tmp/new | wc -l) recorded ssd lines not reproduced of $(wc -l < /tmp/old); $(comm -13 /tmp/old /tmp/new | wc -l) new" >> $L
timeout 300 python3 -m pytest -q -ra -p no:cacheprovider -n 5 --dist loadfile tests/ssd tests/acceptance/test_ssd_contract_gpu.py \
  --ignore=tests/ssd/test_ssd_compile.py --ignore=tests/ssd/test_ssd_phase_trace_cpu.py --ignore=tests/ssd/test_ssd_step_trace_cpu.py > $OUT/v/ssd_tests.log 2>&1
echo "ssd tests rc=$?: $(tail -1 $OUT/v/ssd_tests.log)" >> $L
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 python3 .dev/slim2/sanitize_walk.py > $OUT/v/san_$tool.log 2>&1
  echo "compute-sanitizer $tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|walk ring' $OUT/v/san_$tool.log | tr '\n' ' ')" >> $L
done
cat $L
timeout 100 ncu --clock-control none -k regex:ssd_chunkpar -s 1 -c 1 --section SpeedOfLight --section WarpStateStats --section Occupancy --section SourceCounters \
  --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
  python3 scripts/ssd-row nemotron-h --calls 2 > $OUT/v/ncu_walk_nemotron-h.txt 2>&1; echo "ncu rc=$?"
grep -E "Duration|hmma|dram__bytes|Warp Cycles Per Issued|hit_rate" $OUT/v/ncu_walk_nemotron-h.txt | head
