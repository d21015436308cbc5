"""Forced walk vs the exact scan: where the bits differ (heads, chunks, rows), run to run."""
import os, sys
import numpy as np
import cupy
import cake_rt
from cake_rt.bench import cases
from cake_rt.ops import ssd as ops

ARM = os.environ.get("ARM", "?")
rs = np.random.default_rng(5)
p = dict(dtype="bfloat16", D=True, z=True, batch=1, seqlen=9000, nheads=8, headdim=64, dstate=128, ngroups=2)
inp = cases.ssd_inputs(p, 77)
def call(family):
    return cake_rt.ssd_combined(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], 128, D=inp["D"], z=inp["z"],
                                dt_bias=inp["dt_bias"], dt_softplus=True, family=family, return_final_states=True)
ex = [cupy.asnumpy(o).view(np.uint16) if o.dtype != np.float32 else cupy.asnumpy(o) for o in call("exact")]
for ring in (None, 2):
    ops._SCHEDULE, ops._WALK_RING = "walk", ring
    for r in range(3):
        out = call("chunkpar"); plan = ops.last_plan()
        y = cupy.asnumpy(out[0]).view(np.uint16)
        d = (y != ex[0])  # [1, 9000, 8, 64]
        fin = int((cupy.asnumpy(out[1]) != ex[1]).sum())
        toks = np.nonzero(d.any(axis=(0, 2, 3)))[0]
        heads = np.nonzero(d.any(axis=(0, 1, 3)))[0]
        chunks = np.unique(toks // 128)
        rows = np.unique(toks % 128)
        print(f"{ARM} ring {ring} run {r}: grid {plan.grid} y diff {int(d.sum())} elems, heads {heads.tolist()}, "
              f"chunks {chunks[:20].tolist()}{'...' if len(chunks) > 20 else ''} ({len(chunks)}), rows {rows.min() if len(rows) else '-'}..{rows.max() if len(rows) else '-'} ({len(rows)}), final diff {fin}", flush=True)
ops._SCHEDULE, ops._WALK_RING = None, None
ops._SCHEDULE, ops._WALK_RING = "walk", None
out = call("chunkpar")
f = cupy.asnumpy(out[1]); fe = cupy.asnumpy(call("exact")[1])
d = f != fe  # [1, 8, 64, 128]
for h in range(8):
    if d[0, h].any():
        rows = np.nonzero(d[0, h].any(axis=1))[0]; cols = np.nonzero(d[0, h].any(axis=0))[0]
        print(f"{ARM} final head {h}: {int(d[0, h].sum())} diff, rows {rows.min()}..{rows.max()} ({len(rows)}), cols {cols.min()}..{cols.max()} ({len(cols)}), max abs err {np.abs(f[0,h]-fe[0,h]).max():.3g} of max {np.abs(fe[0,h]).max():.3g}")
ops._SCHEDULE, ops._WALK_RING = None, None
