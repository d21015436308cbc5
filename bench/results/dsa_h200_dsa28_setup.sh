#!/usr/bin/env bash
# dsa28 (CPU only): the trees, cubins and program text of the call dsa_h200_dsa28_call.sh, from this checkout alone:
#     bash bench/results/dsa_h200_dsa28_setup.sh          (from /work/main; R=<checkout> for another; ~4 min on 2 cores)
# base = main (BASE=<rev> for another tree), arm = base + dsa_h200_dsa28_arm.diff (a full block at H = 64 in two wgmma
# column groups, the first query's head sum under the second query's wgmma). Under $R/.dev/dsa28: the call and its
# summary scripts; each tree's sm_90a DSA programs, spin.cu and selftest.cu precompiled in its own cache; lineinfo
# programs: base H = 32 and 64 / D 128 (the ncu), the arm's sanitizer cases (H = 64 / D 128, 32 / 128, 24 / 64); for
# ncu's summaries, each tree's H = 32 and 64 program text and line-annotated SASS (src/, srcdump.py: nvdisasm -gi).
set -e
R=${R:-/work/main}
V=$R/.dev/dsa28
K=${K:-$R/bench/results/dsa_h200_dsa28}  # the kit (this checkout's bench/results)
BASE=${BASE:-main}
source /work/venv/bin/activate
export CAKE_RT_QUIET=1
rm -rf $V/base $V/arm $V/src; mkdir -p $V/base $V/arm $V/src
for f in setup.sh call.sh srcdump.py regions.py lines.py reasons.py static.py arm.diff; do cp ${K}_$f $V/$f; done
cp $R/scripts/dsa-ab-summary $V/summ.py
git -C $R archive $BASE | tar -x -C $V/base
git -C $R archive $BASE | tar -x -C $V/arm
patch -s -p1 -d $V/arm < $V/arm.diff  # (not git apply: inside $R's work tree it skips paths outside the folder)
grep -q "constexpr int G = " $V/arm/cake_rt/kernels/dsa/tile_sm90.cuh || { echo "setup: the arm's diff is not in the arm's tree"; exit 1; }
for a in base arm; do rm -rf $V/$a/bench/results $V/$a/docs; mkdir -p $V/$a/.cubins; done
# SEED=<folder of cubins> (e.g. an earlier setup's, copied aside) fills both caches first: a key names its program text
if [ -n "$SEED" ]; then for a in base arm; do cp $SEED/*.cubin $V/$a/.cubins/; done; fi
echo "base $BASE $(git -C $R rev-parse --short $BASE), arm = base + dsa_h200_dsa28_arm.diff ($(md5sum < $V/arm.diff | cut -c1-8))" > $V/trees.txt
for a in base arm; do
  (cd $V/$a && CAKE_RT_CACHE_DIR=$V/$a/.cubins PYTHONPATH=$V/$a python -c "
from cake_rt.warmup import warmup
print('$a', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}))
from cake_rt.launch.compile import compile_cubin, load_source
compile_cubin(load_source('bench/spin.cu'), name='spin.cu', target='sm_90a')
compile_cubin(load_source('common/selftest.cu'), name='selftest.cu', target='sm_90a')")
done
(cd $V/base && CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$V/base/.cubins PYTHONPATH=$V/base python -c "
from cake_rt.warmup import warmup, parse_shapes
print('base lineinfo', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}, shapes=parse_shapes(['heads=64,head_dim=128', 'heads=32,head_dim=128'])))")
(cd $V/arm && CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$V/arm/.cubins PYTHONPATH=$V/arm python -c "
from cake_rt.warmup import warmup, parse_shapes
print('arm lineinfo', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}, shapes=parse_shapes(['heads=64,head_dim=128', 'heads=32,head_dim=128', 'heads=24,head_dim=64'])))")
for a in base arm; do
  (cd $V/$a && CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$V/$a/.cubins PYTHONPATH=$V/$a python $V/srcdump.py $V/src $a 32 64)
done
(cd $V/src && for h in 64 32; do for a in base arm; do echo "== $a H = $h"; python $V/static.py FULL_${a}_H$h.cu LI_${a}_H$h.sass; done; done)
cat $V/trees.txt; du -sh $V; du -sh $V/*/.cubins $V/src
