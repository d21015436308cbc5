"""Optional peers, used only when importable (a missing peer is a note, never an error).

    mamba_ssm-triton   mamba_ssm's Triton ``mamba_chunk_scan_combined`` (SSD).
    vllm-triton        vLLM's Triton SSD prefill ``mamba_chunk_scan_combined_varlen`` (the path vLLM's Mamba2
                       layers run): batch rows packed as varlen sequences with vLLM's chunk metadata.
                       Neither is a dependency: ``scripts/prepare-peers`` builds a ``.peers/`` folder to put on
                       PYTHONPATH (see bench/peers/README.md).
    torch-eager        a PyTorch eager DSA indexer: bf16 einsum of the head dot products, ReLU, weighted head
                       sum in float32, causal mask, ``torch.topk``; queries in blocks so the [tq, H, Tkv]
                       intermediates stay under a memory budget, keys cut at the block's last visible key.

Every peer runs on the very same device buffers as cake-rt (DLPack views, no copy) on the timing stream,
and is cross-checked against cake-rt's output before it is timed.
"""
from __future__ import annotations

import importlib

import numpy as np

SSD_PEER = "mamba_ssm-triton"
VLLM_PEER = "vllm-triton"
SSD_PEERS = (SSD_PEER, VLLM_PEER)
DSA_PEER = "torch-eager"


def _torch():
    import torch

    if not torch.cuda.is_available():
        raise ImportError("torch has no CUDA device")
    return torch


def peer_status() -> dict:
    """{peer: None if usable, else the reason it is not} -- for the header and the notes."""
    out = {}
    try:
        torch = _torch()
        out[DSA_PEER] = None
        out["torch_version"] = torch.__version__
    except Exception as exc:
        out[DSA_PEER] = f"PyTorch with CUDA not importable ({exc.__class__.__name__}: {exc})"
    for peer, find, package, what in ((SSD_PEER, mamba_fn, "mamba_ssm", "mamba_ssm Triton"),
                                      (VLLM_PEER, vllm_fn, "vllm_ssd", "vLLM Triton SSD (vllm_ssd)")):
        try:
            find()
        except Exception as exc:
            out[peer] = (f"{what} not importable ({exc.__class__.__name__}: {exc}); "
                         "see bench/peers/README.md (scripts/prepare-peers)")
            continue
        out[peer] = None
        out[f"{package}_version"] = getattr(importlib.import_module(package), "__version__", "unknown")
    return out


def vllm_fn():
    _torch()
    from vllm_ssd.ssd_combined import mamba_chunk_scan_combined_varlen

    return mamba_chunk_scan_combined_varlen


def vllm_chunk_metadata(lengths, chunk: int):
    """vLLM's chunk metadata for sequences of ``lengths`` tokens packed back to back: chunks of ``chunk``
    tokens restarting at every sequence start. Returns host int32 arrays (cu_seqlens [nseq + 1],
    cu_chunk_seqlens [nchunks + 1], last_chunk_indices [nseq], seq_idx [nchunks])."""
    cu, cu_chunks, last, seq_idx = [0], [0], [], []
    for s, n in enumerate(int(v) for v in lengths):
        start = cu[-1]
        for c0 in range(0, max(n, 1), chunk):
            if n == 0:
                break
            cu_chunks.append(start + min(n, c0 + chunk))
            seq_idx.append(s)
        cu.append(start + n)
        last.append(len(seq_idx) - 1)
    as32 = lambda v: np.asarray(v, dtype=np.int32)  # noqa: E731
    return as32(cu), as32(cu_chunks), as32(last), as32(seq_idx)


def mamba_fn():
    _torch()
    from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined

    return mamba_chunk_scan_combined


def to_torch(x):
    """A torch view of a CuPy array (DLPack, no copy); bf16 through an int16 view if DLPack refuses it."""
    torch = _torch()
    try:
        return torch.from_dlpack(x)
    except Exception:
        if x.dtype.itemsize == 2 and x.dtype.kind not in "iuf":
            import cupy

            return torch.from_dlpack(x.view(cupy.int16)).view(torch.bfloat16)
        raise


def from_torch(t):
    """A CuPy view of a torch CUDA tensor (DLPack, no copy); bf16 comes back as its uint16 bits if DLPack refuses
    it (``cases._float32`` reads 2-byte non-float16 arrays as bf16 bits)."""
    import cupy

    try:
        return cupy.from_dlpack(t)
    except Exception:
        torch = _torch()
        if t.dtype == torch.bfloat16:
            return cupy.from_dlpack(t.view(torch.int16)).view(cupy.uint16)
        raise


def torch_stream(stream):
    """The torch view of a CuPy stream (same handle, same device)."""
    return _torch().cuda.ExternalStream(stream.ptr)


# ---------------------------------------------------------------------------------------------- SSD


def ssd_peer_call(peer: str, inputs: dict, row: dict, stream):
    """A callable running SSD peer ``peer`` on ``inputs`` (CuPy arrays, DLPack views) on ``stream``; it returns
    (y [batch, seqlen, H, P], final_states [batch or 1, ...], varlen_states-or-None) as torch tensors."""
    if peer == SSD_PEER:
        return _mamba_call(inputs, row, stream)
    if peer == VLLM_PEER:
        return _vllm_call(inputs, row, stream)
    raise ValueError(f"peer: expected one of {', '.join(SSD_PEERS)}, got {peer!r}")


def _mamba_call(inputs: dict, row: dict, stream):
    torch = _torch()
    fn = mamba_fn()
    t = {k: (to_torch(v) if v is not None and not isinstance(v, (int, float)) else v) for k, v in inputs.items()}
    ts = torch_stream(stream)
    varlen = bool(row.get("return_varlen_states"))
    seq_idx = None
    if t.get("cu_seqlens") is not None:
        cu = t["cu_seqlens"].long()
        L = int(row["seqlen"])
        seq_idx = (torch.searchsorted(cu[1:], torch.arange(L, device=cu.device), right=True)
                   .to(torch.int32).unsqueeze(0).contiguous())

    def call():
        with torch.cuda.stream(ts):
            out = fn(t["x"], t["dt"], t["A"], t["B"], t["C"], int(row["chunk"]), D=t["D"], z=t["z"],
                     dt_bias=t["dt_bias"], seq_idx=seq_idx, cu_seqlens=t.get("cu_seqlens"), dt_softplus=True,
                     return_final_states=True, return_varlen_states=varlen)
        y, fs = out[0], out[1]
        return y, fs, (out[2] if varlen else None)

    return call


def _vllm_call(inputs: dict, row: dict, stream):
    """vLLM's varlen entry on the same buffers: [batch, seqlen, ...] viewed as batch * seqlen packed tokens,
    each batch row (or each cu_seqlens sequence) one sequence; fp32 states; its output buffer preallocated."""
    torch = _torch()
    fn = vllm_fn()
    from .layouts import ssd_segments

    b, L = int(row["batch"]), int(row["seqlen"])
    t = {k: (to_torch(v) if v is not None and not isinstance(v, (int, float)) else v) for k, v in inputs.items()}
    flat = lambda v: None if v is None else v.reshape((b * L,) + tuple(v.shape[2:]))  # noqa: E731
    x, dt, B, C, z = (flat(t[k]) for k in ("x", "dt", "B", "C", "z"))
    lengths = ssd_segments(row)
    cu, cu_chunks, last, seq_idx = (torch.from_numpy(a).to(x.device) for a in
                                    vllm_chunk_metadata(lengths, int(row["chunk"])))
    out = torch.empty_like(x)
    varlen = bool(row.get("return_varlen_states"))
    ts = torch_stream(stream)

    def call():
        with torch.cuda.stream(ts):
            states = fn(x, dt, t["A"], B, C, int(row["chunk"]), cu_seqlens=cu, cu_chunk_seqlens=cu_chunks,
                        last_chunk_indices=last, seq_idx=seq_idx, out=out, D=t["D"], z=z, dt_bias=t["dt_bias"],
                        dt_softplus=True, state_dtype=torch.float32)
        y = out.reshape(b, L, *out.shape[1:])
        if row.get("cu_seqlens_lengths"):
            return y, states[-1:], (states if varlen else None)
        return y, states, None

    return call


def rel_l2(a, b) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    den = float(np.linalg.norm(b.ravel()))
    num = float(np.linalg.norm((a - b).ravel()))
    if not np.isfinite(num):
        return float("inf")
    return num / den if den > 0 else num


def check_ssd(ours: dict, peer: dict, *, tol: float = 2e-2) -> dict:
    """Relative L2 difference between cake-rt's and the peer's y and states (host float arrays)."""
    out = {}
    for k in ("y", "final_states", "varlen_states"):
        if ours.get(k) is not None and peer.get(k) is not None:
            out[f"rel_l2_{k}"] = rel_l2(peer[k], ours[k])
    out["tolerance"] = tol
    out["ok"] = bool(out) and all(v <= tol for k, v in out.items() if k.startswith("rel_l2"))
    return out


# ---------------------------------------------------------------------------------------------- DSA


def torch_dsa_topk(q, k, w, topk: int, cu_q, cu_k, offsets, *, budget_bytes: int = 2 << 30):
    """The PyTorch eager indexer on torch tensors (any device): q [T,H,D] bf16, k [Tkv,D] bf16, w [T,H] float32.
    Returns (indices int32 [T, topk], global ids ordered by score, -1 padded; scores float32, -inf padded)."""
    import torch

    T, H, _D = q.shape
    idx = torch.full((T, topk), -1, dtype=torch.int32, device=q.device)
    sc = torch.full((T, topk), float("-inf"), dtype=torch.float32, device=q.device)
    for s in range(len(cu_q) - 1):
        q0, q1, k0, k1, off = int(cu_q[s]), int(cu_q[s + 1]), int(cu_k[s]), int(cu_k[s + 1]), int(offsets[s])
        lk = k1 - k0
        if q1 == q0 or lk == 0:
            continue
        per_query = 10 * H * lk  # bf16 logits + two float32 copies
        step = max(1, min(q1 - q0, budget_bytes // per_query))
        for a in range(q0, q1, step):
            b = min(q1, a + step)
            nk = min(off + (b - q0), lk)  # keys visible to the block's last query
            if nk <= 0:
                continue
            logits = torch.einsum("thd,jd->thj", q[a:b], k[k0:k0 + nk])
            s_ = (logits.float().relu_() * w[a:b, :, None]).sum(dim=1)
            pos = off + torch.arange(a - q0, b - q0, device=s_.device)
            s_.masked_fill_(torch.arange(nk, device=s_.device)[None, :] > pos[:, None], float("-inf"))
            kk = min(topk, nk)
            v, i = torch.topk(s_, kk, dim=1)
            i = torch.where(torch.isneginf(v), torch.full_like(i, -1), i + k0)
            sc[a:b, :kk] = v
            idx[a:b, :kk] = i.to(torch.int32)
    return idx, sc


def dsa_peer_call(q, k, w, topk: int, layout, stream, *, budget_bytes: int = 2 << 30):
    """A callable running ``torch_dsa_topk`` on the CuPy arrays ``q``, ``k``, ``w`` (DLPack views) on ``stream``."""
    torch = _torch()
    tq_, tk_, tw_ = to_torch(q), to_torch(k), to_torch(w)
    ts = torch_stream(stream)
    cq = [int(v) for v in layout.cu_seqlens_q]
    ck = [int(v) for v in layout.cu_seqlens_k]
    offs = [int(v) for v in layout.q_causal_offsets]

    def call():
        with torch.cuda.stream(ts):
            return torch_dsa_topk(tq_, tk_, tw_, topk, cq, ck, offs, budget_bytes=budget_bytes)

    return call


def check_rows(T: int, n: int = 96) -> np.ndarray:
    """Query rows the cross-check reads: spread over [0, T), first and last included."""
    if T <= n:
        return np.arange(T)
    return np.unique(np.concatenate([np.linspace(0, T - 1, n - 2).round().astype(np.int64), [0, T - 1]]))


def check_dsa(ours_idx, ours_sc, peer_idx, peer_sc, layout, *, min_overlap: float = 0.9,
              score_tol: float = 5e-2) -> dict:
    """Cross-check on host arrays of the sampled rows (``ours_*`` / ``peer_*``: [rows, topk], with
    ``layout`` and the row numbers in ``rows`` key). Exact on causality and counts, tolerant on the chosen
    set (the peer rounds each head dot product to bf16, so near-threshold keys may differ)."""
    rows = layout["rows"]
    overlaps, worst, problems = [], 0.0, []
    for r_i, t in enumerate(rows):
        seg = int(np.searchsorted(layout["cu_q"], t, side="right") - 1)
        k0, k1 = int(layout["cu_k"][seg]), int(layout["cu_k"][seg + 1])
        p = int(layout["offsets"][seg]) + (t - int(layout["cu_q"][seg]))
        visible = max(0, min(p + 1, k1 - k0))
        want = min(visible, ours_idx.shape[1])
        oi = ours_idx[r_i]
        valid = oi[oi >= 0]
        if valid.size != want:
            problems.append(f"row {t}: {valid.size} ids, expected {want}")
        if valid.size and (valid.min() < k0 or valid.max() > k0 + p):
            problems.append(f"row {t}: id outside the visible keys {k0}..{k0 + p}")
        if valid.size and np.any(np.diff(valid) <= 0):
            problems.append(f"row {t}: ids not ascending")
        pi = peer_idx[r_i]
        pv = set(int(v) for v in pi[pi >= 0])
        if valid.size:
            common = [j for j in valid.tolist() if j in pv]
            overlaps.append(len(common) / valid.size)
            om = dict(zip(valid.tolist(), ours_sc[r_i][oi >= 0].tolist()))
            pm = dict(zip(pi[pi >= 0].tolist(), peer_sc[r_i][pi >= 0].tolist()))
            scale = max(1e-6, max(abs(v) for v in om.values()))
            for j in common:
                worst = max(worst, abs(om[j] - pm[j]) / scale)
    out = {"rows_checked": int(len(rows)), "overlap_mean": float(np.mean(overlaps)) if overlaps else 1.0,
           "overlap_min": float(np.min(overlaps)) if overlaps else 1.0, "score_max_rel_diff": float(worst),
           "min_overlap": min_overlap, "score_tolerance": score_tol, "problems": problems[:5]}
    out["ok"] = not problems and out["overlap_mean"] >= min_overlap and worst <= score_tol
    return out
