#!/usr/bin/env bash
# The tail trace with the merge's counts (scripts/dsa-tail-trace, 04d5bfd) of this tree, A1-A3 at H = 32 and 64; the
# patched programs compile here. run "bash .dev/tt2/call.sh", carry [".dev/tt2"] (the folder holds only this script).
export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1 CAKE_RT_CACHE_DIR=$PWD/.dev/tt2/cache
timeout 200 python3 scripts/dsa-tail-trace A1 A2 A3 --H 32,64 --runs 10 > $OUT/tail_counts.txt 2>&1
echo "tail trace rc=$?"; grep -E "^A|keys|candidates|streamed|merge:|span|arrival from" $OUT/tail_counts.txt
