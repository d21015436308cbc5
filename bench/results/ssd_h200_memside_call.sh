#!/bin/bash
# The thirty-first session's SSD arms (docs/ssd.md, "The walk rows against memory-side levers ..."), staged and run.
#   stage (CPU):  bash bench/results/ssd_h200_memside_call.sh stage     (trees under .dev/ms/, programs prewarmed)
#   run (H200):   bash bench/results/ssd_h200_memside_call.sh CALL      (CALL: pf, ring3, lookback, noout_evict,
#                                                                        ring4, smem, recompute, walkpair; carry [".dev/ms"])
# Each arm is main (cfe2283) + bench/results/ssd_h200_<arm>_arm.diff; the probe is ssd_h200_walk2_probe.py +
# ssd_h200_probe_ring_checks.diff (RING: the walk's ring depth for the timed rows; CHECK_RING: for the bitwise checks,
# which add three batched shapes at chunks 64, 128 and 256). Arms that read an env switch: memside_pf (PF bits: 1 the
# tile's boxes asked of L2 at its draw, 2 the walker's next chunk but one, 4 the walker's copies replaced by plain
# arrivals, 8 the tiles' copies so replaced; 4 and 8 give wrong results, timing only), evict (EV bits: 1 x / z
# evict_first, 2 y streaming stores, 4 round_T(S_prev) evict_last, 8 C / B evict_last), lookback (LBNO=1 no output
# tiles, timing only; LBDRAW=1 a tile drawn only once the CTA's previous tile is published). The probe's SCHED=walk
# and FAMILY=chunkpar force the walk program on rows the planner gives to the three phases (short, for recompute).
set -e
cd "$(dirname "$0")/../.."
R=$PWD M=$R/.dev/ms
arms="memside_pf walkring3 walkring4 lookback evict smem_pad16 recompute walkpair_sm"
if [ "$1" = stage ]; then
  PY=${PY:-python3}
  for t in base $arms; do
    rm -rf $M/$t && mkdir -p $M/$t && git archive HEAD cake_rt scripts tests | tar -x -C $M/$t
    [ $t = base ] || (cd $M/$t && patch -s -p1 < $R/bench/results/ssd_h200_${t}_arm.diff)
  done
  cp bench/results/ssd_h200_walk2_probe.py $M/probe.py && (cd $M && patch -s probe.py < $R/bench/results/ssd_h200_probe_ring_checks.diff)
  cat > $M/prewarm.py <<'PY'
import itertools, os
from cake_rt.ops import ssd
from cake_rt.warmup import _compile_one
cases = [(0, 2, 2, 64, 128, 128, 16), (0, 2, 2, 64, 128, 256, 80), (0, 2, 2, 64, 128, 128, 4), (1, 2, 2, 64, 128, 128, 4),
         (0, 2, 2, 128, 64, 64, 4), (0, 2, 2, 64, 128, 256, 4), (0, 2, 2, 64, 128, 64, 1)]
for case, fam in itertools.product(cases, ("exact", "chunkpar")):
    d = ssd.program_defines(*case, target="sm_90a", family=fam)
    _compile_one((ssd.KERNEL_PATH, d, "sm_90a"))
    if fam == "chunkpar":
        _compile_one((ssd.KERNEL_PATH, {**d, "SSD_WALK": 1}, "sm_90a"))
PY
  pre() { (cd $M/$1 && shift && env "$@" CAKE_RT_CACHE_DIR=$PWD/cache PYTHONPATH=$PWD $PY ../prewarm.py); }
  for t in base walkring3 walkring4 smem_pad16 recompute walkpair_sm; do pre $t X=0; done
  (cd $M/base && CAKE_RT_CACHE_DIR=$PWD/cache PYTHONPATH=$PWD $PY -c "from cake_rt.warmup import warmup; warmup(('ssd',), 'sm_90a')")
  for pf in 1 2 3 4 8 12; do pre memside_pf PF=$pf; done
  for ev in 1 2 4 8 15; do pre evict EV=$ev; done
  for v in "0 0" "1 0" "0 1" "1 1"; do set -- $v; pre lookback LBNO=$1 LBDRAW=$2; done
  exit 0
fi
run() {  # tree label checks env...
  local d=$M/$1 arm=$2 ck=$3; shift 3
  (cd $d && env ROWS=nemotron-h,m2-2.7b CAKE_RT_CACHE_DIR=$d/cache PYTHONPATH=$d MAIN=$d ARM=$arm CHECKS=$ck "$@" \
     timeout 200 python3 $M/probe.py 2>&1 | grep -a "^check\|^time\|rror" | tail -8)
}
walk_tests() { (cd $M/$1 && CAKE_RT_CACHE_DIR=$PWD/cache PYTHONPATH=$PWD timeout 300 python3 -m pytest -q -p no:cacheprovider tests/ssd/test_ssd_gpu.py -k walk 2>&1 | tail -2); }
case "$1" in
  pf)
    run base base 0 X=0
    for pf in 1 2 3 4 8 12; do run memside_pf pf$pf $([ $pf = 3 ] && echo 1 || echo 0) PF=$pf; done
    run base ring16 0 RING=16; run base ring32 0 RING=32
    run base base 0 X=0; for pf in 1 3 2; do run memside_pf pf$pf 0 PF=$pf; done; run base base 0 X=0 ;;
  ring3)
    for r in 1 2 3; do run base base 0 X=0; run walkring3 w3r $([ $r = 1 ] && echo 1 || echo 0) X=0; done; walk_tests walkring3 ;;
  lookback)
    run lookback lb 1 CHECK_RING=4 RING=4
    for r in 1 2 3; do run base base 0 X=0; run lookback lb 0 RING=4; done
    run lookback lbdraw 1 LBDRAW=1 CHECK_RING=4 RING=4; run lookback lbnodraw 0 LBNO=1 LBDRAW=1 RING=4
    run base base 0 X=0; run lookback lbdraw 0 LBDRAW=1 RING=4; run lookback lb 0 RING=4; run base base 0 X=0 ;;
  noout_evict)
    run lookback lbno 0 LBNO=1 RING=4; run base base 0 X=0
    for ev in 1 2 4 8 15; do run evict ev$ev 0 EV=$ev; done
    run base base 0 X=0; for ev in 15 1 2; do run evict ev$ev 0 EV=$ev; done; run base base 0 X=0 ;;
  ring4)
    run walkring4 w4r 1 X=0; for r in 1 2 3; do run base base 0 X=0; run walkring4 w4r 0 X=0; done; walk_tests walkring4 ;;
  smem)
    for r in 1 2; do run base base 0 X=0; run smem_pad16 sm16 0 X=0; done; run base base 0 X=0 ;;
  recompute)
    run recompute rc 1 CHECK_RING=4 SCHED=walk FAMILY=chunkpar RING=4 ROWS=short
    for r in 1 2 3; do
      run base base 0 ROWS=short; run base exact 0 FAMILY=exact ROWS=short
      run recompute rc 0 SCHED=walk FAMILY=chunkpar RING=4 ROWS=short
    done ;;
  walkpair)
    run walkpair_sm wp 1 X=0; for r in 1 2 3; do run base base 0 X=0; run walkpair_sm wp 0 X=0; done; walk_tests walkpair_sm ;;
esac
