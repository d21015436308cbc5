"""Float64 NumPy reference of the Mamba2 SSD combined prefill (spec: ssd_combined.md, "Math").

    dt'   = clamp(softplus?(dt + dt_bias), lo, hi)        softplus(v) = log1p(exp(v)), v for v > 20
    h_t   = exp(dt'_t * A_h) * h_{t-1} + dt'_t * outer(x_t, B_t)        h: [headdim, dstate]
    y_t   = h_t @ C_t + D_h * x_t
    y_t  *= z_t * sigmoid(z_t)                                          when z is given

Two formulations of the same math:

- ``ssd_reference``: the per-token recurrence above, token by token (the definition).
- ``ssd_reference_chunked``: the chunked matrix form (intra-chunk ``(C B^T * L) X``, chunk states
  ``X^T (decay * B)``, the cross-chunk recurrence, the inter-chunk term ``exp(dA) C S_prev``), used
  by the CPU tests to cross-check the first one.

Both take host arrays of any float dtype, compute in float64 and return float64 arrays.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["ssd_reference", "ssd_reference_chunked", "reference_segments", "preprocess_dt"]


def _f64(a):
    return None if a is None else np.asarray(a).astype(np.float64)


def preprocess_dt(dt, dt_bias=None, dt_softplus=False, dt_limit=(0.0, math.inf)):
    """dt' = clamp(softplus?(dt + dt_bias), lo, hi); the clamp applies only when dt_limit != (0, inf).

    dt: [..., nheads]; dt_bias: [nheads] or None.  Returns float64 of dt's shape.
    """
    v = _f64(dt)
    if dt_bias is not None:
        v = v + _f64(dt_bias)
    if dt_softplus:
        with np.errstate(over="ignore"):
            v = np.where(v > 20.0, v, np.log1p(np.exp(np.minimum(v, 20.0))))
    lo, hi = float(dt_limit[0]), float(dt_limit[1])
    if (lo, hi) != (0.0, math.inf):
        v = np.clip(v, lo, hi)
    return v


def reference_segments(batch, seqlen, seq_idx=None, cu_seqlens=None):
    """Segments as (row, start, end, init_index or -1, is_last_of_row), in order.

    With cu_seqlens (batch == 1): one segment per sequence (possibly empty), init index = sequence.
    Otherwise each row is split into runs of equal seq_idx (or is one run); the first run of row b
    starts from initial_states[b], later runs from zeros.
    """
    segs = []
    if cu_seqlens is not None:
        cu = np.asarray(cu_seqlens).astype(np.int64)
        n = len(cu) - 1
        for s in range(n):
            segs.append((0, int(cu[s]), int(cu[s + 1]), s, s == n - 1))
        return segs
    for b in range(batch):
        if seq_idx is None or seqlen == 0:
            segs.append((b, 0, seqlen, b, True))
            continue
        row = np.asarray(seq_idx)[b]
        starts = [0] + [t for t in range(1, seqlen) if row[t] != row[t - 1]]
        ends = starts[1:] + [seqlen]
        for k, (s0, s1) in enumerate(zip(starts, ends)):
            segs.append((b, s0, s1, b if k == 0 else -1, k == len(starts) - 1))
    return segs


def _prepare(x, dt, A, B, C, D, z, dt_bias, dt_softplus, dt_limit):
    x = _f64(x)
    b_, L, H, P = x.shape
    G = np.asarray(B).shape[2]
    rep = H // G
    Bh = np.repeat(_f64(B), rep, axis=2)  # [b, L, H, N]: head h uses group h // (H // G)
    Ch = np.repeat(_f64(C), rep, axis=2)
    dtp = preprocess_dt(dt, dt_bias, dt_softplus, dt_limit)  # [b, L, H]
    A = _f64(A)
    if D is None:
        Dm = np.zeros((H, P))
    else:
        Dm = _f64(D)
        Dm = np.broadcast_to(Dm[:, None], (H, P)) if Dm.ndim == 1 else Dm
    return x, Bh, Ch, dtp, A, Dm, _f64(z)


def _finish(y, z, finals, varlens, ckpts, return_final_states, return_varlen_states, return_chunk_states):
    if z is not None:
        y = y * (z / (1.0 + np.exp(-z)))
    outs = [y]
    if return_final_states:
        outs.append(finals)
    if return_varlen_states:
        outs.append(varlens)
    if return_chunk_states:
        outs.append(ckpts)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _begin(x, dt, A, B, C, D, z, dt_bias, dt_softplus, dt_limit, initial_states, seq_idx, cu_seqlens):
    """What both formulations start from: float64 inputs, segments and zeroed result buffers."""
    x, Bh, Ch, dtp, A, Dm, z = _prepare(x, dt, A, B, C, D, z, dt_bias, dt_softplus, dt_limit)
    b_, L, H, P = x.shape
    N = Bh.shape[-1]
    segs = reference_segments(b_, L, seq_idx, cu_seqlens)
    return (x, Bh, Ch, dtp, A, Dm, z, _f64(initial_states), segs, np.zeros_like(x), np.zeros((b_, H, P, N)),
            np.zeros((len(segs), H, P, N)), [], H, P, N)


def ssd_reference(x, dt, A, B, C, chunk_size, *, D=None, z=None, dt_bias=None, initial_states=None,
                  seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, math.inf),
                  return_final_states=False, return_varlen_states=False, return_chunk_states=False):
    """Per-token recurrence, float64 (the definition).  Shapes as ``cake_rt.ssd_combined``:

    x: [batch, seqlen, nheads, headdim]; dt: [batch, seqlen, nheads]; A: [nheads];
    B, C: [batch, seqlen, ngroups, dstate]; D: [nheads] or [nheads, headdim]; z: like x;
    dt_bias: [nheads]; initial_states: [batch or nseq, nheads, headdim, dstate];
    seq_idx: [batch, seqlen]; cu_seqlens: [nseq + 1] (batch == 1).
    Returns y or (y, final_states?, varlen_states?, chunk_states?) in float64.
    """
    (x, Bh, Ch, dtp, A, Dm, z, init, segs, y, finals, varlens, ckpts, H, P, N) = _begin(
        x, dt, A, B, C, D, z, dt_bias, dt_softplus, dt_limit, initial_states, seq_idx, cu_seqlens)
    for si, (b, s0, s1, ii, last) in enumerate(segs):
        h = init[ii].copy() if (init is not None and ii >= 0) else np.zeros((H, P, N))
        for t in range(s0, s1):
            dA = np.exp(dtp[b, t] * A)  # [H]
            h = dA[:, None, None] * h + (dtp[b, t][:, None] * x[b, t])[:, :, None] * Bh[b, t][:, None, :]
            y[b, t] = np.einsum("hpn,hn->hp", h, Ch[b, t]) + Dm * x[b, t]
            if (t - s0 + 1) % chunk_size == 0:
                ckpts.append(h.copy())
        varlens[si] = h
        if last:
            finals[b] = h
    ck = np.stack(ckpts) if ckpts else np.zeros((0, H, P, N))
    return _finish(y, z, finals, varlens, ck, return_final_states, return_varlen_states, return_chunk_states)


def ssd_reference_chunked(x, dt, A, B, C, chunk_size, *, D=None, z=None, dt_bias=None, initial_states=None,
                          seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, math.inf),
                          return_final_states=False, return_varlen_states=False, return_chunk_states=False):
    """Chunked matrix form, float64 (same arguments and results as ``ssd_reference``).

    Per chunk of a segment (tokens t, s in the chunk, cs = inclusive cumsum of dt'*A in the chunk):
        y      = (C B^T * L) X + exp(cs) * (C S_prev^T) + D x,  L[t, s] = exp(cs_t - cs_s) dt'_s, s <= t
        S_loc  = X^T (exp(cs_last - cs) dt' * B)
        S      = exp(cs_last) * S_prev + S_loc
    """
    (x, Bh, Ch, dtp, A, Dm, z, init, segs, y, finals, varlens, ckpts, H, P, N) = _begin(
        x, dt, A, B, C, D, z, dt_bias, dt_softplus, dt_limit, initial_states, seq_idx, cu_seqlens)
    for si, (b, s0, s1, ii, last) in enumerate(segs):
        S = init[ii].copy() if (init is not None and ii >= 0) else np.zeros((H, P, N))
        for c0 in range(s0, s1, chunk_size):
            c1 = min(c0 + chunk_size, s1)
            X = x[b, c0:c1]                     # [l, H, P]
            Bc, Cc, dtc = Bh[b, c0:c1], Ch[b, c0:c1], dtp[b, c0:c1]   # [l, H, N], [l, H]
            cs = np.cumsum(dtc * A, axis=0)     # [l, H]
            seg = cs[:, None, :] - cs[None, :, :]            # [t, s, H]
            causal = np.tril(np.ones((c1 - c0, c1 - c0), dtype=bool))[:, :, None]
            Lm = np.where(causal, np.exp(np.where(causal, seg, 0.0)), 0.0) * dtc[None, :, :]
            CB = np.einsum("thn,shn->tsh", Cc, Bc)
            Y = np.einsum("tsh,shp->thp", CB * Lm, X)
            Y += np.exp(cs)[:, :, None] * np.einsum("thn,hpn->thp", Cc, S)
            y[b, c0:c1] = Y + Dm[None] * X
            w = np.exp(cs[-1][None, :] - cs) * dtc           # [l, H]
            Sloc = np.einsum("shp,shn->hpn", X, w[:, :, None] * Bc)
            S = np.exp(cs[-1])[:, None, None] * S + Sloc
            if c1 - c0 == chunk_size:
                ckpts.append(S.copy())
        varlens[si] = S
        if last:
            finals[b] = S
    ck = np.stack(ckpts) if ckpts else np.zeros((0, H, P, N))
    return _finish(y, z, finals, varlens, ck, return_final_states, return_varlen_states, return_chunk_states)
