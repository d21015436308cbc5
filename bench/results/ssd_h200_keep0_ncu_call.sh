#!/bin/bash
# ncu of nemotron-h's walk kernel, main (base) against keep0: bytes through L2 against time.
cd "$(dirname "$0")/../.."
R=$PWD
ncu --version | tail -1
for arm in base keep0; do  # (.dev/w5/{base,keep0}: git archive of main 756757b and walk-keep0 e0b9a44, cake_rt and scripts)
  d=$R/.dev/w5/$arm
  echo "== $arm"
  CAKE_RT_CACHE_DIR=$d/cache CAKE_RT_QUIET=1 PYTHONPATH=$d timeout 100 ncu --clock-control none -k regex:ssd_chunkpar -s 1 -c 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --metrics gpu__time_duration.sum,lts__t_bytes.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__m_xbar2l1tex_read_bytes.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
    python3 $d/scripts/ssd-row nemotron-h --calls 2 > $OUT/ncu_${arm}_$RANDOM.txt 2>&1; echo "ncu rc=$?"
done
for f in $OUT/ncu_*.txt; do echo "== $f"; grep -E "Duration|gpu__time|lts__|l1tex__m|hmma|L2 Cache Throughput|DRAM Throughput|Memory Throughput" $f | head -14; done
