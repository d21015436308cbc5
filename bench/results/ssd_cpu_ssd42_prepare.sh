# ssd42: stage the device call on the CPU machine (no GPU), from the checked-out tree and this folder's diff, with the
# arms' sm_90a cubins compiled here (`jobs` 2; a cubin already in SEED_CACHE, default /tmp/ssd42cache, or
# ~/.cache/cake-rt is copied): base the bench rows' and the fingerprint's programs, arm every SSD program (its GPU
# tests and sanitizers run on the device):
#   bash bench/results/ssd_cpu_ssd42_prepare.sh          (D=<folder> to stage elsewhere than <tree>/.dev/ssd42)
# then: run command "bash .dev/ssd42/call.sh", carry [".dev/ssd42"] (~15 MB), timeout_s 150, kind nvidia-h200.
# Arms under .dev/ssd42/ (without bench/results and docs; tests on arm only, where they run):
#   base  the tree without ssd_cpu_ssd42_a.diff (the tree as checked out, or, where the diff is already in it, the
#         tree with the diff reversed)
#   arm   base + ssd_cpu_ssd42_a.diff (branch ssd42: SSD_PREP_AHEAD, the unsplit chunk-256 chunk-parallel sm_90a programs'
#         phase-1 prep in the producer an item ahead, a slice's first item's on the math warpgroup)
set -e
R=$(git rev-parse --show-toplevel); D=${D:-$R/.dev/ssd42}; P=$(cd "$(dirname "$0")" && pwd)  # R: the tree run from
[ -f /work/venv/bin/activate ] && source /work/venv/bin/activate
ref=$(git -C $R rev-parse --short HEAD)
for a in base arm; do
  mkdir -p $D/$a
  find $D/$a -mindepth 1 -maxdepth 1 ! -name .cubins -exec rm -rf {} +
  ex=(':(exclude)bench/results' ':(exclude)docs')
  [ $a = arm ] || ex+=(':(exclude)tests')
  git -C $R archive HEAD -- . "${ex[@]}" | tar -x -C $D/$a
done
if patch -p1 --dry-run -s -d $D/arm < $P/ssd_cpu_ssd42_a.diff > /dev/null 2>&1; then
  patch -p1 -s -d $D/arm < $P/ssd_cpu_ssd42_a.diff
  echo "base <- $ref" > $D/base/.ref
else  # the diff is in the tree already: the base is the tree without it
  patch -p1 -R -s -d $D/base < $P/ssd_cpu_ssd42_a.diff
  echo "base <- $ref - ssd_cpu_ssd42_a.diff" > $D/base/.ref
fi
echo "arm <- base + ssd_cpu_ssd42_a.diff" > $D/arm/.ref
cp $P/ssd_cpu_ssd42_call.sh $D/call.sh
cp $P/ssd_cpu_ssd42_case.py $D/case.py
for a in base arm; do
  o=; [ $a = arm ] && o="--all"
  (cd $D/$a && PYTHONPATH=$D/$a CAKE_RT_CACHE_DIR=$D/$a/.cubins CAKE_RT_QUIET=1 python $P/ssd_cpu_ssd42_warm.py $D/$a $o)
done
du -sh $D
