"""Small calls of every SSD kernel, for compute-sanitizer (memcheck, racecheck, synccheck):
    compute-sanitizer --tool memcheck python3 tests/ssd/sanitize_ssd.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import cupy  # noqa: E402

from ssd_gpu_util import call, make_case, to_bytes  # noqa: E402
from cake_rt.interop import BF16, FP32  # noqa: E402

# (dtype, headdim, dstate, chunk, sequence lengths): 3 sequences x 2 heads run the double-buffered exact
# scan; 70 sequences x 2 heads (more items than SMs) the single-buffered one.
for dtype, P, N, chunk, lens in ((BF16, 64, 64, 64, [0, 70, 80]), (FP32, 64, 64, 128, [0, 70, 80]),
                                 (BF16, 64, 64, 64, [3, 70] * 35)):
    case = make_case(1, 1, sum(lens), 2, P, N, 1, dtype, cu_lens=lens, D="hp")
    a = call(case, chunk, "exact", final=True, varlen=True, chunks=True)
    b = call(case, chunk, "chunkpar", final=True, varlen=True, chunks=True)
    cupy.cuda.Device().synchronize()
    print(dtype, "bitwise equal:", all(to_bytes(u) == to_bytes(v) for u, v in zip(a, b)))
