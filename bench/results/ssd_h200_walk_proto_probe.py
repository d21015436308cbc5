"""The walk schedule (SSD_WALK) probe: bitwise checks against the exact scan, then timings of exact / three-phase /
walk on suite rows. WALK=1 patches the planner so that one-slice chunk-parallel plans of few items run the walk."""
import os, sys, time
import numpy as np
sys.path.insert(0, os.path.join(os.environ["MAIN"], "scripts"))
import cupy
import cake_rt
from cake_rt.bench import cases
from cake_rt.bench.timing import L2Flusher
from cake_rt.launch.arch import device_info
from cake_rt.ops import ssd as ops
from ssd_trace import suite_params

WALK = os.environ.get("WALK") == "1"
_orig = ops._plan_uncached
def _patched(c, family):
    plan = _orig(c, family)
    if WALK and plan.family == "chunkpar":
        units = c.nheads * (c.headdim // 64)
        d = plan.defines
        if (plan.slice_units == units and d["SSD_ROWS"] == 1 and d["SSD_HB"] == 1 and d["SSD_WG"]
                and c.nseg * units < plan.grid and c.dstate <= 128):
            fit = min(64, c.total_chunks * units // (c.nseg * units))
            ring = int(os.environ.get("RING") or 1 << (fit.bit_length() - 1))
            plan.defines = {**d, "SSD_WALK": 1, "SSD_WALK_RING": ring}
            plan.reason += " [walk]"
    return plan
ops._plan_uncached = _patched

def call(inp, chunk, family, **kw):
    cu = None if inp.get("cu_seqlens") is None else cupy.asnumpy(inp["cu_seqlens"])
    return cake_rt.ssd_combined(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], chunk, D=inp["D"], z=inp["z"],
                                dt_bias=inp["dt_bias"], cu_seqlens=cu, dt_softplus=True, family=family, **kw)

def same(a, b):
    return all(cupy.asnumpy(x).tobytes() == cupy.asnumpy(y).tobytes() for x, y in zip(a, b))

def check(name, p, chunk, **kw):
    inp = cases.ssd_inputs(p, 77)
    ex = call(inp, chunk, "exact", **kw)
    cp = call(inp, chunk, "chunkpar", **kw)
    plan = ops.last_plan()
    cp2 = call(inp, chunk, "chunkpar", **kw)
    ok = same(ex, cp) and same(cp, cp2)
    print(f"check {name}: {'EQUAL' if ok else 'DIFFER'} ({plan.reason[-40:]}; defines walk={plan.defines.get('SSD_WALK', 0)})", flush=True)
    if not ok:
        for i, (x, y) in enumerate(zip(ex, cp)):
            d = cupy.asnumpy(x).astype(np.float64) - cupy.asnumpy(y).astype(np.float64)
            print(f"   out {i}: max abs diff {np.abs(d).max():.3e}, differing {np.count_nonzero(d)} of {d.size}")
    return ok

base = dict(dtype="bfloat16", D=True, z=True)
rs = np.random.default_rng(5)
if os.environ.get("CHECKS", "1") == "1":
    check("1x9000 H8 G2 chunk128 init ckpt", {**base, "batch": 1, "seqlen": 9000, "nheads": 8, "headdim": 64, "dstate": 128, "ngroups": 2},
          128, return_final_states=True, return_chunk_states=True,
          initial_states=cupy.asarray(rs.standard_normal((1, 8, 64, 128)).astype(np.float32)))
    inp_p = {**base, "batch": 1, "seqlen": 3000, "nheads": 6, "headdim": 128, "dstate": 64, "ngroups": 3, "cu_seqlens_lengths": [100, 0, 1157, 1743]}
    # varlen with initial states per sequence
    inp = cases.ssd_inputs({**inp_p}, 78)
    cu = np.array([0, 100, 100, 1257, 3000], np.int32)
    inp["cu_seqlens"] = cupy.asarray(cu)
    init = cupy.asarray(rs.standard_normal((4, 6, 128, 64)).astype(np.float32))
    r = []
    for fam in ("exact", "chunkpar", "chunkpar"):
        r.append(call(inp, 64, fam, initial_states=init, return_final_states=True, return_varlen_states=True, return_chunk_states=True))
        if fam == "chunkpar": plan = ops.last_plan()
    ok = same(r[0], r[1]) and same(r[1], r[2])
    print(f"check varlen 4 seqs (one empty) H6 P128 N64 chunk64 init: {'EQUAL' if ok else 'DIFFER'} (walk={plan.defines.get('SSD_WALK', 0)}, grid {plan.grid})", flush=True)
    for row in ("nemotron-h", "m2-2.7b", "short"):
        p = suite_params(row)
        check(row, p, int(p["chunk"]), return_final_states=True)

st = cupy.cuda.Stream(non_blocking=True)
flush = L2Flusher(device_info(0).l2_bytes)
for row in os.environ.get("ROWS", "nemotron-h,m2-2.7b").split(","):
    p = suite_params(row)
    inp = cases.ssd_inputs(p, 1234)
    y = cupy.empty_like(inp["x"])
    for fam in os.environ.get("FAMS", "exact,chunkpar").split(","):
        f = lambda: call(inp, int(p["chunk"]), fam, return_final_states=True, out=y, stream=st)
        f(); st.synchronize()
        plan = ops.last_plan()
        ts = []
        for i in range(12):
            flush(st)
            e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
            e0.record(st); f(); e1.record(st); e1.synchronize()
            ts.append(cupy.cuda.get_elapsed_time(e0, e1) * 1000.0)
        ts.sort()
        tag = fam + ("+walk" if plan.defines.get("SSD_WALK") else "")
        print(f"time {os.environ.get('ARM','?')} {row:11s} {tag:14s} median {ts[6]:8.1f} us (min {ts[0]:.1f}, max {ts[-1]:.1f}) grid {plan.grid} slices {-(-p['nheads']//plan.slice_units) if plan.slice_units else '-'}", flush=True)
