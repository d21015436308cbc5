#!/usr/bin/env bash
# dsa31 (CPU only): the trees and cubins of the call dsa_cpu_dsa31_call.sh (round 28, issue #12), from a checkout of
# main that holds this kit, scripts/dsa-product-trace and the arm's diff:
#     bash bench/results/dsa_cpu_dsa31_prepare.sh      (R=<checkout>, default /work/main; ~4-5 min on 2 cores)
# base = main (BASE=<rev> for another tree); arm = base + bench/results/dsa_cpu_dsa31_arm.diff (the append of a query's
# score tile by 4 warps at BQ <= 2, 2 at BQ <= 4: the same keys in the same order, the same bits). Under $V (default
# $R/.dev/dsa31): the call; each tree's sm_90a DSA programs, spin.cu and selftest.cu precompiled in its own cache; the
# programs scripts/dsa-product-trace patches (S2 H = 64 and S1 H = 32: D = 128) in each tree's cache (a cache key is
# the program's text, defines, target and NVRTC version, not its path: the trace's temporary copy hits them); the
# arm's lineinfo programs of the sanitizer cases (H = 64 / D 128, 32 / 128, 24 / 64).
set -e
R=${R:-/work/main}
V=${V:-$R/.dev/dsa31}  # (the run tool carries /work/main/.dev/dsa31)
BASE=${BASE:-main}
source /work/venv/bin/activate
export CAKE_RT_QUIET=1
mkdir -p $V; rm -rf $V/base $V/arm
exec > >(tee $V/setup.log) 2>&1
git -C $R show $BASE:bench/results/dsa_cpu_dsa31_call.sh > $V/call.sh
git -C $R show $BASE:bench/results/dsa_cpu_dsa31_prepare.sh > $V/prepare.sh
for a in base arm; do mkdir -p $V/$a; git -C $R archive $BASE | tar -x -C $V/$a; done
patch -s -p1 -d $V/arm < $V/arm/bench/results/dsa_cpu_dsa31_arm.diff
grep -q "APPEND_WARPS" $V/arm/cake_rt/kernels/dsa/layout.cuh || { echo "prepare: the arm's diff did not apply"; exit 1; }
grep -q "APPEND_WARPS" $V/base/cake_rt/kernels/dsa/layout.cuh && { echo "prepare: base already holds the arm"; exit 1; }
for a in base arm; do rm -rf $V/$a/bench/results $V/$a/docs; mkdir -p $V/$a/.cubins; done
echo "base $BASE $(git -C $R rev-parse --short $BASE), arm = base + dsa_cpu_dsa31_arm.diff" > $V/trees.txt
for a in base arm; do
  (cd $V/$a && CAKE_RT_CACHE_DIR=$V/$a/.cubins PYTHONPATH=$V/$a python -c "
from cake_rt.warmup import warmup
print('$a', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}))
from cake_rt.launch.compile import compile_cubin, load_source
compile_cubin(load_source('bench/spin.cu'), name='spin.cu', target='sm_90a')
compile_cubin(load_source('common/selftest.cu'), name='selftest.cu', target='sm_90a')")
  # the traced programs: the tree's cake_rt patched as scripts/dsa-product-trace patches it, warmed from a copy
  T=$(mktemp -d)
  cp -r $V/$a/cake_rt $T/cake_rt
  (cd $V/$a && python -c "
import importlib.machinery, importlib.util, pathlib
ld = importlib.machinery.SourceFileLoader('t', 'scripts/dsa-product-trace')
t = importlib.util.module_from_spec(importlib.util.spec_from_loader('t', ld)); ld.exec_module(t)
for rel, patch in t.PATCHES.items():
    f = pathlib.Path('$T') / 'cake_rt' / 'kernels' / rel
    f.write_text(patch(f.read_text()))")
  (cd $T && CAKE_RT_CACHE_DIR=$V/$a/.cubins PYTHONPATH=$T python -c "
from cake_rt.warmup import warmup, parse_shapes
print('$a traced', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}, shapes=parse_shapes(['heads=64,head_dim=128', 'heads=32,head_dim=128'])))")
  rm -rf $T
done
(cd $V/arm && CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$V/arm/.cubins PYTHONPATH=$V/arm python -c "
from cake_rt.warmup import warmup, parse_shapes
print('arm lineinfo', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}, shapes=parse_shapes(['heads=64,head_dim=128', 'heads=32,head_dim=128', 'heads=24,head_dim=64'])))")
cat $V/trees.txt; du -sh $V; du -sh $V/*/.cubins
