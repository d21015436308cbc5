#!/usr/bin/env bash
# Session 45, call 3: branch bmerge (a batch's split histograms in one round trip, the merge's copies in flight
# together) against main d21bd56, one process per row (probe45b), then the ab-kit checks of bmerge.
set -u
t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee $OUT/probe45b.txt
export CAKE_RT_CACHE_DIR=$PWD/.dev/p45/cache PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
P=.dev/p45/probe45b.py
V=main,bm
O16=$(python3 -c "print(','.join(hex(i*0x20000+0x10) for i in range(16)))")
O8=$(python3 -c "print(','.join(hex(i*0x40000+0x20010) for i in range(8)))")
{ echo "== A3 H32 16 offsets"; timeout 60 python3 $P run A3 32 $V $O16 10 2>&1; echo "[$((SECONDS-t0)) s]"
  for r in A3:64 A2:32 A1:32 A2:64 A1:64; do
    echo "== ${r%:*} H${r#*:}"; timeout 40 python3 $P run ${r%:*} ${r#*:} $V $O8 10 2>&1; echo "[$((SECONDS-t0)) s]"
  done
  for r in S1 S2 Z2cp; do
    echo "== $r H32"; timeout 40 python3 $P run $r 32 $V 0,0x1000 8 2>&1; echo "[$((SECONDS-t0)) s]"
  done
} 2>&1 | tee -a $OUT/probe45b.txt
unset CAKE_RT_CACHE_DIR PYTHONPATH
bash .dev/bm/call.sh 2>&1 | tail -60
