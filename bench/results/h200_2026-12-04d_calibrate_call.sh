#!/usr/bin/env bash
export CAKE_RT_CACHE_DIR=$PWD/.dev/cal/cubins CAKE_RT_GIT_HASH=$(cat .dev/cal/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1 PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > $OUT/machine.txt 2>&1
echo "== calibrate"; date
timeout 260 python3 -m cake_rt calibrate --repeats 5 --no-save > $OUT/calibrate.log 2>&1; echo "rc $?"
tail -40 $OUT/calibrate.log
echo "== phase trace"; date
timeout 150 python3 scripts/ssd-phase-trace m2-2.7b nemotron-h m2-2.7b-b8 --runs 3 > $OUT/phase.log 2>&1; echo "rc $?"
tail -50 $OUT/phase.log
echo "== tail trace"; date
timeout 120 python3 scripts/dsa-tail-trace A3 A2 --H 32,64 --runs 3 > $OUT/tail.log 2>&1; echo "rc $?"
tail -60 $OUT/tail.log
date
