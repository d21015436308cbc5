"""Flow probe (thirty-second session): bitwise checks of the three-phase schedule (flow) against the exact scan, and
cold-L2 timings of seed and short. Env: ARM, MAIN (tree dir), CHECKS (1), ROWS, FRONT (flow tree: FLOW_SCAN_ITEM)."""
import hashlib, os, sys
import numpy as np
sys.path.insert(0, os.path.join(os.environ["MAIN"], "scripts"))
import cupy
import cake_rt
from cake_rt.bench import cases
from cake_rt.bench.timing import L2Flusher
from cake_rt.launch.arch import device_info
from cake_rt.ops import ssd as ops
from ssd_trace import suite_params

ARM = os.environ.get("ARM", "?")
if os.environ.get("FRONT"):
    ops.FLOW_SCAN_ITEM = float(os.environ["FRONT"])

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
    ops._SCHEDULE = "phases"
    bad = 0
    # (batch, seqlen, chunk, nheads, ngroups, dstate, headdim, varlen lengths or None)
    for (b, L, q, nh, ng, N, P, lens) in [(1, 9000, 256, 8, 1, 128, 64, None), (3, 2000, 128, 8, 2, 128, 64, None),
                                           (2, 1500, 256, 4, 1, 128, 64, None), (1, 700, 64, 8, 8, 128, 64, None),
                                           (1, 5000, 128, 6, 2, 64, 64, None), (1, 3000, 256, 4, 2, 256, 64, None),
                                           (1, 4000, 128, 4, 1, 128, 128, None), (1, 512, 256, 8, 1, 128, 64, None),
                                           (1, 6000, 128, 8, 2, 128, 64, [0, 3, 100, 1700, 0, 2500, 1697])]:
        p2 = dict(dtype="bfloat16", D=True, z=True, batch=b, seqlen=L, nheads=nh, headdim=P, dstate=N, ngroups=ng)
        if lens:
            p2["cu_seqlens_lengths"] = lens
        inp2 = cases.ssd_inputs(p2, 78 + L)
        nseq = len(lens) if lens else b
        kw2 = dict(return_final_states=True,
                   initial_states=cupy.asarray(rs.standard_normal((nseq, nh, P, N)).astype(np.float32)))
        if lens:
            kw2["return_varlen_states"] = True
        else:
            kw2["return_chunk_states"] = True
        ex = digest(call(inp2, q, "exact", **kw2))
        c1 = digest(call(inp2, q, "chunkpar", **kw2)); plan = ops.last_plan()
        c2 = digest(call(inp2, q, "chunkpar", **kw2))
        ok = ex == c1 == c2
        bad += not ok
        print(f"check {ARM} {b}x{L} q{q} H{nh} G{ng} N{N} P{P}{' varlen' if lens else ''}: {'EQUAL' if ok else 'DIFFER'} "
              f"exact {ex} chunkpar {c1} {c2} ({plan.family}, slice {plan.slice_units}, grid {plan.grid}, "
              f"rows {plan.defines.get('SSD_ROWS')})", flush=True)
    ops._SCHEDULE = None
    print(f"checks {ARM}: {bad} differ", flush=True)

st = cupy.cuda.Stream(non_blocking=True)
flush = L2Flusher(device_info(0).l2_bytes)
for row in os.environ.get("ROWS", "seed,short").split(","):
    p = suite_params(row)
    inp = cases.ssd_inputs(p, 1234)
    y = cupy.empty_like(inp["x"])
    f = lambda: call(inp, int(p["chunk"]), "auto", out=y, stream=st, return_final_states=True)
    outs = f(); st.synchronize()
    h = digest(outs)
    plan = ops.last_plan()
    ts = []
    for i in range(16):
        flush(st)
        e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
        e0.record(st); f(); e1.record(st); e1.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(e0, e1) * 1000.0)
    ts.sort()
    print(f"time {ARM:8s} {row:8s} {plan.family}{'+walk' if plan.walk_ring else ''} median {ts[8]:8.1f} us "
          f"(min {ts[0]:.1f}, max {ts[-1]:.1f}) hash {h}", flush=True)
