"""The forced walk on small calls, for compute-sanitizer (the walk3 arms): chunk 128 with a ring of 2, chunk 256 with a
partial chunk, and a varlen call of headdim 128 / dstate 64 with an empty sequence; each against the exact scan."""
import os
import sys

import cupy

os.environ.setdefault("ARM", "walk3-sanitize")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ssd_h200_walk3_probe import check  # noqa: E402

base = dict(dtype="bfloat16", D=True, z=True, batch=1, headdim=64, dstate=128)
good = [
    check("bf16 1000 x 2 heads, chunk 128, ring 2", {**base, "seqlen": 1000, "nheads": 2, "ngroups": 1}, 128, 2),
    check("bf16 600 x 2 heads, chunk 256, ring 2", {**base, "seqlen": 600, "nheads": 2, "ngroups": 1}, 256, 2),
    check("bf16 varlen 500 x 2 heads, headdim 128, dstate 64, chunk 64",
          {**base, "seqlen": 500, "nheads": 2, "headdim": 128, "dstate": 64, "ngroups": 1}, 64, None,
          cu_lens=[100, 0, 157, 243]),
]
cupy.cuda.Device().synchronize()
print(f"walk3 sanitize checks: {sum(good)} of {len(good)} equal")
sys.exit(0 if all(good) else 1)
