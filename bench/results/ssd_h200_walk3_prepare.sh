#!/bin/bash
# CPU (from the repository root, NVRTC 13.0 in $PY's environment): stages .dev/w15 for ssd_h200_walk3_call.sh.
#   .dev/w15/main  this checkout's HEAD (git archive, without bench/results and docs)
#   .dev/w15/arm   the same + bench/results/ssd_cpu_walk3_arm.diff (the walk at three chains an SM)
#   .dev/w15/armc  the same + bench/results/ssd_cpu_walk3c_arm.diff (one copy of the tile code: the walker lowers its
#                  registers to the tiles' after its walk)
#   .dev/w15/armd  the same + bench/results/ssd_cpu_walk3d_arm.diff (arm c with the chunk-256 tiles' chain step in
#                  column halves: no wgmma serialized; every other program as arm c's)
# each with its cubins (.cubins) of the probe's and the walk tests' programs: bf16 and fp16 at dstate 128 / headdim 64,
# bf16 at dstate 64 / headdim 128 (27 programs a tree, ~5 MiB), and the probe and sanitizer scripts beside them.
# Then: run command "bash bench/results/ssd_h200_walk3_call.sh", carry [".dev/w15"], timeout_s 600.
set -e
PY=${PY:-python3}
R=$PWD; W=$R/.dev/w15
rm -rf "$W"; mkdir -p "$W/main" "$W/arm" "$W/armc" "$W/armd"
for t in main arm armc armd; do
  git archive HEAD -- . ':(exclude)bench/results' ':(exclude)docs' | tar -x -C "$W/$t"
done
git apply --directory=.dev/w15/arm bench/results/ssd_cpu_walk3_arm.diff
git apply --directory=.dev/w15/armc bench/results/ssd_cpu_walk3c_arm.diff
git apply --directory=.dev/w15/armd bench/results/ssd_cpu_walk3d_arm.diff
cp bench/results/ssd_h200_walk3_probe.py bench/results/ssd_h200_walk3_sanitize.py "$W/"
for t in main arm armc armd; do
  (cd "$W/$t" && CAKE_RT_CACHE_DIR="$W/$t/.cubins" PYTHONPATH="$W/$t" $PY -c "
from cake_rt.warmup import warmup, parse_shapes
for sh in ('dtype=bfloat16,dstate=128,headdim=64', 'dtype=float16,dstate=128,headdim=64',
           'dtype=bfloat16,dstate=64,headdim=128'):
    print('$t', sh, warmup(('ssd',), 'sm_90a', jobs=2, shapes=parse_shapes([sh]), every=False))
")
done
du -sh "$W"
