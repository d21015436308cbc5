"""Compile the SSD programs the GPU tests and timings use, in parallel processes, into the on-disk
kernel cache (saves the serial NVRTC time of a test run on the device machine).
    python3 tests/ssd/prewarm_ssd.py [target]"""
import multiprocessing as mp
import sys

from cake_rt.launch.compile import compile_cubin, load_source


def variants():
    out = set()
    for xd in (0, 1, 2):
        for sd in (0, 1, 2):
            out.add((xd, xd if xd == 1 else 2, sd, 64, 64, 128, 2))
    for q in (64, 128, 256):
        out.add((0, 2, 2, 64, 128, q, 2))
    out |= {(0, 2, 2, 128, 256, 256, 2), (2, 2, 2, 128, 64, 64, 2), (1, 2, 2, 64, 256, 128, 2),
            (2, 2, 2, 128, 128, 256, 2), (2, 2, 2, 64, 128, 256, 2), (0, 2, 2, 64, 64, 256, 1),
            (0, 2, 2, 64, 128, 256, 1), (0, 2, 2, 64, 128, 128, 1), (0, 2, 2, 64, 64, 64, 2),
            (2, 2, 2, 64, 64, 128, 2), (0, 2, 2, 64, 128, 128, 2)}
    for xd in (0, 1, 2):
        for nb in (1, 2):
            out.add((xd, 2, 2, 64, 64, 64, nb))
    return sorted(out)


def build(args):
    target, v = args
    t, dtt, sd, P, N, Q, nb = v
    compile_cubin(load_source("ssd/ssd_combined.cu"), name="ssd_combined.cu", target=target,
                  defines=dict(SSD_T=t, SSD_DT=dtt, SSD_SD=sd, SSD_P=P, SSD_N=N, SSD_Q=Q, SSD_NBUF=nb))
    return v


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "sm_90a"
    vs = variants()
    with mp.Pool(min(16, len(vs))) as pool:
        for v in pool.imap_unordered(build, [(target, v) for v in vs]):
            pass
    print(f"prewarmed {len(vs)} SSD programs for {target}")
