#!/usr/bin/env bash
# Round 58's probe: A3's parts against how many CTAs read the same keys (bench/results/dsa_cpu_keyshare_probe.py), then ncu
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1 CAKE_RT_CACHE_DIR=$PWD/.dev/h50/cache
timeout 240 python3 bench/results/dsa_cpu_keyshare_probe.py --heads 32,64 --repeats 24 2>&1 | tee $OUT/keyshare.txt
M=lts__t_sector_hit_rate.pct,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_atom.sum,lts__t_sectors_srcunit_tex_op_red.sum,l1tex__m_xbar2l1tex_read_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,gpc__cycles_elapsed.max,gpu__time_duration.sum
for arm in a3 t1_ks1280 dist4; do
  timeout 60 ncu --clock-control none --cache-control all -k regex:dsa_scan -s 1 -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --metrics $M python3 bench/results/dsa_cpu_keyshare_probe.py --heads 32 --only $arm > $OUT/ncu_${arm}_H32.txt 2>&1
  echo "== ncu $arm H32"; grep -E "Duration|Throughput|Hit Rate|lts__|dram__|l1tex__m|sm__cycles|gpc__|gpu__time|Busy" $OUT/ncu_${arm}_H32.txt | head -40
done
