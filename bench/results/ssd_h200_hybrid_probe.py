"""Hybrid schedules for the exact-scan rows, from existing kernels (no code change): a call's units or segments cut in
two, each part run by its own family, back to back on one stream. GPU ms by the bench's method (Timer.time_arms: cold
L2, delay kernel, alternating rounds). Bitwise: the parts' y equal the whole call's y (the families agree bit for bit)."""
import os, sys, statistics
sys.path.insert(0, os.path.join(os.environ.get("MAIN", "."), "scripts"))
import numpy as np, cupy
import cake_rt
from cake_rt.bench import cases
from cake_rt.bench.timing import Timer
from ssd_trace import suite_params

st = cupy.cuda.Stream(non_blocking=True)
l2 = cupy.cuda.runtime.getDeviceProperties(0)["l2CacheSize"]
REPS = int(os.environ.get("REPS", "12"))


def contig(a):
    return None if a is None else a.copy(order="C")


def call(inp, chunk, family, cu=None, y=None):
    return lambda: cake_rt.ssd_combined(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], chunk, D=inp["D"],
                                        z=inp["z"], dt_bias=inp["dt_bias"], cu_seqlens=cu, dt_softplus=True,
                                        return_final_states=True, family=family, out=y, stream=st)


def heads(inp, lo, hi):
    return {"x": contig(inp["x"][:, :, lo:hi]), "dt": contig(inp["dt"][:, :, lo:hi]), "A": contig(inp["A"][lo:hi]),
            "B": inp["B"], "C": inp["C"], "D": contig(inp["D"][lo:hi]), "z": contig(inp["z"][:, :, lo:hi]),
            "dt_bias": contig(inp["dt_bias"][lo:hi])}


def plan_of(inp, chunk, family, cu=None):
    p = cake_rt.ssd_plan(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], chunk, D=inp["D"], z=inp["z"],
                         dt_bias=inp["dt_bias"], cu_seqlens=cu, dt_softplus=True, return_final_states=True,
                         family=family)
    return f"{p.family}{' walk' if getattr(p, 'walk_ring', 0) else ''} grid {p.grid}"


def run(name, arms, check=None):
    timer = Timer(st, repeats=REPS, warmup=2, l2_bytes=l2, budget_s=1.5, min_repeats=REPS)
    res = timer.time_arms(arms, wall=False)
    for n, _ in arms:
        r = res[n]
        print(f"{name:6s} {n:34s} {r['median']*1000:8.1f} us (p20 {r['p20']*1000:.1f}, p80 {r['p80']*1000:.1f})", flush=True)
    if check:
        print(f"{name:6s} bitwise: {check()}", flush=True)


# ---- b8: 640 (segment, unit) items, 2.42 waves of the exact scan's 264 slots
p = suite_params("m2-2.7b-b8")
inp = cases.ssd_inputs(p, 1234)
chunk = int(p["chunk"])
H = inp["x"].shape[2]
y_full = cupy.empty_like(inp["x"])
arms = [("exact", call(inp, chunk, "exact", y=y_full)), ("chunkpar", call(inp, chunk, "chunkpar"))]
parts = {}
for k in (int(s) for s in os.environ.get("B8_SPLITS", "66,64,60,56").split(",")):
    a, b = heads(inp, 0, k), heads(inp, k, H)
    ya, yb = cupy.empty_like(a["x"]), cupy.empty_like(b["x"])
    fa, fb = call(a, chunk, "exact", y=ya), call(b, chunk, "chunkpar", y=yb)
    parts[k] = (ya, yb)
    print(f"b8     split {k}: exact part {plan_of(a, chunk, 'exact')}; chunkpar part {plan_of(b, chunk, 'chunkpar')}")
    arms.append((f"exact {k} + chunkpar {H - k}", (lambda fa=fa, fb=fb: (fa(), fb()))))
    arms.append((f"  exact {k} alone", fa))
    arms.append((f"  chunkpar {H - k} alone", fb))


def check_b8():
    out = []
    for k, (ya, yb) in parts.items():
        ok = bool(cupy.array_equal(y_full[:, :, :k], ya)) and bool(cupy.array_equal(y_full[:, :, k:], yb))
        out.append(f"{k}:{ok}")
    return " ".join(out)


run("b8", arms, check_b8)

# ---- varlen: 16 segments, the longest (16967 tokens) last: its 64 items' chain bounds the exact scan
p = suite_params("varlen")
inp = cases.ssd_inputs(p, 1234)
chunk = int(p["chunk"])
cu = cupy.asnumpy(inp["cu_seqlens"])
cut = int(cu[-2])
y_full = cupy.empty_like(inp["x"])
first = {k: (v if k in ("A", "D", "dt_bias") or v is None else contig(v[:, :cut])) for k, v in inp.items() if k != "cu_seqlens"}
last = {k: (v if k in ("A", "D", "dt_bias") or v is None else contig(v[:, cut:])) for k, v in inp.items() if k != "cu_seqlens"}
cu_first = cu[:-1].copy()
cu_last = np.array([0, cu[-1] - cut], np.int32)
print(f"varlen first 15: exact {plan_of(first, chunk, 'exact', cu_first)}; last: auto {plan_of(last, chunk, 'auto', cu_last)}, "
      f"chunkpar {plan_of(last, chunk, 'chunkpar', cu_last)}; whole auto {plan_of(inp, chunk, 'auto', cu)}")
y1, y2 = cupy.empty_like(first["x"]), cupy.empty_like(last["x"])
f1 = call(first, chunk, "exact", cu_first, y1)
f2 = call(last, chunk, "chunkpar", cu_last, y2)
arms = [("exact", call(inp, chunk, "exact", cu, y_full)), ("chunkpar", call(inp, chunk, "chunkpar", cu)),
        ("exact 15 segs + chunkpar longest", lambda: (f1(), f2())),
        ("  exact 15 segs alone", f1), ("  chunkpar longest alone", f2),
        ("  exact longest alone", call(last, chunk, "exact", cu_last))]
run("varlen", arms, lambda: bool(cupy.array_equal(y_full[:, :cut], y1)) and bool(cupy.array_equal(y_full[:, cut:], y2)))
