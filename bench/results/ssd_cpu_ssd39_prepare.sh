# ssd39: stage the device call on the CPU machine (no GPU), from the checked-out tree (main) and this folder's kernel
# diff, with both arms' sm_90a cubins compiled here (every SSD program and the selftest's; `jobs` 2; a cubin already in
# SEED_CACHE, default /tmp/ssd39cache, or ~/.cache/cake-rt is copied instead):
#   bash bench/results/ssd_cpu_ssd39_prepare.sh
# then: run command "bash .dev/ssd39/call.sh", carry [".dev/ssd39"] (~25 MB), timeout_s 170, kind nvidia-h200.
# Arms under .dev/ssd39/ (without bench/results and docs; base without tests, which run on the arm only):
#   base  the tree as checked out
#   arm   + ssd_cpu_ssd39_kernel.diff (the exact scan's chunk prep computed by the producer a chunk ahead)
set -e
R=$(git rev-parse --show-toplevel); D=$R/.dev/ssd39; P=$(cd "$(dirname "$0")" && pwd)  # R: the tree run from
[ -f /work/venv/bin/activate ] && source /work/venv/bin/activate
ref=$(git -C $R rev-parse --short HEAD)
for a in base arm; do
  mkdir -p $D/$a
  find $D/$a -mindepth 1 -maxdepth 1 ! -name .cubins -exec rm -rf {} +
  ex=(':(exclude)bench/results' ':(exclude)docs')
  [ $a = arm ] || ex+=(':(exclude)tests')
  git -C $R archive HEAD -- . "${ex[@]}" | tar -x -C $D/$a
done
patch -p1 -d $D/arm < $P/ssd_cpu_ssd39_kernel.diff
echo "base <- $ref" > $D/base/.ref
echo "arm <- $ref + ssd_cpu_ssd39_kernel.diff" > $D/arm/.ref
cp $P/ssd_cpu_ssd39_call.sh $D/call.sh
for a in base arm; do
  (cd $D/$a && PYTHONPATH=$D/$a CAKE_RT_CACHE_DIR=$D/$a/.cubins CAKE_RT_QUIET=1 python $P/ssd_cpu_ssd39_warm.py $D/$a)
done
du -sh $D
