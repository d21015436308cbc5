"""The walk schedule under compute-sanitizer: a small call forced onto it (a ring of 8 chunks and of 2), its y and
states compared bit for bit with the exact scan."""
import sys
import numpy as np
import cupy
import cake_rt
from cake_rt.ops import ssd as ops
sys.path.insert(0, "tests/ssd")
from ssd_gpu_util import make_case, to_bytes
from cake_rt.interop import BF16

case = make_case(91, 1, 1000, 4, 64, 128, 1, BF16)
d = case["dev"]
def run(family):
    r = cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], 128, **case["dev_kw"], return_final_states=True,
                             return_chunk_states=True, family=family)
    return [to_bytes(a) for a in r]
ref = run("exact")
ops._SCHEDULE = "walk"
for ring in (None, 2):
    ops._WALK_RING = ring
    got = run("chunkpar")
    plan = ops.last_plan()
    assert plan.defines.get("SSD_WALK") == 1, plan
    print(f"walk ring {plan.walk_ring}: {'EQUAL' if got == ref else 'DIFFER'}", flush=True)
    assert got == ref
