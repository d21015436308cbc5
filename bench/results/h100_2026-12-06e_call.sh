#!/usr/bin/env bash
# Session 45, last call: 4b4e6fd (old), main d21bd56 and arm2 (s1k in the one-window programs, 104 / 152), one process a row.
set -u
t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee $OUT/probe45c.txt
export CAKE_RT_CACHE_DIR=$PWD/.dev/p45/cache PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
P=.dev/p45/probe45c.py
V=old,main,arm2
O16=$(python3 -c "print(','.join(hex(i*0x20000+0x10) for i in range(16)))")
O8=$(python3 -c "print(','.join(hex(i*0x40000+0x20010) for i in range(8)))")
{ echo "== A3 H32 16 offsets"; timeout 60 python3 $P run A3 32 $V $O16 10 2>&1; echo "[$((SECONDS-t0)) s]"
  for r in A3:64 A2:32 A1:32 A2:64 A1:64; do
    echo "== ${r%:*} H${r#*:}"; timeout 40 python3 $P run ${r%:*} ${r#*:} $V $O8 10 2>&1; echo "[$((SECONDS-t0)) s]"
  done
  for r in S1 S2; do
    echo "== $r H32"; timeout 40 python3 $P run $r 32 $V 0,0x1000 8 2>&1; echo "[$((SECONDS-t0)) s]"
  done
} 2>&1 | tee -a $OUT/probe45c.txt
