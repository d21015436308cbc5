#!/bin/bash
# Where nemotron-h's walk kernel stalls, per SASS instruction and per source line (lineinfo program): ncu's source page.
cd "$(dirname "$0")/../.."
export CAKE_RT_CACHE_DIR=$PWD/.dev/w8/cache CAKE_RT_LINEINFO=1 CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
ncu --version | tail -1
row=nemotron-h
timeout 200 ncu --clock-control none -k regex:ssd_chunkpar -s 1 -c 1 --section WarpStateStats --section SourceCounters \
  --import-source yes -f -o $OUT/src_$row python3 scripts/ssd-row $row --calls 2 > $OUT/ncu_run_$row.log 2>&1; echo "ncu rc=$?"
timeout 120 ncu -i $OUT/src_$row.ncu-rep --page source --csv --print-source sass > $OUT/src_${row}_sass.csv 2> $OUT/err.log; echo "sass rc=$? $(wc -l < $OUT/src_${row}_sass.csv)"
timeout 120 ncu -i $OUT/src_$row.ncu-rep --page source --csv --print-source cuda > $OUT/src_${row}_cuda.csv 2>> $OUT/err.log; echo "cuda rc=$? $(wc -l < $OUT/src_${row}_cuda.csv)"
rm -f $OUT/src_$row.ncu-rep
gzip -k $OUT/src_${row}_sass.csv $OUT/src_${row}_cuda.csv 2>/dev/null
ls -la $OUT; head -c 400 $OUT/src_${row}_cuda.csv; tail -3 $OUT/err.log $OUT/ncu_run_$row.log
