"""Compile the DSA programs the GPU tests and timings use, in parallel processes, into the on-disk kernel
cache (saves the serial NVRTC time of a test run on a fresh device machine). No GPU needed.

    python3 tests/dsa/prewarm_dsa.py [target] [smem_optin]     # default sm_90a 232448 (H100/H200)
"""
import multiprocessing as mp
import sys

from cake_rt.launch.compile import compile_cubin, load_source
from cake_rt.ops import dsa

# topk values of tests/dsa/test_dsa_gpu.py and bench_dsa.py (a program depends on topk only through its
# candidate capacities, so nearby values share programs).
TOPKS = (1, 8, 16, 32, 37, 40, 50, 64, 100, 128, 256, 300, 512, 700, 1500, 2048, 3000)


def programs(target, smem):
    seen = {}
    for H in (32, 64):
        for D in (64, 128):
            for topk in TOPKS:
                for tgt in {None, target}:  # the mma.sync program and (sm_90a) the wgmma one
                    for fast in (False, True):
                        cfg = dsa.select_config(H, D, topk, smem, tgt, fast=fast)
                        seen[tuple(sorted(cfg.defines.items()))] = cfg.defines
    for H in (32, 64):  # bench_dsa.py --profile (per-phase cycle counters), both variants
        for fast in (False, True):
            d = dict(dsa.select_config(H, 128, 2048, smem, target, fast=fast).defines, DSA_PROFILE=1)
            seen[tuple(sorted(d.items()))] = d
    return list(seen.values())


def build(args):
    target, defines = args
    compile_cubin(load_source(dsa.KERNEL_PATH), name="indexer.cu", target=target, defines=defines)
    return 1


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "sm_90a"
    smem = int(sys.argv[2]) if len(sys.argv) > 2 else 232448
    progs = programs(target, smem)
    compile_cubin(load_source("dsa/spin.cu"), name="spin.cu", target=target)
    with mp.Pool(min(16, len(progs))) as pool:
        n = sum(pool.imap_unordered(build, [(target, d) for d in progs]))
    print(f"prewarmed {n} DSA programs for {target}")
