"""Small calls of every SSD kernel, for compute-sanitizer (memcheck, racecheck, synccheck):
    compute-sanitizer --tool memcheck python3 tests/ssd/sanitize_ssd.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import cupy  # noqa: E402

from ssd_gpu_util import call, make_case, to_bytes  # noqa: E402
from cake_rt.interop import BF16, FP32  # noqa: E402

# (dtype, heads, groups, headdim, dstate, chunk, sequence lengths): two units per CTA (bf16, 4 heads in one
# group) and one (fp32, one head per group), partial and empty sequences, chunks of 1-3 sub-blocks.
for dtype, H, G, P, N, chunk, lens in ((BF16, 4, 1, 64, 64, 128, [0, 70, 150]), (FP32, 2, 2, 64, 64, 128, [0, 70, 80]),
                                       (BF16, 2, 1, 128, 128, 64, [3, 70])):
    case = make_case(1, 1, sum(lens), H, P, N, G, dtype, cu_lens=lens, D="hp")
    a = call(case, chunk, "exact", final=True, varlen=True, chunks=True)
    b = call(case, chunk, "chunkpar", final=True, varlen=True, chunks=True)
    cupy.cuda.Device().synchronize()
    print(dtype, "bitwise equal:", all(to_bytes(u) == to_bytes(v) for u, v in zip(a, b)))
