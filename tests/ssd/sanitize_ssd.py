"""Small calls of every SSD kernel, for compute-sanitizer (memcheck, racecheck, synccheck):
    compute-sanitizer --tool memcheck python3 tests/ssd/sanitize_ssd.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import cupy  # noqa: E402

from ssd_gpu_util import call, make_case, to_bytes  # noqa: E402
from cake_rt.interop import BF16, FP32  # noqa: E402

for dtype, P, N, chunk in ((BF16, 64, 64, 64), (FP32, 64, 64, 128)):
    case = make_case(1, 1, 150, 2, P, N, 1, dtype, cu_lens=[0, 70, 80], D="hp")
    a = call(case, chunk, "exact", final=True, varlen=True, chunks=True)
    b = call(case, chunk, "chunkpar", final=True, varlen=True, chunks=True)
    cupy.cuda.Device().synchronize()
    print(dtype, "bitwise equal:", all(to_bytes(u) == to_bytes(v) for u, v in zip(a, b)))
