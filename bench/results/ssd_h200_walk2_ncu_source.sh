#!/usr/bin/env bash
# Where the walk rows' kernels stall, per SASS instruction (lineinfo programs of tree 6329831): ncu's source page.
export CAKE_RT_CACHE_DIR=$PWD/.dev/w4/cubins CAKE_RT_LINEINFO=1 CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
ncu --version | tail -1
for row in nemotron-h m2-2.7b; do
  timeout 150 ncu --clock-control none -k regex:ssd_chunkpar -s 1 -c 1 --section WarpStateStats --section SourceCounters --section LaunchStats \
    --import-source yes -f -o $OUT/src_$row python3 scripts/ssd-row $row --calls 2 > $OUT/ncu_run_$row.log 2>&1; echo "$row ncu rc=$?"
  timeout 120 ncu -i $OUT/src_$row.ncu-rep --page source --csv --print-source sass > $OUT/src_${row}_sass.csv 2> $OUT/src_${row}_err.log; echo "sass page rc=$? $(wc -l < $OUT/src_${row}_sass.csv) lines"
  timeout 120 ncu -i $OUT/src_$row.ncu-rep --page source --csv --print-source cuda > $OUT/src_${row}_cuda.csv 2>> $OUT/src_${row}_err.log; echo "cuda page rc=$? $(wc -l < $OUT/src_${row}_cuda.csv) lines"
  head -c 600 $OUT/src_${row}_sass.csv; echo; tail -3 $OUT/src_${row}_err.log
done
ls -la $OUT
