#!/usr/bin/env bash
# dsa27 (CPU only): the trees and cubins of the call .dev/dsa27/call.sh. base = main (its cubins: dsa26's n1a tree, the
# same kernel text), arm = branch dsa27's HEAD. The arm's sm_90a DSA programs, spin.cu and selftest.cu precompiled, and
# the lineinfo programs of the sanitizer's cases (H = 64 / D 128, 32 / 128, 24 / 64).
set -e
R=/work/main
V=$R/.dev/dsa27
source /work/venv/bin/activate
export CAKE_RT_QUIET=1
rm -rf $V/base $V/arm; mkdir -p $V/base $V/arm
git -C $R archive main | tar -x -C $V/base
git -C /work/wt/dsa27 archive HEAD | tar -x -C $V/arm
for a in base arm; do rm -rf $V/$a/bench/results $V/$a/docs; mkdir -p $V/$a/.cubins; done
cp $R/.dev/dsa26/n1a/.cubins/* $V/base/.cubins/
echo "base $(git -C $R rev-parse --short main) arm dsa27 $(git -C /work/wt/dsa27 rev-parse --short HEAD)" > $V/trees.txt
cd $V/arm
CAKE_RT_CACHE_DIR=$V/arm/.cubins PYTHONPATH=$V/arm python -c "
from cake_rt.warmup import warmup
print('arm', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}))
from cake_rt.launch.compile import compile_cubin, load_source
compile_cubin(load_source('bench/spin.cu'), name='spin.cu', target='sm_90a')
compile_cubin(load_source('common/selftest.cu'), name='selftest.cu', target='sm_90a')"
CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$V/arm/.cubins PYTHONPATH=$V/arm python -c "
from cake_rt.warmup import warmup, parse_shapes
print('arm lineinfo', warmup(('dsa',), 'sm_90a', jobs=${JOBS:-2}, shapes=parse_shapes(['heads=64,head_dim=128', 'heads=32,head_dim=128', 'heads=24,head_dim=64'])))"
du -sh $V; du -sh $V/*/.cubins; ls $V/arm/.cubins | wc -l

# ---- call.sh
#!/usr/bin/env bash
# dsa27 call (round 23: the product warpgroups' key rows by TMA): run  command "bash .dev/dsa27/call.sh"  carry
# [".dev/dsa27"]  timeout_s 150 (kind nvidia-h200; ~110 s expected, at most END = 140 s). Trees and cubins first, on the
# CPU: bash .dev/dsa27/setup.sh (base = main a96facc, arm = branch dsa27).
# Bench A/B base / arm / arm / base, each in its own process with its own cache; the summary; then the arm's DSA GPU
# tests, compute-sanitizer memcheck / racecheck / synccheck on scripts/sanitize-case dsa (the arm), and both trees'
# fingerprints, side by side. Everything packed into $OUT/dsa27.tgz.
set -o pipefail
cd .dev/dsa27
V=$PWD
export PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
W=$(mktemp -d); mkdir -p $OUT
L=$W/log.txt
END=${END:-140}
pack() { cp $V/call.sh $V/summ.py $V/trees.txt $W/ 2>/dev/null; tar czf $OUT/dsa27.tgz -C $W . ; }
trap pack EXIT
say() { echo "== [$SECONDS s] $*" | tee -a $L; }
lim() { local a=$1 b=$((END - SECONDS)); [ $b -lt $a ] && a=$b; [ $a -lt 1 ] && a=1; echo $a; }
run_in() { local d=$1; shift; (cd $V/$d && CAKE_RT_CACHE_DIR=$V/$d/.cubins PYTHONPATH=$V/$d "$@"); }
cat $V/trees.txt | tee -a $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $L
BA="--no-peers --repeats 8 --warmup 2 --budget-s 0.3 --side-stream none --rows S1,S2,C1,Z2cp,Z3cp,A1,A2,A3"
bench() {  # arm round limit
  local a=$1 r=$2 t=$3
  say "bench dsa $a (round $r)"
  run_in $a env CAKE_RT_GIT_HASH=$a timeout $(lim $t) python3 -m cake_rt bench dsa $BA --json $W/dsa_${a}_$r.json --markdown $W/dsa_${a}_$r.md > $W/bench_${a}_$r.log 2>&1; echo "rc=$?" >> $L
}
bench base 1 26; bench arm 1 20; bench arm 2 20; bench base 2 20
python3 $V/summ.py $W > $W/summary.txt 2>&1; cat $W/summary.txt >> $L
say "GPU tests and sanitize dsa (arm), both trees' fingerprints, side by side"
for a in base arm; do (run_in $a timeout $(lim 45) python3 scripts/dsa-fingerprint > $W/fp_$a.txt 2>&1; echo "fingerprint $a rc=$?" >> $L) & done
(run_in arm env OUT=$W/san timeout $(lim 75) bash scripts/sanitize dsa memcheck racecheck synccheck > $W/san.txt 2>&1; echo "sanitize arm rc=$?" >> $W/san.txt) &
run_in arm timeout $(lim 75) python3 -m pytest -q -ra -p no:cacheprovider -n 8 --dist loadfile --timeout 70 tests/dsa tests/acceptance/test_dsa_contract_gpu.py --ignore=tests/dsa/test_dsa_compile.py > $W/tests.log 2>&1; echo "tests arm rc=$?" >> $L
wait
if diff -q $W/fp_base.txt $W/fp_arm.txt > /dev/null && [ "$(grep -c ' ' $W/fp_arm.txt)" -ge 27 ]; then echo "FINGERPRINTS arm: $(grep -c ' ' $W/fp_arm.txt) EQUAL to base" | tee -a $L; else echo "FINGERPRINTS arm: DIFFER" | tee -a $L; diff $W/fp_base.txt $W/fp_arm.txt | head -20 | tee -a $L; fi
cat $W/san.txt >> $L; grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|bitwise equal\|False" $W/san/*.log >> $L 2>&1
echo "tests arm:" >> $L; grep -E "passed|failed|FAILED|ERROR|Timeout" $W/tests.log | tail -8 >> $L
say "end"
ARM=eager python3 $V/summ.py $W > $W/summary_eager.txt 2>&1
grep -E "^FINGERPRINTS|rc=|passed|failed|SUMMARY|== \[" $L | cut -c1-200 | tail -n 36
cat $W/summary_eager.txt $W/summary.txt  # the prepared rows last (output_tail keeps the end)
