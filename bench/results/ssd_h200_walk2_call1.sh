#!/usr/bin/env bash
# Twenty-ninth session, call 1: walk arms (late count, producer-counted slot reads, both, cap ring 128) against main,
# alternating processes; the trace arm's per-chunk stamps; ncu of main's walk on nemotron-h and m2-2.7b.
export CAKE_RT_CACHE_DIR=$PWD/.dev/w2/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 MAIN=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
run() { # arm tree checks [env]
  env ARM=$1 CHECKS=$3 PYTHONPATH=$PWD/.dev/w2/$2 $4 timeout 60 python3 .dev/w2/probe.py 2>&1 | grep -v "^cake-rt: compiling" | tee -a $OUT/arms.log
}
run base base 1
run late late 1
run prod prod 1
run both both 1
run cap base 0 CAKE_RT_SSD_WORKSPACE_CAP=300000000
run capb both 0 CAKE_RT_SSD_WORKSPACE_CAP=300000000
run both both 0
run prod prod 0
run late late 0
run base base 0
echo "== trace" | tee -a $OUT/arms.log
env ARM=trace CHECKS=0 TRACE=1 PYTHONPATH=$PWD/.dev/w2/trace timeout 60 python3 .dev/w2/probe.py 2>&1 | grep -v "^cake-rt: compiling" | tee $OUT/trace.log
for row in nemotron-h m2-2.7b; do
  echo "== ncu walk $row" | tee -a $OUT/arms.log
  PYTHONPATH=$PWD/.dev/w2/base timeout 100 ncu --clock-control none -k regex:ssd_chunkpar -s 1 -c 1 --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis \
    --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,lts__t_sector_hit_rate.pct \
    python3 scripts/ssd-row $row --calls 2 > $OUT/ncu_walk_$row.txt 2>&1; echo "ncu rc=$?"
  grep -E "Duration|Tensor|mma_cycles|dram__bytes|Warp Cycles Per Issued|inst_executed|Registers Per|Achieved Occupancy|hit_rate|Stall" $OUT/ncu_walk_$row.txt | head -24
done
