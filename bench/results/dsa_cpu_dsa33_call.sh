#!/usr/bin/env bash
# dsa33 call (round 30, issue #12): a ring of 8 score tiles where a block holds at most two queries (H >= 48), then, in
# the same call, the arm's record: its DSA suite bench and its verification (so a kept arm needs no second call).
# On the CPU: REV=dsa33 bash .dev/stage_rev.sh (stages .dev/final = the arm, every sm_90a cubin), and .dev/dsa33/base =
# main with its H = 64 DSA programs. Then: run command "bash .dev/dsa33/call.sh", carry [".dev/final", ".dev/dsa33"],
# timeout_s 420.
# 1. A/B base / arm / arm / base, H = 64 only (H = 32's program is main's: BQ = 4 keeps a ring of 4), rows S1, S2, C1,
#    Z2cp, Z3cp, A1, A3, each run in its own process and cache.
# 2. The arm's record bench: `cake-rt bench dsa` (both H, the side-stream table), compared with 12-02f.
# 3. The arm's verification: scripts/device-verify.sh, fingerprints against 12-02f's (the same bits).
R=$PWD; F=$R/.dev/final; B=$R/.dev/dsa33/base
export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
W=$(mktemp -d); mkdir -p $OUT/b $OUT/v
trap 'tar czf $OUT/ab.tgz -C $W .' EXIT
run_in() { local d=$1; shift; (cd $d && CAKE_RT_CACHE_DIR=$d/.cubins PYTHONPATH=$d "$@"); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
echo "base $(cd $R && git -C $R rev-parse --short HEAD 2>/dev/null) (main), arm $(cat $F/GIT_HASH)"
BA="--no-peers --repeats 8 --warmup 2 --budget-s 0.4 --side-stream none --heads 64 --rows S1,S2,C1,Z2cp,Z3cp,A1,A3"
for tr in "base 1" "arm 1" "arm 2" "base 2"; do set -- $tr
  d=$B; [ $1 = arm ] && d=$F
  echo "[$SECONDS s] bench $1 $2"
  run_in $d env CAKE_RT_GIT_HASH=$1 timeout 30 python3 -m cake_rt bench dsa $BA --json $W/dsa_$1_$2.json > $W/bench_$1_$2.log 2>&1; echo "rc=$?"
done
python3 $F/scripts/dsa-ab-summary $W > $W/summary.txt 2>&1; ARM=eager python3 $F/scripts/dsa-ab-summary $W > $W/summary_eager.txt 2>&1
cat $W/summary_eager.txt $W/summary.txt
echo "[$SECONDS s] the arm's record bench"
G=$(mktemp -d)
run_in $F env CAKE_RT_GIT_HASH=$(cat $F/GIT_HASH) timeout 170 python3 -m cake_rt bench dsa --no-peers --repeats 10 --warmup 2 \
    --budget-s 0.5 --side-stream 1 --time-limit 120 --json $G/dsa.json --markdown $G/dsa.md \
    --compare bench/results/h200_2026-12-02f_dsa.json > $G/dsa.log 2>&1; echo "bench dsa rc=$?"
tar czf $OUT/b/bench.tgz -C $G .
grep -E "^\| (S1|S2|C1|Z2cp|Z3cp|A1|A2|A3) " $G/dsa.md | cut -c1-120
echo "[$SECONDS s] the arm's verification"
(cd $F && CAKE_RT_CACHE_DIR=$F/.cubins CAKE_RT_GIT_HASH=$(cat $F/GIT_HASH) OUT=$OUT/v \
    FINGERPRINTS=bench/results/h200_2026-12-02f_fingerprints.txt bash scripts/device-verify.sh > /dev/null 2>&1)
grep -vE "^XFAIL" $OUT/v/verify.log | cut -c1-200
echo "[$SECONDS s] done"
