#!/usr/bin/env bash
# ncu14 (CPU only): main's tree, its cubins and program text for the call dsa_cpu_ncu14_call.sh (issue #12, docs/dsa.md
# "Next (after the thirteenth session)", item 2: where the selection's and the product's samples go after round 29).
#     bash bench/results/dsa_cpu_ncu14_setup.sh       (from /work/main; R=<checkout> for another; ~1-2 min on 2 cores)
# Round 25's summary scripts (bench/results/dsa_h200_dsa28_{srcdump,regions,lines,reasons}.py) on main: under
# $R/.dev/ncu14, base = main (BASE=<rev>) with its sm_90a DSA programs, spin.cu and selftest.cu; its lineinfo programs
# at H = 32 and 64 (D = 128); src/ with each program's text and line-annotated SASS (nvdisasm -gi).
set -e
R=${R:-/work/main}
V=$R/.dev/ncu14
K=$R/bench/results/dsa_h200_dsa28
BASE=${BASE:-main}
source /work/venv/bin/activate
export CAKE_RT_QUIET=1
rm -rf $V; mkdir -p $V/base/.cubins $V/src
for f in srcdump.py regions.py lines.py reasons.py; do cp ${K}_$f $V/$f; done
git -C $R show $BASE:bench/results/dsa_cpu_ncu14_call.sh > $V/call.sh
git -C $R archive $BASE | tar -x -C $V/base
rm -rf $V/base/bench/results $V/base/docs
echo "base $BASE $(git -C $R rev-parse --short $BASE)" > $V/trees.txt
(cd $V/base && CAKE_RT_CACHE_DIR=$V/base/.cubins PYTHONPATH=$V/base python -c "
from cake_rt.warmup import warmup, parse_shapes
print('base', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}, shapes=parse_shapes(['heads=64,head_dim=128', 'heads=32,head_dim=128'])))
from cake_rt.launch.compile import compile_cubin, load_source
compile_cubin(load_source('bench/spin.cu'), name='spin.cu', target='sm_90a')
compile_cubin(load_source('common/selftest.cu'), name='selftest.cu', target='sm_90a')")
(cd $V/base && CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$V/base/.cubins PYTHONPATH=$V/base python -c "
from cake_rt.warmup import warmup, parse_shapes
print('base lineinfo', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}, shapes=parse_shapes(['heads=64,head_dim=128', 'heads=32,head_dim=128'])))")
(cd $V/base && CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$V/base/.cubins PYTHONPATH=$V/base python $V/srcdump.py $V/src base 32 64)
cat $V/trees.txt; du -sh $V $V/base/.cubins $V/src
