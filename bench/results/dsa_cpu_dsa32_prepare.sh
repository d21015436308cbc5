#!/usr/bin/env bash
# dsa32 (CPU only): the trees and cubins of the call dsa_cpu_dsa32_call.sh (round 29, issue #12):
#     bash bench/results/dsa_cpu_dsa32_prepare.sh      (R=<checkout>, default /work/main; ~6 min on 2 cores)
# base = main; a = branch dsa32 (the append's keys and ballots before its stores); b = branch dsa32b (a + round 26's
# armS, the head sum's queries in pairs). All three give the same bits. Under $V (default $R/.dev/dsa32): each tree's
# sm_90a DSA programs, spin.cu and selftest.cu in its own cache; the programs scripts/dsa-product-trace patches (H = 64
# and 32, D = 128); a's and b's lineinfo programs of the sanitizer cases.
set -e
R=${R:-/work/main}
V=${V:-$R/.dev/dsa32}
source /work/venv/bin/activate
export CAKE_RT_QUIET=1
mkdir -p $V; rm -rf $V/base $V/a $V/b
exec > >(tee $V/setup.log) 2>&1
git -C $R show main:bench/results/dsa_cpu_dsa32_call.sh > $V/call.sh
declare -A REV=([base]=main [a]=dsa32 [b]=dsa32b)
for t in base a b; do mkdir -p $V/$t/.cubins; git -C $R archive ${REV[$t]} | tar -x -C $V/$t; rm -rf $V/$t/bench/results $V/$t/docs; done
echo "base main $(git -C $R rev-parse --short main), a dsa32 $(git -C $R rev-parse --short dsa32), b dsa32b $(git -C $R rev-parse --short dsa32b)" > $V/trees.txt
for t in base a b; do
  (cd $V/$t && CAKE_RT_CACHE_DIR=$V/$t/.cubins PYTHONPATH=$V/$t python -c "
from cake_rt.warmup import warmup
print('$t', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}))
from cake_rt.launch.compile import compile_cubin, load_source
compile_cubin(load_source('bench/spin.cu'), name='spin.cu', target='sm_90a')
compile_cubin(load_source('common/selftest.cu'), name='selftest.cu', target='sm_90a')")
  T=$(mktemp -d); cp -r $V/$t/cake_rt $T/cake_rt
  (cd $V/$t && python -c "
import importlib.machinery, importlib.util, pathlib
ld = importlib.machinery.SourceFileLoader('t', 'scripts/dsa-product-trace')
t = importlib.util.module_from_spec(importlib.util.spec_from_loader('t', ld)); ld.exec_module(t)
for rel, patch in t.PATCHES.items():
    f = pathlib.Path('$T') / 'cake_rt' / 'kernels' / rel
    f.write_text(patch(f.read_text()))")
  (cd $T && CAKE_RT_CACHE_DIR=$V/$t/.cubins PYTHONPATH=$T python -c "
from cake_rt.warmup import warmup, parse_shapes
print('$t traced', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}, shapes=parse_shapes(['heads=64,head_dim=128', 'heads=32,head_dim=128'])))")
  rm -rf $T
done
for t in a b; do
(cd $V/$t && CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$V/$t/.cubins PYTHONPATH=$V/$t python -c "
from cake_rt.warmup import warmup, parse_shapes
print('$t lineinfo', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}, shapes=parse_shapes(['heads=64,head_dim=128', 'heads=32,head_dim=128', 'heads=24,head_dim=64'])))")
done
cat $V/trees.txt; du -sh $V; du -sh $V/*/.cubins
