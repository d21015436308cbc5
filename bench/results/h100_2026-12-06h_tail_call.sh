#!/usr/bin/env bash
# A tail trace (scripts/dsa-tail-trace) of main d21bd56 and branch bmerge (round 50), A1 and A3 at H = 32 and 64, each
# tree from its own folder; the patched programs compile here. run "bash .dev/tt/call.sh", carry [".dev/tt"].
export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
for t in mainold bmerge; do
  (cd .dev/tt/$t && CAKE_RT_CACHE_DIR=$PWD/../cache_$t timeout 150 python3 scripts/dsa-tail-trace A1 A3 --H 32,64 --runs 10) > $OUT/tt_$t.txt 2>&1
  echo "== $t rc=$?"; tail -40 $OUT/tt_$t.txt
done
