# ssd40: stage the device call on the CPU machine (no GPU), from the checked-out tree and this folder's arm diffs, with
# the arms' sm_90a cubins compiled here (`jobs` 2; a cubin already in SEED_CACHE, default /tmp/ssd40cache, or
# ~/.cache/cake-rt is copied): base and a the bench rows' and the fingerprint's programs, b every SSD program and the
# two programs ssd-exact-trace runs:
#   bash bench/results/ssd_cpu_ssd40_prepare.sh
# then: run command "bash .dev/ssd40/call.sh", carry [".dev/ssd40"] (~17 MB), timeout_s 170, kind nvidia-h200.
# Arms under .dev/ssd40/ (without bench/results and docs; tests on b only, where they run):
#   base  the tree without ssd_cpu_ssd40_b.diff (the tree as checked out, or, where the diff is already in it, the
#         tree with the diff reversed)
#   a     base + ssd_cpu_ssd40_a.diff (the exact scan's maps prefetched, chunk 0's first row block ahead of its prep)
#   b     base + ssd_cpu_ssd40_b.diff (a, and the chunk-local state fused into the last row block; the trace scripts)
set -e
R=$(git rev-parse --show-toplevel); D=$R/.dev/ssd40; P=$(cd "$(dirname "$0")" && pwd)  # R: the tree run from
[ -f /work/venv/bin/activate ] && source /work/venv/bin/activate
ref=$(git -C $R rev-parse --short HEAD)
for a in base a b; do
  mkdir -p $D/$a
  find $D/$a -mindepth 1 -maxdepth 1 ! -name .cubins -exec rm -rf {} +
  ex=(':(exclude)bench/results' ':(exclude)docs')
  [ $a = b ] || ex+=(':(exclude)tests')
  git -C $R archive HEAD -- . "${ex[@]}" | tar -x -C $D/$a
done
if patch -p1 --dry-run -s -d $D/b < $P/ssd_cpu_ssd40_b.diff > /dev/null 2>&1; then
  patch -p1 -s -d $D/b < $P/ssd_cpu_ssd40_b.diff
  echo "base <- $ref" > $D/base/.ref
else  # the diff is in the tree already: the base is the tree without it
  patch -p1 -R -s -d $D/base < $P/ssd_cpu_ssd40_b.diff
  patch -p1 -R -s -d $D/a < $P/ssd_cpu_ssd40_b.diff
  echo "base <- $ref - ssd_cpu_ssd40_b.diff" > $D/base/.ref
fi
patch -p1 -s -d $D/a < $P/ssd_cpu_ssd40_a.diff
echo "a <- base + ssd_cpu_ssd40_a.diff" > $D/a/.ref
echo "b <- base + ssd_cpu_ssd40_b.diff" > $D/b/.ref
cp $P/ssd_cpu_ssd40_call.sh $D/call.sh
for a in base a b; do
  o=; [ $a = b ] && o="--all --trace"
  (cd $D/$a && PYTHONPATH=$D/$a CAKE_RT_CACHE_DIR=$D/$a/.cubins CAKE_RT_QUIET=1 python $P/ssd_cpu_ssd40_warm.py $D/$a $o)
done
du -sh $D
