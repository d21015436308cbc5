#!/usr/bin/env bash
# dsa30b (CPU only): the trees and cubins of the call dsa_h200_dsa30b_call.sh, from this checkout alone:
#     git -C /work/main show dsa30b:bench/results/dsa_h200_dsa30b_setup.sh > /tmp/s.sh && bash /tmp/s.sh
#     (R=<checkout> for another; ~4 min on 2 cores; SEED=<folder> fills the caches from an earlier setup's, see below)
# base = main (BASE=<rev> for another tree); arm = branch dsa30b (ARM=<rev> for another: dsa30's register-operand
# product at H = 16, 32, 64, issue #12, with warpgroup 1's waits on warpgroup 0's key copies moved ahead of the steps
# that let warpgroup 0 copy the next tile; other score bits there). Under $V (default $R/.dev/dsa30b): the call; each tree's
# sm_90a DSA programs, spin.cu and selftest.cu precompiled in its own cache; the arm's lineinfo programs (the sanitizer
# cases H = 64 / D 128, 32 / 128, 24 / 64, and the ncu's H = 64).
set -e
R=${R:-/work/main}
V=${V:-$R/.dev/dsa30b}  # (the run tool carries /work/main/.dev/dsa30b)
BASE=${BASE:-main}
ARM=${ARM:-dsa30b}
source /work/venv/bin/activate
export CAKE_RT_QUIET=1
mkdir -p $V; rm -rf $V/base $V/arm
exec > >(tee $V/setup.log) 2>&1
git -C $R show $ARM:bench/results/dsa_h200_dsa30b_call.sh > $V/call.sh
git -C $R show $ARM:bench/results/dsa_h200_dsa30b_setup.sh > $V/setup.sh
for a in base arm; do mkdir -p $V/$a; done
git -C $R archive $BASE | tar -x -C $V/base
git -C $R archive $ARM | tar -x -C $V/arm
grep -q "warpgroup 0's half of tile 0" $V/arm/cake_rt/kernels/dsa/tile_sm90.cuh || { echo "setup: the arm is not dsa30b's tree"; exit 1; }
for a in base arm; do rm -rf $V/$a/bench/results $V/$a/docs; mkdir -p $V/$a/.cubins; done
# SEED=<folder> with an earlier setup's caches (SEED/<tree>/*) fills each tree's cache first: a key names its program
# text, so only what changed compiles
if [ -n "$SEED" ]; then for a in base arm; do cp $SEED/$a/* $V/$a/.cubins/ 2>/dev/null || true; done; fi
echo "base $BASE $(git -C $R rev-parse --short $BASE), arm $ARM $(git -C $R rev-parse --short $ARM)" > $V/trees.txt
for a in base arm; do
  (cd $V/$a && CAKE_RT_CACHE_DIR=$V/$a/.cubins PYTHONPATH=$V/$a python -c "
from cake_rt.warmup import warmup
print('$a', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}))
from cake_rt.launch.compile import compile_cubin, load_source
compile_cubin(load_source('bench/spin.cu'), name='spin.cu', target='sm_90a')
compile_cubin(load_source('common/selftest.cu'), name='selftest.cu', target='sm_90a')")
done
(cd $V/arm && CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$V/arm/.cubins PYTHONPATH=$V/arm python -c "
from cake_rt.warmup import warmup, parse_shapes
print('arm lineinfo', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}, shapes=parse_shapes(['heads=64,head_dim=128', 'heads=32,head_dim=128', 'heads=24,head_dim=64'])))")
cat $V/trees.txt; du -sh $V; du -sh $V/*/.cubins
