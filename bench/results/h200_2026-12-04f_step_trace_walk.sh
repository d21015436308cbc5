#!/usr/bin/env bash
# scripts/ssd-step-trace on the walk rows' output tiles (tree fc3ace8 + the script's walk anchors), patched programs
# compiled on the CPU.
export CAKE_RT_CACHE_DIR=$PWD/.dev/w7/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1
timeout 200 python3 scripts/ssd-step-trace nemotron-h m2-2.7b --runs 3 2>&1 | grep -v "^cake-rt: compiling" | tee $OUT/step_trace_walk.txt
