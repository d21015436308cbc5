"""What one Item of the plan measures: its inputs, its arms (cake-rt entries and peers), the checks made
before timing, and the raw records (times and counts; derived figures come later, in ``report``).

``run_item(item, opts, order)`` runs in the process that times it (the bench process, or a fresh worker
with ``--processes``); ``order`` 1 reverses the arm order (A/B runs take both orders over processes).
"""
from __future__ import annotations

import contextlib
import math
import traceback

import numpy as np

from .layouts import dsa_floor_counts, dsa_layout, ssd_floor_counts, ssd_segments
from .peers import DSA_PEER, SSD_PEERS

POISON_I32 = 0x7F7F7F7F


def _ordered(arms: list, order: int) -> list:
    return list(reversed(arms)) if order % 2 else list(arms)


def _base_record(item, arm: str, **kw) -> dict:
    rec = {"table": item.table, "row": item.row, "heads": item.heads, "arm": arm,
           "shape": item.params.get("shape") or (_ssd_shape(item.params) if item.table == "ssd" else None),
           "target": item.params.get("target"), "notes": [], "error": None, "peers": {}}
    rec.update(kw)
    rec["key"] = "/".join(str(p) for p in (item.table, item.row, f"H{item.heads}" if item.heads else None, arm,
                                           f"hold{kw['hold']}" if kw.get("hold") is not None else None) if p)
    return rec


def _ssd_shape(p: dict) -> str:
    s = f"{p['batch']} x {p['seqlen']}, H {p['nheads']}, P {p['headdim']}, N {p['dstate']}, G {p['ngroups']}, chunk {p['chunk']}"
    if p.get("cu_seqlens_lengths"):
        s += f", varlen {len(p['cu_seqlens_lengths'])} sequences"
    return s


def _float32(x):
    """float32 CuPy copy of a CuPy bf16/fp16/fp32 array (bf16 through its bits)."""
    import cupy

    if x.dtype == cupy.float32:
        return x
    if x.dtype == cupy.float16:
        return x.astype(cupy.float32)
    if x.dtype.itemsize == 2:
        return (x.view(cupy.uint16).astype(cupy.uint32) << 16).view(cupy.float32)
    return x.astype(cupy.float32)


def _rel_l2_dev(a, ref) -> float:
    import cupy

    a32, r32 = _float32(a).ravel(), _float32(ref).ravel()
    num = float(cupy.linalg.norm((a32 - r32).astype(cupy.float64)))
    den = float(cupy.linalg.norm(r32.astype(cupy.float64)))
    if not math.isfinite(num):
        return float("inf")
    return num / den if den > 0 else num


def _launched(fn):
    """Call ``fn`` once, returning (its result, the kernel launches it made through cake_rt.launch)."""
    from cake_rt.launch.grid import record_launches

    with record_launches() as recs:
        res = fn()
    return res, [{"name": r.name, "grid": list(r.grid), "block": list(r.block), "shared_mem": r.shared_mem,
                  "cooperative": r.cooperative, "tag": r.tag} for r in recs]


def _peer_note(status: dict, name: str):
    reason = status.get(name)
    return None if reason is None else f"peer {name} not run: {reason}"


# ---------------------------------------------------------------------------------------------- SSD


def ssd_inputs(p: dict, seed: int) -> dict:
    """The inputs of an SSD row as CuPy arrays (mamba_ssm's initialisation ranges; cu_seqlens on the device)."""
    import cupy

    from .arrays import random_normal

    b, L, H, P, N, G = (int(p[k]) for k in ("batch", "seqlen", "nheads", "headdim", "dstate", "ngroups"))
    dtype = p.get("dtype", "bfloat16")
    rs = np.random.default_rng(seed)
    # mamba_ssm's initialisation ranges: A = -exp(U(log 1, log 16)), dt after softplus in [1e-3, 1e-1].
    A = cupy.asarray(-np.exp(rs.uniform(0.0, np.log(16.0), H)).astype(np.float32))
    dt_target = np.exp(rs.uniform(np.log(1e-3), np.log(1e-1), H))
    dt_bias = cupy.asarray((dt_target + np.log(-np.expm1(-dt_target))).astype(np.float32))  # softplus^-1
    inputs = {
        "x": random_normal((b, L, H, P), dtype, seed=seed + 1),
        "dt": random_normal((b, L, H), "float32", seed=seed + 2, scale=0.5),
        "A": A,
        "B": random_normal((b, L, G, N), dtype, seed=seed + 3),
        "C": random_normal((b, L, G, N), dtype, seed=seed + 4),
        "D": cupy.asarray(rs.standard_normal(H).astype(np.float32)),
        "z": random_normal((b, L, H, P), dtype, seed=seed + 5) if p.get("z", True) else None,
        "dt_bias": dt_bias,
        "cu_seqlens": None,
    }
    if p.get("cu_seqlens_lengths"):
        cu = np.concatenate([[0], np.cumsum(ssd_segments(p))]).astype(np.int32)
        inputs["cu_seqlens"] = cupy.asarray(cu)
    return inputs


def _ssd_item(item, opts, order, timer, stream, peers_status) -> list:
    import cupy

    import cake_rt

    p = dict(item.defaults)
    p.update(item.params)
    inputs = ssd_inputs(p, opts.get("seed", 1234))
    varlen = bool(p.get("return_varlen_states"))
    flops, nbytes, source = ssd_floor_counts(p)
    rec = _base_record(item, "ours", flops=flops, bytes=nbytes, flops_source=source,
                       dims={k: p[k] for k in ("batch", "seqlen", "nheads", "headdim", "dstate", "ngroups", "chunk")})
    rec["dims"]["segments"] = len(ssd_segments(p))
    y = cupy.empty_like(inputs["x"])
    # cake-rt takes host metadata (no device-to-host copy per call); the peer gets the device copy.
    cu_host = None if inputs["cu_seqlens"] is None else cupy.asnumpy(inputs["cu_seqlens"])
    kw = dict(D=inputs["D"], z=inputs["z"], dt_bias=inputs["dt_bias"], cu_seqlens=cu_host,
              dt_softplus=True, return_final_states=True, return_varlen_states=varlen)
    args = (inputs["x"], inputs["dt"], inputs["A"], inputs["B"], inputs["C"], int(p["chunk"]))
    try:
        plan = cake_rt.ssd_plan(*args, **kw)
        rec["extra"] = {"family": getattr(plan, "family", None), "reason": getattr(plan, "reason", None),
                        "workspace_bytes": getattr(plan, "workspace_bytes", None)}
    except Exception as exc:
        rec["notes"].append(f"ssd_plan failed: {exc.__class__.__name__}: {exc}")

    def ours():
        return cake_rt.ssd_combined(*args, **kw, out=y, stream=stream)

    # Poison y (bf16/fp16 NaN bits), run once, check every element was written.
    y.view(cupy.uint16 if y.dtype.itemsize == 2 else cupy.uint32).fill(0x7FC0 if y.dtype.itemsize == 2 else 0x7FC00000)
    res, launches = _launched(ours)
    stream.synchronize()
    rec.setdefault("extra", {})["launches"] = launches
    res = res if isinstance(res, tuple) else (res,)
    if res[0].data.ptr != y.data.ptr:
        rec["notes"].append("ssd_combined did not write into out=")
    if bool(cupy.isnan(_float32(res[0])).any()):
        raise RuntimeError("ssd_combined left NaN in y (poisoned before the call): output not fully written")
    ours_out = {"y": res[0], "final_states": res[1] if len(res) > 1 else None,
                "varlen_states": res[2] if varlen and len(res) > 2 else None}

    arms = [("ours", ours)]
    for peer in (SSD_PEERS if opts.get("peers", True) else ()):
        note = _peer_note(peers_status, peer)
        if note:
            rec["notes"].append(note)
            continue
        from .peers import from_torch, ssd_peer_call

        try:
            pcall = ssd_peer_call(peer, inputs, p, stream)
            py, pfs, pvs = pcall()  # also the first (autotuning) call
            stream.synchronize()
            check = {k: _rel_l2_dev(from_torch(v), ours_out[k]) for k, v in
                     (("y", py), ("final_states", pfs), ("varlen_states", pvs))
                     if v is not None and ours_out.get(k) is not None}
            tol = 2e-2
            rec["peers"][peer] = {"check": {**{f"rel_l2_{k}": v for k, v in check.items()}, "tolerance": tol,
                                            "ok": bool(check) and all(v <= tol for v in check.values())}}
            arms.append((peer, pcall))
        except Exception as exc:
            rec["notes"].append(f"peer {peer} failed: {exc.__class__.__name__}: {exc}")
    for name, t in timer.time_arms(_ordered(arms, order)).items():
        if name == "ours":
            rec["ms"] = t
        else:
            rec["peers"][name]["ms"] = t
    rec["arm_order"] = [a for a, _ in _ordered(arms, order)]
    return [rec]


# ---------------------------------------------------------------------------------------------- DSA


def _dsa_setup(item, opts):
    from .arrays import random_normal

    H = int(item.heads)
    D = int(item.defaults.get("head_dim", 128))
    topk = int(item.defaults.get("topk", 2048))
    layout = dsa_layout(item.params)
    seed = opts.get("seed", 1234) + 17 * H
    q = random_normal((layout.T, H, D), "bfloat16", seed=seed + 1)
    k = random_normal((layout.Tkv, D), "bfloat16", seed=seed + 2)
    w = random_normal((layout.T, H), "float32", seed=seed + 3, scale=H ** -0.5)
    meta = {}
    if item.params.get("layout") != "tail":  # the tail rows use the defaults (one bottom-right segment)
        meta = {"cu_seqlens_q": layout.cu_seqlens_q, "cu_seqlens_k": layout.cu_seqlens_k,
                "q_causal_offsets": layout.q_causal_offsets}
    return H, D, topk, layout, q, k, w, meta


def _dsa_outputs(T, topk):
    import cupy

    ind = cupy.full((T, topk), POISON_I32, dtype=cupy.int32)
    sc = cupy.full((T, topk), np.nan, dtype=cupy.float32)
    return ind, sc


def _check_written(ind, sc, what: str):
    import cupy

    if bool((ind == POISON_I32).any()) or bool(cupy.isnan(sc).any()):
        raise RuntimeError(f"{what}: indices/scores still hold the poison written before the call")


def _dsa_records(item, layout, H, D, topk):
    flops, nbytes, source = dsa_floor_counts(layout, H, D, topk)
    dims = {"T": layout.T, "Tkv": layout.Tkv, "segments": layout.segments, "visible_pairs": layout.visible_pairs,
            "H": H, "D": D, "topk": topk}
    return flops, nbytes, dims, source


def _dsa_item(item, opts, order, timer, stream, peers_status) -> list:
    import cupy

    import cake_rt

    H, D, topk, layout, q, k, w, meta = _dsa_setup(item, opts)
    flops, nbytes, dims, source = _dsa_records(item, layout, H, D, topk)
    common = dict(flops=flops, bytes=nbytes, dims=dims, flops_source=source)
    rp = _base_record(item, "prepared", **common)
    re_ = _base_record(item, "eager", **common)

    ws_bytes = int(cake_rt.dsa_indexer_workspace_bytes(q, k, w, topk, **meta))
    ws = cupy.empty(max(ws_bytes, 1), dtype=cupy.uint8)
    ind_p, sc_p = _dsa_outputs(layout.T, topk)
    ind_e, sc_e = _dsa_outputs(layout.T, topk)
    runner = cake_rt.prepare_dsa_indexer_det_topk(q, k, w, topk, **meta, indices=ind_p, scores=sc_p, workspace=ws)

    def prepared():
        return runner(stream=stream)

    def eager():
        return cake_rt.dsa_indexer_det_topk(q, k, w, topk, **meta, indices=ind_e, scores=sc_e, workspace=ws,
                                            stream=stream)

    _, launches_p = _launched(prepared)
    stream.synchronize()
    _check_written(ind_p, sc_p, "prepared runner")
    _, launches_e = _launched(eager)
    stream.synchronize()
    _check_written(ind_e, sc_e, "eager entry")
    same = bool((ind_p == ind_e).all()) and bool((sc_p.view(cupy.uint32) == sc_e.view(cupy.uint32)).all())
    rp["extra"] = {"eager_bitwise_equal": same, "workspace_bytes": ws_bytes, "launches": launches_p}
    re_["extra"] = {"eager_bitwise_equal": same, "workspace_bytes": ws_bytes, "launches": launches_e}
    if not same:
        raise RuntimeError("eager entry and prepared runner disagree bitwise on the same inputs")

    arms = [("prepared", prepared), ("eager", eager)]
    peer_rec = None
    if opts.get("peers", True):
        note = _peer_note(peers_status, DSA_PEER)
        if note:
            rp["notes"].append(note)
        else:
            from .peers import check_dsa, check_rows, dsa_peer_call, from_torch

            try:
                pcall = dsa_peer_call(q, k, w, topk, layout, stream)
                pi, ps = pcall()
                stream.synchronize()
                rows = check_rows(layout.T)
                lay = {"rows": rows.tolist(), "cu_q": layout.cu_seqlens_q, "cu_k": layout.cu_seqlens_k,
                       "offsets": layout.q_causal_offsets}
                sel = cupy.asarray(rows)
                chk = check_dsa(cupy.asnumpy(ind_p[sel]), cupy.asnumpy(sc_p[sel]),
                                cupy.asnumpy(from_torch(pi)[sel]), cupy.asnumpy(from_torch(ps)[sel]), lay)
                peer_rec = {"check": chk}
                arms.append((DSA_PEER, pcall))
            except Exception as exc:
                rp["notes"].append(f"peer {DSA_PEER} failed: {exc.__class__.__name__}: {exc}")
    for name, t in timer.time_arms(_ordered(arms, order)).items():
        if name == "prepared":
            rp["ms"] = t
        elif name == "eager":
            re_["ms"] = t
        else:
            peer_rec["ms"] = t
    if peer_rec is not None:
        rp["peers"][DSA_PEER] = peer_rec
        re_["peers"][DSA_PEER] = dict(peer_rec)
    rp["arm_order"] = re_["arm_order"] = [a for a, _ in _ordered(arms, order)]
    return [rp, re_]


def _side_item(item, opts, order, timer, stream, holder_factory) -> list:
    import cupy

    import cake_rt

    H, D, topk, layout, q, k, w, meta = _dsa_setup(item, opts)
    flops, nbytes, dims, source = _dsa_records(item, layout, H, D, topk)
    ws_bytes = int(cake_rt.dsa_indexer_workspace_bytes(q, k, w, topk, **meta))
    runners, outs, notes = {}, {}, []
    for sched in item.schedules:
        ws = cupy.empty(max(ws_bytes, 1), dtype=cupy.uint8)
        ind, sc = _dsa_outputs(layout.T, topk)
        try:
            runners[sched] = cake_rt.prepare_dsa_indexer_det_topk(q, k, w, topk, **meta, indices=ind, scores=sc,
                                                                  workspace=ws, schedule=sched)
        except (TypeError, ValueError) as exc:
            notes.append(f"schedule {sched!r} not available: {exc}")
            continue
        outs[sched] = (ind, sc)
        runners[sched](stream=stream)
        stream.synchronize()
        _check_written(ind, sc, f"prepared runner, schedule {sched}")
    if not runners:
        raise RuntimeError("no schedule could be prepared: " + "; ".join(notes))
    names = list(runners)
    ref = outs[names[0]]
    bitwise = all(bool((outs[s][0] == ref[0]).all()) and bool((outs[s][1].view(cupy.uint32) == ref[1].view(cupy.uint32)).all())
                  for s in names[1:])
    if not bitwise:
        raise RuntimeError(f"schedules {names} disagree bitwise on the same inputs")
    holder = holder_factory()
    recs = []
    for hold in (0,) + tuple(item.holds):
        ctx = holder.hold(hold) if hold else contextlib.nullcontext({"held": 0})
        with ctx as info:
            times = timer.time_arms([(s, lambda s=s: runners[s](stream=stream)) for s in _ordered(names, order)])
        for sched in names:
            r = _base_record(item, sched, hold=hold, flops=flops, bytes=nbytes, dims=dims, flops_source=source)
            r["ms"] = times[sched]
            r["extra"] = {"schedules_bitwise_equal": bitwise, "hold_info": dict(info)}
            r["notes"] += notes
            if info.get("timed_out"):
                r["notes"].append(f"{info['timed_out']} spinner CTAs stopped on their own timeout: hold not kept")
            r["arm_order"] = _ordered(names, order)
            recs.append(r)
    return recs


def _selfcheck_item(item, opts, order, timer, stream, holder_factory) -> list:
    """Runner self-check: a CuPy elementwise copy vs cudaMemcpyAsync of 256 MiB, bitwise checked, then the
    copy under the side-stream holds (exercises timing, flush, floors and the spinner without the ops)."""
    import cupy

    from .arrays import random_normal

    n = int(item.params["nbytes"])
    src = random_normal((n // 4,), "float32", seed=5).view(cupy.uint8)
    dst = cupy.full(n, 0x7F, dtype=cupy.uint8)
    dst2 = cupy.full(n, 0x7F, dtype=cupy.uint8)

    def ours():
        cupy.copyto(dst, src)

    def memcpy():
        cupy.cuda.runtime.memcpyAsync(dst2.data.ptr, src.data.ptr, n, cupy.cuda.runtime.memcpyDeviceToDevice,
                                      stream.ptr)

    ours()
    memcpy()
    stream.synchronize()
    if not bool((dst == src).all()) or not bool((dst2 == src).all()):
        raise RuntimeError("self-check copy: output differs from input")
    recs = []
    holds = (0,) + tuple(opts.get("selfcheck_holds", (1, 32)))
    holder = holder_factory() if len(holds) > 1 else None
    for hold in holds:
        ctx = holder.hold(hold) if hold else contextlib.nullcontext({"held": 0})
        with ctx as info:
            times = timer.time_arms(_ordered([("copy-kernel", ours), ("memcpy", memcpy)], order))
        r = _base_record(item, "copy-kernel", hold=hold, flops=0, bytes=2 * n, dims={"bytes": n},
                         flops_source="2 x bytes")
        r["ms"] = times["copy-kernel"]
        r["peers"] = {"cudaMemcpyAsync": {"ms": times["memcpy"], "check": {"ok": True, "bitwise": True}}}
        r["extra"] = {"hold_info": dict(info)}
        r["arm_order"] = list(times)
        if info.get("timed_out"):
            r["notes"].append(f"{info['timed_out']} spinner CTAs stopped on their own timeout: hold not kept")
        recs.append(r)
    return recs


def run_item(item, opts: dict, order: int = 0) -> list:
    """Measure one Item in this process; returns its raw records. A failure becomes one record with
    'error' set (the run goes on with the next item)."""
    import cupy

    from cake_rt.launch.arch import device_info

    from .peers import peer_status
    from .spinner import SMHolder
    from .timing import Timer

    stream = cupy.cuda.Stream(non_blocking=True)
    holders = []

    def holder_factory():
        if not holders:
            holders.append(SMHolder())
        return holders[0]

    try:
        info = device_info()
        timer = Timer(stream, repeats=opts.get("repeats", 20), warmup=opts.get("warmup", 3),
                      warm_l2=opts.get("warm_l2", False), l2_bytes=info.l2_bytes,
                      budget_s=opts.get("budget_s", 2.0), min_repeats=opts.get("min_repeats", 5))
        with stream:
            if item.table == "ssd":
                return _ssd_item(item, opts, order, timer, stream, opts.get("_peer_status") or peer_status())
            if item.table == "dsa":
                return _dsa_item(item, opts, order, timer, stream, opts.get("_peer_status") or peer_status())
            if item.table == "side_stream":
                return _side_item(item, opts, order, timer, stream, holder_factory)
            if item.table == "selfcheck":
                return _selfcheck_item(item, opts, order, timer, stream, holder_factory)
        raise ValueError(f"unknown table {item.table!r}")
    except Exception as exc:
        rec = _base_record(item, "error")
        rec["error"] = f"{exc.__class__.__name__}: {exc}"
        rec["traceback"] = traceback.format_exc(limit=8)
        return [rec]
    finally:
        try:
            stream.synchronize()
        except Exception:
            pass
