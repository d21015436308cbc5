#!/usr/bin/env bash
# Session 45, call 1: main / main at 112-144 / the s1k arm (.dev/p45/kab knobs), one process per row, runners alternated,
# split records at their own page offsets (A rows), cold L2; outputs checked equal.
set -u
t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee $OUT/probe45.txt
export CAKE_RT_CACHE_DIR=$PWD/.dev/p45/cache PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
P=.dev/p45/probe45.py
V=main,m112,arm
O16=$(python3 -c "print(','.join(hex(i*0x20000+0x10) for i in range(16)))")
O8=$(python3 -c "print(','.join(hex(i*0x40000+0x20010) for i in range(8)))")
{ echo "== A3 H32 16 offsets"; timeout 70 python3 $P run A3 32 $V $O16 10 2>&1; echo "[$((SECONDS-t0)) s]"
  echo "== A3 H64"; timeout 45 python3 $P run A3 64 $V $O8 10 2>&1; echo "[$((SECONDS-t0)) s]"
  echo "== A2 H32"; timeout 45 python3 $P run A2 32 $V $O8 10 2>&1; echo "[$((SECONDS-t0)) s]"
  echo "== A1 H32"; timeout 45 python3 $P run A1 32 $V $O8 10 2>&1; echo "[$((SECONDS-t0)) s]"
  echo "== A2 H64"; timeout 45 python3 $P run A2 64 $V $O8 10 2>&1; echo "[$((SECONDS-t0)) s]"
  echo "== A1 H64"; timeout 45 python3 $P run A1 64 $V $O8 10 2>&1; echo "[$((SECONDS-t0)) s]"
  for r in S1 S2 Z2cp C1 Z3cp; do for h in 32 64; do
    [ $((SECONDS-t0)) -gt 330 ] && break 2
    echo "== $r H$h"; timeout 45 python3 $P run $r $h $V 0,0x1000 8 2>&1; echo "[$((SECONDS-t0)) s]"
  done; done
} 2>&1 | tee -a $OUT/probe45.txt
