"""The walk at three chains an SM (branch walk3, bench/results/ssd_cpu_walk3_arm.diff, and arm c) against main: bitwise
checks of the forced walk against the exact scan (CHECKS=1), then GPU times of suite rows (ROWS) with each tree's plan
(the bench's suite call, `scripts/ssd_trace.suite_call`, timed by the bench's Timer: cold L2, 16 samples).

Run from a tree's root with PYTHONPATH and CAKE_RT_CACHE_DIR set to that tree's; ARM names it in the output:
    ARM=walk3 CHECKS=1 ROWS=nemotron-h,m2-2.7b,seed python3 ssd_h200_walk3_probe.py
ssd_h200_walk3_sanitize.py imports `check` from here.
"""
import hashlib
import os
import pathlib
import sys

import cupy
import numpy as np

import cake_rt
from cake_rt.bench import cases
from cake_rt.bench.timing import Timer
from cake_rt.launch.arch import device_info
from cake_rt.ops import ssd as ops

ARM = os.environ.get("ARM", "?")


def call(inp, chunk, family="auto", **kw):
    cu = None if inp.get("cu_seqlens") is None else cupy.asnumpy(inp["cu_seqlens"])
    return cake_rt.ssd_combined(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], chunk, D=inp["D"], z=inp["z"],
                                dt_bias=inp["dt_bias"], cu_seqlens=cu, dt_softplus=True, family=family, **kw)


def digest(outs):
    h = hashlib.sha1()
    for o in (outs if isinstance(outs, (tuple, list)) else (outs,)):
        h.update(cupy.asnumpy(o).tobytes())
    return h.hexdigest()[:12]


def check(name, p, chunk, ring, cu_lens=None, seed=77):
    """The forced walk (ring slots an item; None: the plan's) twice against the exact scan, every output bitwise."""
    rs = np.random.default_rng(seed)
    inp = cases.ssd_inputs(p, seed)
    if cu_lens is not None:
        inp["cu_seqlens"] = cupy.asarray(np.concatenate([[0], np.cumsum(cu_lens)]).astype(np.int32))
    kw = dict(return_final_states=True, return_chunk_states=True)
    if cu_lens is None:  # (initial states, or the varlen states of sequences)
        kw["initial_states"] = cupy.asarray(rs.standard_normal((1, p["nheads"], p["headdim"], p["dstate"]))
                                            .astype(np.float32))
    else:
        kw["return_varlen_states"] = True
    ex = digest(call(inp, chunk, "exact", **kw))
    ops._SCHEDULE, ops._WALK_RING = "walk", ring
    try:
        w1 = digest(call(inp, chunk, "chunkpar", **kw))
        plan = ops.last_plan()
        w2 = digest(call(inp, chunk, "chunkpar", **kw))
    finally:
        ops._SCHEDULE, ops._WALK_RING = None, None
    ok = ex == w1 == w2 and bool(plan.defines.get("SSD_WALK"))
    print(f"check {ARM} {name}: {'EQUAL' if ok else 'DIFFER'} exact {ex} walk {w1} {w2} (ring {plan.walk_ring}, "
          f"grid {plan.grid})", flush=True)
    return ok


def run_checks():
    base = dict(dtype="bfloat16", D=True, z=True, batch=1, headdim=64, dstate=128)
    good = [
        check("bf16 9000 x 8 heads, chunk 128, ring 2", {**base, "seqlen": 9000, "nheads": 8, "ngroups": 2}, 128, 2),
        check("bf16 9000 x 8 heads, chunk 128", {**base, "seqlen": 9000, "nheads": 8, "ngroups": 2}, 128, None),
        check("fp16 9000 x 8 heads, chunk 128, ring 3", {**base, "dtype": "float16", "seqlen": 9000, "nheads": 8,
                                                         "ngroups": 2}, 128, 3),
        check("bf16 4100 x 4 heads, chunk 256, ring 2 (a partial chunk)",
              {**base, "seqlen": 4100, "nheads": 4, "ngroups": 1}, 256, 2),
        check("bf16 varlen 3000 x 6 heads, headdim 128, dstate 64, chunk 64 (an empty sequence)",
              {**base, "seqlen": 3000, "nheads": 6, "headdim": 128, "dstate": 64, "ngroups": 3}, 64, None,
              cu_lens=[100, 0, 1157, 1743]),
    ]
    print(f"checks {ARM}: {sum(good)} of {len(good)} equal", flush=True)


def run_times(rows):
    sys.path.insert(0, str(pathlib.Path(cake_rt.__file__).resolve().parents[1] / "scripts"))
    from ssd_trace import suite_call

    st = cupy.cuda.Stream(non_blocking=True)
    timer = Timer(st, repeats=16, warmup=1, l2_bytes=device_info(0).l2_bytes, min_repeats=16)
    for row in rows:
        _, f = suite_call(row, st)
        h = digest(f())
        st.synchronize()
        plan = ops.last_plan()
        t = timer.time(f, wall=False)
        sched = f"+walk{plan.walk_ring} grid {plan.grid}" if plan.walk_ring else f" grid {plan.grid}"
        print(f"time {ARM:6s} {row:11s} {plan.family}{sched} median {t['median'] * 1e3:8.1f} us (min "
              f"{t['min'] * 1e3:.1f}, max {t['max'] * 1e3:.1f}) hash {h}", flush=True)


if __name__ == "__main__":
    if os.environ.get("CHECKS", "1") == "1":
        run_checks()
    run_times([r for r in os.environ.get("ROWS", "nemotron-h,m2-2.7b").split(",") if r])
