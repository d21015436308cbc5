#!/usr/bin/env bash
# ncu14 call (issue #12): ncu's source counters on main's lineinfo programs, one launch each, S1 at H = 32 and 64 and S2
# at H = 64, summarized per role and source region (round 25's regions.py), top lines and their stall reasons.
# First, on the CPU: bash bench/results/dsa_cpu_ncu14_setup.sh. Then: run command "bash .dev/ncu14/call.sh", carry
# [".dev/ncu14"], timeout_s 150 (~90 s expected on a warm machine). One tgz, $OUT/ncu14.tgz; the output's tail: the
# regions of each profile.
set -o pipefail
cd .dev/ncu14
V=$PWD
export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
W=$(mktemp -d); mkdir -p $OUT
trap 'cp $V/*.sh $V/trees.txt $W/ 2>/dev/null; tar czf $OUT/ncu14.tgz -C $W .' EXIT
cat $V/trees.txt
NCU="--clock-control none -k regex:dsa_scan -s 1 -c 1 --section SpeedOfLight --section WarpStateStats --section SourceCounters --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sectors_op_read.sum"
for p in "S1 32" "A3 32" "C1 32"; do set -- $p; n=ncu_$1_H$2
  echo "[$SECONDS s] ncu $1 H = $2"
  (cd $V/base && CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$V/base/.cubins PYTHONPATH=$V/base timeout 40 ncu $NCU -o $W/$n python3 scripts/dsa-row $1 --heads $2 > $W/$n.log 2>&1); echo "rc=$?"
  [ -f $W/$n.ncu-rep ] || continue
  timeout 30 ncu -i $W/$n.ncu-rep --page source --csv --print-source sass > $W/${n}_sass.csv 2>&1
  timeout 15 ncu -i $W/$n.ncu-rep --page details > $W/${n}_details.txt 2>&1
  F=$V/src/FULL_base_H$2.cu; S=$V/src/LI_base_H$2.sass
  { echo "#### $1 H = $2"
    grep -h "Duration\|Elapsed Cycles\|tensor_op_hmma\|L1/TEX Cache Throughput\|Issue Slots Busy\|Warp Cycles Per Issued" $W/${n}_details.txt | head -8
    python3 $V/regions.py $F $S $W/${n}_sass.csv; } > $W/${n}_regions.txt 2>&1
  python3 $V/lines.py $F $S $W/${n}_sass.csv 25 > $W/${n}_lines.txt 2>&1
  python3 $V/reasons.py $F $S $W/${n}_sass.csv $(grep -oE '%  L[0-9]+ ' $W/${n}_lines.txt | grep -oE '[0-9]+' | awk '!s[$0]++' | head -16) > $W/${n}_reasons.txt 2>&1
  rm -f $W/$n.ncu-rep
done
cat $W/ncu_*_regions.txt
