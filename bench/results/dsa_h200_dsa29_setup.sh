#!/usr/bin/env bash
# dsa29 (CPU only): the trees and cubins of the call dsa_h200_dsa29_call.sh, from this checkout alone:
#     bash bench/results/dsa_h200_dsa29_setup.sh          (from /work/main; R=<checkout> for another; ~5 min on 2 cores)
# base = main (BASE=<rev> for another tree); arm = base + dsa_h200_dsa29_arm.diff (the head sum in two fmaf chains a
# sum and a block's queries in pairs: a new fixed order, other score bits); armS = base + dsa_h200_dsa29_armS.diff (the
# pairs alone: main's order, the same bits). Under $V (default $R/.dev/dsa29): the call and its summary script; each
# tree's sm_90a DSA programs, spin.cu and selftest.cu precompiled in its own cache; each arm's lineinfo programs (the
# sanitizer cases H = 64 / D 128, 32 / 128, 24 / 64, and the ncu's H = 64); for the ncu's summary, the arm's H = 64
# program text and line-annotated SASS (src/, srcdump.py); static.txt, the tile loops' SASS counts of the three trees.
set -e
R=${R:-/work/main}
V=${V:-$R/.dev/dsa29}  # (the run tool carries /work/main/.dev/dsa29: V= for a setup from another checkout)
K=${K:-$R/bench/results/dsa_h200_dsa29}   # this kit (this checkout's bench/results)
K28=${K28:-$R/bench/results/dsa_h200_dsa28}  # round 25's ncu summaries (regions.py and its helpers)
BASE=${BASE:-main}
ARMS="arm armS"
source /work/venv/bin/activate
export CAKE_RT_QUIET=1
mkdir -p $V; rm -rf $V/base $V/arm $V/armS $V/src; mkdir -p $V/src
exec > >(tee $V/setup.log) 2>&1
for f in setup.sh call.sh arm.diff armS.diff; do cp ${K}_$f $V/$f; done
for f in srcdump.py regions.py lines.py reasons.py static.py; do cp ${K28}_$f $V/$f; done
cp $R/scripts/dsa-ab-summary $V/summ.py
for a in base $ARMS; do mkdir -p $V/$a; git -C $R archive $BASE | tar -x -C $V/$a; done
# (patch, not git apply: inside $R's work tree git apply skips paths outside the folder)
for a in $ARMS; do patch -s -p1 -d $V/$a < $V/$a.diff; done
grep -q "constexpr int NCH = " $V/arm/cake_rt/kernels/dsa/tile_common.cuh || { echo "setup: arm.diff is not in the arm's tree"; exit 1; }
grep -q "constexpr int G = " $V/armS/cake_rt/kernels/dsa/tile_common.cuh || { echo "setup: armS.diff is not in armS's tree"; exit 1; }
for a in base $ARMS; do rm -rf $V/$a/bench/results $V/$a/docs; mkdir -p $V/$a/.cubins; done
# SEED=<folder> with an earlier setup's caches (SEED/<tree>/*.cubin, copied aside) fills each tree's cache first: a key
# names its program text, so only what changed compiles
if [ -n "$SEED" ]; then for a in base $ARMS; do cp $SEED/$a/* $V/$a/.cubins/ 2>/dev/null || true; done; fi
echo "base $BASE $(git -C $R rev-parse --short $BASE), arm = base + dsa_h200_dsa29_arm.diff ($(md5sum < $V/arm.diff | cut -c1-8)), armS = base + dsa_h200_dsa29_armS.diff ($(md5sum < $V/armS.diff | cut -c1-8))" > $V/trees.txt
for a in base $ARMS; do
  (cd $V/$a && CAKE_RT_CACHE_DIR=$V/$a/.cubins PYTHONPATH=$V/$a python -c "
from cake_rt.warmup import warmup
print('$a', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}))
from cake_rt.launch.compile import compile_cubin, load_source
compile_cubin(load_source('bench/spin.cu'), name='spin.cu', target='sm_90a')
compile_cubin(load_source('common/selftest.cu'), name='selftest.cu', target='sm_90a')")
done
for a in $ARMS; do
  (cd $V/$a && CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$V/$a/.cubins PYTHONPATH=$V/$a python -c "
from cake_rt.warmup import warmup, parse_shapes
print('$a lineinfo', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}, shapes=parse_shapes(['heads=64,head_dim=128', 'heads=32,head_dim=128', 'heads=24,head_dim=64'])))")
done
(cd $V/arm && CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$V/arm/.cubins PYTHONPATH=$V/arm python $V/srcdump.py $V/src arm 64 32)
(cd $V/armS && CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$V/armS/.cubins PYTHONPATH=$V/armS python $V/srcdump.py $V/src armS 64 32)
T=$(mktemp -d)  # base's lineinfo programs (static.txt only) are not carried
(cd $V/base && CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$T PYTHONPATH=$V/base python $V/srcdump.py $V/src base 64 32)
(cd $V/src && for h in 64 32; do for a in base $ARMS; do echo "== $a H = $h"; python $V/static.py FULL_${a}_H$h.cu LI_${a}_H$h.sass 2>/dev/null | head -4; done; done) | tee $V/static.txt
# the ncu's summary needs only the arm's H = 64 text and SASS
rm -f $V/src/*base* $V/src/*armS* $V/src/*_H32*
cat $V/trees.txt; du -sh $V; du -sh $V/*/.cubins $V/src
