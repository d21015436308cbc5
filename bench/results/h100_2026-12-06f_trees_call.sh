#!/usr/bin/env bash
# Staged in the forty-fifth session for the next: 4b4e6fd (old), main d21bd56 (s1k at 112 / 144) and branch arm2
# (s1k in the one-window programs, 104 / 152) alternated in one process a row (scripts/dsa-placement --trees),
# programs compiled on the CPU (--compile-only) into .dev/next45/cache. run "bash .dev/next45/call.sh", carry
# [".dev/next45"], ~60-90 s. (The tree that runs it needs scripts/dsa-placement --trees: main 89f2374 or later.)
set -u
t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee $OUT/trees.txt
export CAKE_RT_CACHE_DIR=$PWD/.dev/next45/cache PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
K=.dev/next45/k
T=old=$K/old/cake_rt/kernels,main=$K/main/cake_rt/kernels,arm2=$K/arm2/cake_rt/kernels
O16=$(python3 -c "print(','.join(hex(i*0x1c000+0x10) for i in range(16)))")
O8=$(python3 -c "print(','.join(hex(i*0x38000+0x20010) for i in range(8)))")
{ echo "== A3 H32 16 offsets"; timeout 70 python3 scripts/dsa-placement A3 --heads 32 --records $O16 --repeats 10 --trees $T 2>&1
  echo "[$((SECONDS-t0)) s]"
  for r in A3:64 A2:32 A1:32 A2:64 A1:64; do
    echo "== ${r%:*} H${r#*:}"
    timeout 50 python3 scripts/dsa-placement ${r%:*} --heads ${r#*:} --records $O8 --repeats 10 --trees $T 2>&1
    echo "[$((SECONDS-t0)) s]"
  done
  for r in ${BIG-S1 S2 Z2cp C1 Z3cp}; do for h in 32 64; do
    [ $((SECONDS-t0)) -gt 240 ] && break 2
    echo "== $r H$h"; timeout 50 python3 scripts/dsa-placement $r --heads $h --runners 2 --repeats 8 --trees $T 2>&1
    echo "[$((SECONDS-t0)) s]"
  done; done
} 2>&1 | tee -a $OUT/trees.txt
