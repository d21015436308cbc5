# ssd41: stage the device call on the CPU machine (no GPU), from the checked-out tree and this folder's arm diffs, with
# the arms' sm_90a cubins compiled here (`jobs` 2; a cubin already in SEED_CACHE, default /tmp/ssd41cache, or
# ~/.cache/cake-rt is copied): base and b the bench rows' and the fingerprint's programs, a every SSD program (its GPU
# tests and sanitizers run on the device):
#   bash bench/results/ssd_cpu_ssd41_prepare.sh          (D=<folder> to stage elsewhere than <tree>/.dev/ssd41)
# then: run command "bash .dev/ssd41/call.sh", carry [".dev/ssd41"] (~20 MB), timeout_s 170, kind nvidia-h200.
# Arms under .dev/ssd41/ (without bench/results and docs; tests on a only, where they run):
#   base  the tree without ssd_cpu_ssd41_a.diff (the tree as checked out, or, where the diff is already in it, the
#         tree with the diff reversed)
#   a     base + ssd_cpu_ssd41_a.diff (branch ssd41: the chunk-parallel phase 1's prep in the producer, an item ahead;
#         phase 3's saved prep copied into the prep sets; a slice's first item's prep before its loads)
#   b     a + ssd_cpu_ssd41_b.diff (a slice's first item's prep after its first B / X loads instead; over the compile
#         test's spill ceiling in one test-only program, so measured, not for merging as is)
set -e
R=$(git rev-parse --show-toplevel); D=${D:-$R/.dev/ssd41}; P=$(cd "$(dirname "$0")" && pwd)  # R: the tree run from
[ -f /work/venv/bin/activate ] && source /work/venv/bin/activate
ref=$(git -C $R rev-parse --short HEAD)
for a in base a b; do
  mkdir -p $D/$a
  find $D/$a -mindepth 1 -maxdepth 1 ! -name .cubins -exec rm -rf {} +
  ex=(':(exclude)bench/results' ':(exclude)docs')
  [ $a = a ] || ex+=(':(exclude)tests')
  git -C $R archive HEAD -- . "${ex[@]}" | tar -x -C $D/$a
done
if patch -p1 --dry-run -s -d $D/a < $P/ssd_cpu_ssd41_a.diff > /dev/null 2>&1; then
  patch -p1 -s -d $D/a < $P/ssd_cpu_ssd41_a.diff
  patch -p1 -s -d $D/b < $P/ssd_cpu_ssd41_a.diff
  echo "base <- $ref" > $D/base/.ref
else  # the diff is in the tree already: the base is the tree without it
  patch -p1 -R -s -d $D/base < $P/ssd_cpu_ssd41_a.diff
  echo "base <- $ref - ssd_cpu_ssd41_a.diff" > $D/base/.ref
fi
patch -p1 -s -d $D/b < $P/ssd_cpu_ssd41_b.diff
echo "a <- base + ssd_cpu_ssd41_a.diff" > $D/a/.ref
echo "b <- base + ssd_cpu_ssd41_a.diff + ssd_cpu_ssd41_b.diff" > $D/b/.ref
cp $P/ssd_cpu_ssd41_call.sh $D/call.sh
for a in base a b; do
  o=; [ $a = a ] && o="--all"
  (cd $D/$a && PYTHONPATH=$D/$a CAKE_RT_CACHE_DIR=$D/$a/.cubins CAKE_RT_QUIET=1 python $P/ssd_cpu_ssd41_warm.py $D/$a $o)
done
du -sh $D
