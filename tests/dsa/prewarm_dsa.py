"""Compile the DSA programs the GPU tests and the bench use (``cake_rt.ops.dsa.programs``), in parallel
processes, into the on-disk kernel cache (saves the serial NVRTC time of a run on a fresh device machine).
No GPU needed.

    python3 tests/dsa/prewarm_dsa.py [target]     # default sm_90a
"""
import multiprocessing as mp
import pathlib
import sys

from cake_rt.launch.compile import compile_cubin, load_source
from cake_rt.ops import dsa


def build(args):
    target, path, defines = args
    compile_cubin(load_source(path), name=pathlib.Path(path).name, target=target, defines=defines)
    return 1


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "sm_90a"
    jobs = [(target, path, d) for path, d in dsa.programs(target)]
    with mp.Pool(min(int(sys.argv[2]) if len(sys.argv) > 2 else 16, len(jobs))) as pool:
        n = sum(pool.imap_unordered(build, jobs))
    print(f"prewarmed {n} DSA programs for {target}")
