# The record call of h200_2026-12-05f_oneq_bench.log: .dev/dispatch.sh, then .dev/oneqrec/call.sh, then the staged record.sh
# H200: the oneq record (bench dsa vs 12-04b, then the verification: suite, sanitizers, fingerprints); else the A/B kit
g=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $g"
case "$g" in
*H200*) bash .dev/oneqrec/call.sh 2>&1 | tail -80 ;;
*) bash .dev/oneq/call.sh 2>&1 | tail -45
   for t in base a; do (cd .dev/oneq/$t && CAKE_RT_CACHE_DIR=$PWD/.cubins PYTHONPATH=$PWD timeout 60 python3 scripts/dsa-tail-trace A3 A1 --H 32,64 --runs 3 > $OUT/tt_$t.txt 2>&1); done
   tail -n 25 $OUT/tt_base.txt $OUT/tt_a.txt ;;
esac
# --- .dev/oneqrec/call.sh
# the record of branch oneq: its tree unpacked beside, the staged record inside it
set -u
d=$PWD/.dev/oneqrec/t; mkdir -p $d && tar -xJf .dev/oneqrec/tree.txz -C $d && mkdir -p $d/.dev && cp -r .dev/oneqrec/record $d/.dev/record
cp -r .peers $d/.peers 2>/dev/null
cd $d && bash .dev/record/record.sh
# --- .dev/record/record.sh
#!/usr/bin/env bash
# Staged by scripts/record-prepare (RECORD=bench/results/h200_2026-12-04b OPS=dsa) on ff7c6d4: the bench, then the verification.
[ -d .dev/record/cubins ] || tar -xJf .dev/record/cubins.txz -C .dev/record || exit 1
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
OUT=$OUT/b OPS=dsa RECORD=bench/results/h200_2026-12-04b ACCURACY=0 timeout 400 bash scripts/device-bench.sh > /dev/null 2>&1
cat "$OUT/b/bench.log"
OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-04b_fingerprints.txt timeout 330 bash scripts/device-verify.sh > /dev/null 2>&1
cat "$OUT/v/verify.log"
