#!/usr/bin/env bash
# main a05177e and branch rfloor (a part's running floor) alternated in one process a row
# (scripts/dsa-placement --trees), programs compiled on the CPU into .dev/next46/cache. run "bash .dev/next46/call.sh",
# carry [".dev/next46"].
set -u
t0=$SECONDS
export CAKE_RT_CACHE_DIR=$PWD/.dev/next46/cache PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
K=.dev/next46/k
T=main=$K/main/cake_rt/kernels,rfloor=$K/rfloor/cake_rt/kernels
O16=$(python3 -c "print(','.join(hex(i*0x1c000+0x10) for i in range(16)))")
O8=$(python3 -c "print(','.join(hex(i*0x38000+0x20010) for i in range(8)))")
{ echo "== A3 H32 16 offsets"; timeout 60 python3 scripts/dsa-placement A3 --heads 32 --records $O16 --repeats 10 --trees $T 2>&1
  echo "[$((SECONDS-t0)) s]"
  for r in A3:64 A2:32 A1:32 A2:64 A1:64; do
    echo "== ${r%:*} H${r#*:}"
    timeout 50 python3 scripts/dsa-placement ${r%:*} --heads ${r#*:} --records $O8 --repeats 10 --trees $T 2>&1
    echo "[$((SECONDS-t0)) s]"
  done
  for r in S1:32; do
    echo "== ${r%:*} H${r#*:}"; timeout 50 python3 scripts/dsa-placement ${r%:*} --heads ${r#*:} --runners 2 --repeats 8 --trees $T 2>&1
    echo "[$((SECONDS-t0)) s]"
  done
} > $OUT/trees46.txt 2>&1
grep -E "^(==|tree|records left)" $OUT/trees46.txt
