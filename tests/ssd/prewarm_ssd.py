"""Compile the SSD programs the GPU tests and timings use (``cake_rt.ops.ssd.programs``), in parallel
processes, into the on-disk kernel cache (saves the serial NVRTC time of a test run on the device machine).
    python3 tests/ssd/prewarm_ssd.py [target] [processes]"""
import multiprocessing as mp
import sys

from cake_rt.launch.compile import compile_cubin, load_source
from cake_rt.ops.ssd import programs


def build(args):
    target, path, defs = args
    compile_cubin(load_source(path), name=path.rsplit("/", 1)[-1], target=target, defines=defs)
    return defs


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "sm_90a"
    nproc = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    progs = programs(target)
    with mp.Pool(min(nproc, len(progs))) as pool:
        for _ in pool.imap_unordered(build, [(target, p, d) for p, d in progs]):
            pass
    print(f"prewarmed {len(progs)} SSD programs for {target}")
