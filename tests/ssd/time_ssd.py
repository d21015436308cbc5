"""Time both SSD families on the suite rows (CUDA events, median of cold-L2 calls), print the plan's
prediction next to each; mamba_ssm Triton too when importable.
    PYTHONPATH=$PWD:$PWD/.peers python3 tests/ssd/time_ssd.py [--rows seed,short] [--reps 10]"""
import argparse
import json
import sys

import cupy
import numpy as np

import cake_rt
from cake_rt.bench.cases import _ssd_inputs
from cake_rt.bench.suites import load_suite


def rows():
    suite = load_suite("ssd")
    out = []
    for r in suite["rows"]:
        p = dict(suite.get("defaults", {}))
        p.update(r)
        out.append(p)
    return out


_DELAY = []


def timeit(fn, reps, flush):
    """GPU time: the call is enqueued behind a 1 ms delay kernel, so its host work stays outside the span."""
    if not _DELAY:
        from cake_rt.bench.timing import _CudaPieces
        _DELAY.append(_CudaPieces())
    ts = []
    for _ in range(reps + 2):
        flush.fill(1)
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        _DELAY[0].delay(cupy.cuda.get_current_stream(), 1.0)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(a, b) * 1000.0)
    return float(np.median(ts[2:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--no-mamba", action="store_true")
    ap.add_argument("--config", help="force the programs' (units per CTA, buffers): HB,NBUF,HBX,NBUFX")
    ap.add_argument("--define", help="extra program defines for an experiment: NAME=VALUE,...")
    ap.add_argument("--families", default="exact,chunkpar")
    args = ap.parse_args()
    if args.config or args.define:
        import cake_rt.ops.ssd as ops
        extra = {}
        if args.config:
            hb, nb, hbx, nbx = (int(v) for v in args.config.split(","))
            extra.update(SSD_HB=hb, SSD_NBUF=nb, SSD_HBX=hbx, SSD_NBUFX=nbx)
        if args.define:
            extra.update({k: int(v) for k, v in (kv.split("=") for kv in args.define.split(","))})
        base = ops.program_defines

        def forced(*a, **k):
            d = base(*a, **k)
            d.update(extra)
            return d
        ops.program_defines = forced
    want = set(args.rows.split(",")) if args.rows else None
    flush = cupy.empty(2 * 60 * 2**20, cupy.uint8)
    try:
        if args.no_mamba:
            raise ImportError("--no-mamba")
        from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
        import torch
    except Exception as exc:
        mamba_chunk_scan_combined = None
        print("mamba_ssm not importable:", exc)
    results = []
    for p in rows():
        name = p.get("row") or p.get("name")
        if want and name not in want:
            continue
        inp = _ssd_inputs(p, 1234)
        varlen = bool(p.get("return_varlen_states"))
        kw = dict(D=inp["D"], z=inp["z"], dt_bias=inp["dt_bias"], cu_seqlens=inp["cu_seqlens"], dt_softplus=True,
                  return_final_states=True, return_varlen_states=varlen)
        a = (inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], int(p["chunk"]))
        y = cupy.empty_like(inp["x"])
        plan = cake_rt.ssd_plan(*a, **kw)
        rec = {"row": name, "plan": plan.family, "reason": plan.reason, "pred": plan.predicted_us,
               "defines": plan.defines, "slice_units": plan.slice_units, "coop": plan.cooperative_capacity,
               "max_chunks": plan.max_chunks, "total_chunks": plan.total_chunks, "nseg": plan.segments}
        for fam in args.families.split(","):
            try:
                rec[fam] = timeit(lambda: cake_rt.ssd_combined(*a, **kw, family=fam, out=y), args.reps, flush)
            except Exception as exc:
                rec[fam] = f"{exc.__class__.__name__}: {exc}"[:120]
        if mamba_chunk_scan_combined is not None:
            t = {k: (torch.from_dlpack(v) if v is not None else None) for k, v in inp.items()}
            seq_idx = None
            if t["cu_seqlens"] is not None:
                cu = t["cu_seqlens"].long()
                seq_idx = torch.searchsorted(cu[1:], torch.arange(int(p["seqlen"]), device=cu.device),
                                             right=True).to(torch.int32).unsqueeze(0).contiguous()

            def peer():
                return mamba_chunk_scan_combined(t["x"], t["dt"], t["A"], t["B"], t["C"], int(p["chunk"]), D=t["D"],
                                                 z=t["z"], dt_bias=t["dt_bias"], seq_idx=seq_idx,
                                                 cu_seqlens=t["cu_seqlens"], dt_softplus=True,
                                                 return_final_states=True, return_varlen_states=varlen)
            try:
                rec["mamba"] = timeit(peer, args.reps, flush)
            except Exception as exc:
                rec["mamba"] = f"{exc.__class__.__name__}: {exc}"[:120]
        print(json.dumps(rec), flush=True)
        results.append(rec)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
