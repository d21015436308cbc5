# ssd38: stage the device call on the CPU machine (no GPU), from the checked-out tree (main) and this folder's kernel
# diffs, with every arm's sm_90a cubins compiled here (~86 NVRTC programs an arm; `jobs` 2):
#   bash bench/results/ssd_cpu_ssd38_prepare.sh
# then: run command "bash .dev/ssd38/call.sh", carry [".dev/ssd38"] (~33 MB), timeout_s 140, kind nvidia-h200.
# Arms under .dev/ssd38/ (without bench/results and docs; base and a without tests, which run on ab only):
#   base  the tree as checked out
#   a     + ssd_cpu_ssd38_kernel_a.diff (the chunk-parallel producer prefetches its four tensor-map descriptors)
#   ab    + ssd_cpu_ssd38_kernel_b.diff (the chunk prep's group-total prefix from totals loaded at once, same bits)
set -e
R=$(git rev-parse --show-toplevel); D=$R/.dev/ssd38; P=$(cd "$(dirname "$0")" && pwd)  # R: the tree run from
[ -f /work/venv/bin/activate ] && source /work/venv/bin/activate
ref=$(git -C $R rev-parse --short HEAD)
for a in base a ab; do
  mkdir -p $D/$a
  find $D/$a -mindepth 1 -maxdepth 1 ! -name .cubins -exec rm -rf {} +
  ex=(':(exclude)bench/results' ':(exclude)docs')
  [ $a = ab ] || ex+=(':(exclude)tests')
  git -C $R archive HEAD -- . "${ex[@]}" | tar -x -C $D/$a
done
patch -p1 -d $D/a < $P/ssd_cpu_ssd38_kernel_a.diff
patch -p1 -d $D/ab < $P/ssd_cpu_ssd38_kernel_a.diff
patch -p1 -d $D/ab < $P/ssd_cpu_ssd38_kernel_b.diff
echo "base <- $ref" > $D/base/.ref
echo "a <- $ref + ssd_cpu_ssd38_kernel_a.diff" > $D/a/.ref
echo "ab <- $ref + ssd_cpu_ssd38_kernel_a.diff + ssd_cpu_ssd38_kernel_b.diff" > $D/ab/.ref
cp $P/ssd_cpu_ssd38_call.sh $D/call.sh
for a in base a ab; do
  (cd $D/$a && PYTHONPATH=$D/$a CAKE_RT_CACHE_DIR=$D/$a/.cubins CAKE_RT_QUIET=1 python $P/ssd_cpu_ssd38_warm.py $D/$a)
done
du -sh $D
