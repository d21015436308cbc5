#!/usr/bin/env bash
# scripts/ssd-walk-trace on the walk rows (tree 6329831 + the script), its patched programs compiled ahead.
export CAKE_RT_CACHE_DIR=$PWD/.dev/w5/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1
timeout 150 python3 scripts/ssd-walk-trace nemotron-h m2-2.7b seed --runs 2 2>&1 | grep -v "^cake-rt: compiling" | tee $OUT/walk_trace.txt
