"""Walk schedule arms probe (twenty-ninth session): bitwise checks (ring 2 vs the exact scan), hashes and cold-L2
timings of nemotron-h and m2-2.7b on the walk; TRACE=1 reads the trace arm's stamps."""
import hashlib, os, sys
import numpy as np
sys.path.insert(0, os.path.join(os.environ["MAIN"], "scripts"))
import cupy
import cake_rt
from cake_rt.bench import cases
from cake_rt.bench.timing import L2Flusher
from cake_rt.launch.arch import device_info
from cake_rt.launch.compile import get_kernel
from cake_rt.ops import ssd as ops
from ssd_trace import suite_params, global_array

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

if os.environ.get("CHECKS", "1") == "1":
    rs = np.random.default_rng(5)
    p = dict(dtype="bfloat16", D=True, z=True, batch=1, seqlen=9000, nheads=8, headdim=64, dstate=128, ngroups=2)
    inp = cases.ssd_inputs(p, 77)
    kw = dict(return_final_states=True, return_chunk_states=True,
              initial_states=cupy.asarray(rs.standard_normal((1, 8, 64, 128)).astype(np.float32)))
    ex = digest(call(inp, 128, "exact", **kw))
    ops._SCHEDULE, ops._WALK_RING = "walk", 2
    w1 = digest(call(inp, 128, "chunkpar", **kw)); plan = ops.last_plan()
    w2 = digest(call(inp, 128, "chunkpar", **kw))
    ops._SCHEDULE, ops._WALK_RING = None, None
    print(f"check {ARM} ring2 1x9000: {'EQUAL' if ex == w1 == w2 else 'DIFFER'} exact {ex} walk {w1} {w2} (ring {plan.walk_ring})", flush=True)

st = cupy.cuda.Stream(non_blocking=True)
flush = L2Flusher(device_info(0).l2_bytes)
for row in os.environ.get("ROWS", "nemotron-h,m2-2.7b").split(","):
    p = suite_params(row)
    inp = cases.ssd_inputs(p, 1234)
    y = cupy.empty_like(inp["x"])
    f = lambda: call(inp, int(p["chunk"]), out=y, stream=st, return_final_states=True)
    outs = f(); st.synchronize()
    h = digest(outs)
    plan = ops.last_plan()
    ts = []
    for i in range(12):
        flush(st)
        e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
        e0.record(st); f(); e1.record(st); e1.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(e0, e1) * 1000.0)
    ts.sort()
    print(f"time {ARM:6s} {row:11s} {plan.family}{'+walk' + str(plan.walk_ring) if plan.walk_ring else ''} median {ts[6]:8.1f} us (min {ts[0]:.1f}, max {ts[-1]:.1f}) hash {h}", flush=True)
    if os.environ.get("TRACE") == "1" and plan.walk_ring:
        kern = get_kernel(ops.KERNEL_PATH, "ssd_chunkpar", defines=plan.defines, device=0)
        wt = global_array(kern, "walk_tr", 264 * 160 * 12, cupy.uint64)
        tt = global_array(kern, "tile_tr", 264 * 8, cupy.uint64)
        for rep in range(2):
            wt.fill(0); tt.fill(0); flush(st); f(); st.synchronize()
            W = wt.get().reshape(264, 160, 12).astype(np.int64); Tt = tt.get().reshape(264, 8).astype(np.int64)
            grid = plan.grid
            items = p["nheads"] * (p["headdim"] // 64) * p.get("batch", 1)
            nch = -(-p["seqlen"] // int(p["chunk"]))
            ghz = np.median((Tt[:grid, 1] - Tt[:grid, 0]) / np.maximum(Tt[:grid, 3] - Tt[:grid, 2], 1))
            w = W[:items, :nch]
            ns = lambda v: v / ghz
            have = lambda k: bool((w[:, 1:, k] != 0).all())
            cand = {"slot wait": (1, 0), "S_prev st": (2, 1), "prep": (3, 2), "save+sync": (4, 3), "count": (5, 4),
                    "prep+save+count (5-2)": (5, 2), "state": (6, 5), "prod dt": (9, 8), "prod state": (10, 9),
                    "prod lead (state issued - math at 5)": (10, 5)}
            steps = {k: w[:, :, a] - w[:, :, b] for k, (a, b) in cand.items() if have(a) and have(b)}
            steps["ckpt+loop"] = w[:, 1:, 0] - w[:, :-1, 6]
            steps["chunk"] = w[:, 1:, 0] - w[:, :-1, 0]
            print(f"trace {row} run {rep}: clock {ghz:.3f} GHz, items {items}, chunks {nch}, grid {grid}")
            for k, v in steps.items():
                v = ns(v[:, 1:].astype(np.float64))
                print(f"   {k:44s} median {np.median(v):8.0f} ns  p10 {np.percentile(v, 10):8.0f}  p90 {np.percentile(v, 90):8.0f}")
            g0 = Tt[:grid, 7].min()
            walk_end = (Tt[:items, 2] - g0) / 1e3
            end = (Tt[:grid, 3] - g0) / 1e3
            print(f"   walk end us: median {np.median(walk_end):.1f} min {walk_end.min():.1f} max {walk_end.max():.1f}")
            print(f"   CTA end us: walkers median {np.median(end[:items]):.1f}, others median {np.median(end[items:]):.1f}, max {end.max():.1f}, min {end.min():.1f}")
            print(f"   tiles a CTA: walkers median {np.median(Tt[:items, 4]):.0f}, others {np.median(Tt[items:grid, 4]):.0f}, total {Tt[:grid, 4].sum()}")
            print(f"   math TILE_FULL wait us a CTA: walkers median {np.median(ns(Tt[:items, 5]))/1e3:.1f}, others {np.median(ns(Tt[items:grid, 5]))/1e3:.1f}")
            print(f"   producer item wait us a CTA: walkers median {np.median(ns(Tt[:items, 6]))/1e3:.1f}, others {np.median(ns(Tt[items:grid, 6]))/1e3:.1f}")
            # per-chunk walk progress: the median walker's chunk start (gt-less: clock from its walk start)
            c0 = (w[:, :, 0] - w[:, :1, 0]) / ghz / 1e3
            print("   walk progress us at chunk 16/32/64/96/127: " + " ".join(f"{np.median(c0[:, k]):.0f}" for k in (16, 32, 64, 96, nch - 1) if k < nch))
