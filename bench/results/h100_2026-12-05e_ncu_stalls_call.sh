#!/usr/bin/env bash
# (1) ncu's stall samples of main 166c64e's kernels (line info, staged on the CPU) on the walk rows (nemotron-h,
# m2-2.7b) and the exact-scan rows (m2-2.7b-b8, varlen); (2) nemotron-h with the walk's ring of all 128 chunks
# (CAKE_RT_SSD_WORKSPACE_CAP 400 MB) against the default cap's ring of 120, alternating, record cubins.
# run "bash .dev/stalls2/call.sh", carry [".dev/stalls2", ".dev/record"], ~250 s. $OUT/stalls2.tgz, $OUT/cap.log.
R=$PWD
[ -d .dev/stalls2/cubins ] || tar -xJf .dev/stalls2/cubins.txz -C .dev/stalls2 || exit 1
[ -d .dev/record/cubins ] || tar -xJf .dev/record/cubins.txz -C .dev/record || exit 1
export CAKE_RT_QUIET=1 PYTHONPATH=$R PYTHONUNBUFFERED=1
W=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for cap in default 400000000 default 400000000 default 400000000; do
  if [ $cap = default ]; then unset CAKE_RT_SSD_WORKSPACE_CAP; else export CAKE_RT_SSD_WORKSPACE_CAP=$cap; fi
  CAKE_RT_CACHE_DIR=$R/.dev/record/cubins timeout 60 python3 -m cake_rt bench ssd --rows nemotron-h --no-peers \
    --repeats 10 --warmup 2 --budget-s 0.6 --json $W/cap_${cap}_$RANDOM.json 2>&1 | grep -E "^\| nemotron-h" | cut -c1-120 \
    | sed "s/^/cap $cap: /" | tee -a $OUT/cap.log
  CAKE_RT_CACHE_DIR=$R/.dev/record/cubins python3 -c "
import sys; sys.path.insert(0, 'scripts')
from ssd_trace import suite_call
import cupy; from cake_rt.ops import ssd as ops
_, call = suite_call('nemotron-h'); call(); cupy.cuda.Device().synchronize(); p = ops.last_plan()
print('  plan:', p.family, 'walk_ring', p.walk_ring, 'workspace', p.workspace_bytes)" 2>&1 | tail -1 | tee -a $OUT/cap.log
done
unset CAKE_RT_SSD_WORKSPACE_CAP
export CAKE_RT_CACHE_DIR=$R/.dev/stalls2/cubins CAKE_RT_LINEINFO=1
for rk in nemotron-h:chunkpar m2-2.7b:chunkpar m2-2.7b-b8:exact varlen:exact; do
  row=${rk%%:*}; k=${rk##*:}
  timeout 150 ncu --clock-control none -k regex:ssd_$k -s 1 -c 1 --section WarpStateStats --section SourceCounters \
    --section SchedulerStats --section ComputeWorkloadAnalysis --import-source yes \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active" \
    -o $W/k_$row python3 scripts/ssd-row $row --calls 2 > $W/ncu_$row.log 2>&1; echo "ncu $row rc=$?"
  ncu -i $W/k_$row.ncu-rep --page details --csv > $W/k_${row}_details.csv 2>&1
  ncu -i $W/k_$row.ncu-rep --page source --csv --print-source sass > $W/k_${row}_sass.csv 2>&1; echo "source rc=$?"
  grep -E "issue_stalled_(barrier|wait|short|long|math|mio|no_inst|selected|membar|lg_th|dispatch)|Duration|issue_active|inst_executed|gmma" $W/k_${row}_details.csv | sed 's/","/ | /g' | cut -c1-200 | sort -t'|' -k1,1 | head -30
  rm -f $W/k_$row.ncu-rep
done
tar czf $OUT/stalls2.tgz -C $W .
