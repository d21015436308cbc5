"""Float64 NumPy reference of the deterministic DSA indexer top-k (spec: shared/spec/dsa_indexer.md).

    score(t, j) = sum_h weights[t, h] * fmax(0, dot(q[t, h, :], k[j, :]))

over the keys ``j`` that query ``t`` sees (its segment's keys, causally limited when ``causal``),
then the exact selection rule: the ``topk`` largest scores, ties to the larger key id, NaN below
every number (and equal to each other), -0.0 == 0.0; each row in ascending id, padded with
id -1 / score -inf.

Everything here is host NumPy; it is slow on purpose-free big shapes and meant for tests.
"""
from __future__ import annotations

import numpy as np


def _as_np(x):
    if hasattr(x, "get"):  # CuPy
        x = x.get()
    return np.asarray(x)


def normalize_segments(T, Tkv, cu_seqlens_q=None, cu_seqlens_k=None, q_causal_offsets=None, causal=True):
    """Segment arrays (int64): cu_q [S+1], cu_k [S+1], offsets [S] (default len_k - len_q per segment).

    No validation beyond what the math needs (the op validates its arguments itself).
    """
    if cu_seqlens_q is None:
        cu_q = np.array([0, T], dtype=np.int64)
        cu_k = np.array([0, Tkv], dtype=np.int64)
    else:
        cu_q = _as_np(cu_seqlens_q).astype(np.int64)
        cu_k = _as_np(cu_seqlens_k).astype(np.int64)
    lq = np.diff(cu_q)
    lk = np.diff(cu_k)
    if q_causal_offsets is None:
        off = lk - lq
    else:
        off = _as_np(q_causal_offsets).astype(np.int64)
    return cu_q, cu_k, off


def visible_key_ranges(T, Tkv, cu_seqlens_q=None, cu_seqlens_k=None, q_causal_offsets=None, causal=True):
    """Per query t: the half-open global key range [start[t], end[t]) it sees (int64 arrays of length T)."""
    cu_q, cu_k, off = normalize_segments(T, Tkv, cu_seqlens_q, cu_seqlens_k, q_causal_offsets, causal)
    start = np.zeros(T, dtype=np.int64)
    end = np.zeros(T, dtype=np.int64)
    for s in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[s], cu_q[s + 1], cu_k[s], cu_k[s + 1]
        lenk = k1 - k0
        i = np.arange(q1 - q0, dtype=np.int64)
        if causal:
            n = np.clip(off[s] + i + 1, 0, lenk)
        else:
            n = np.full(q1 - q0, lenk, dtype=np.int64)
        start[q0:q1] = k0
        end[q0:q1] = k0 + n
    return start, end


def dsa_scores_reference(q, k, weights, *, with_scale=False):
    """Dense float64 scores [T, Tkv] (every pair, no mask); with ``with_scale`` also the magnitude
    ``sum_h |w| * sum_d |q k|`` of each score (for float32 error bounds)."""
    q = _as_np(q).astype(np.float64)
    k = _as_np(k).astype(np.float64)
    w = _as_np(weights).astype(np.float64)
    T, H, D = q.shape
    Tkv = k.shape[0]
    scores = np.empty((T, Tkv), dtype=np.float64)
    scale = np.empty((T, Tkv), dtype=np.float64) if with_scale else None
    step = max(1, (1 << 22) // max(1, H * Tkv))  # bound the [step, H, Tkv] temporaries
    kt, akt = k.T, np.abs(k).T
    with np.errstate(invalid="ignore", over="ignore"):
        for t0 in range(0, T, step):
            t1 = min(T, t0 + step)
            dots = q[t0:t1] @ kt                                   # [c, H, Tkv]
            scores[t0:t1] = np.einsum("th,thj->tj", w[t0:t1], np.fmax(dots, 0.0))
            if with_scale:
                scale[t0:t1] = np.einsum("th,thj->tj", np.abs(w[t0:t1]), np.abs(q[t0:t1]) @ akt)
    return (scores, scale) if with_scale else scores


def select_topk_reference(scores, start, end, topk):
    """Exact selection of one row set: per row t, among keys start[t] <= j < end[t], the ``topk``
    largest scores[t, j] (NaN lowest, ties to the larger j), returned in ascending j with padding.

    Returns (indices int32 [T, topk], values float64 [T, topk]).
    """
    scores = np.asarray(scores, dtype=np.float64)
    T = scores.shape[0]
    idx = np.full((T, topk), -1, dtype=np.int32)
    val = np.full((T, topk), -np.inf, dtype=np.float64)
    for t in range(T):
        j = np.arange(start[t], end[t], dtype=np.int64)
        if j.size == 0:
            continue
        s = scores[t, j]
        nan = np.isnan(s)
        filled = np.where(nan, -np.inf, s) + 0.0  # + 0.0 folds -0.0 onto 0.0
        # lexsort: last key is primary. Descending by (not NaN, score, id) == ascending by the negations.
        order = np.lexsort((-j, -filled, nan.astype(np.int8)))
        chosen = np.sort(j[order[:topk]])
        idx[t, : chosen.size] = chosen
        val[t, : chosen.size] = scores[t, chosen]
    return idx, val


def dsa_indexer_reference(q, k, weights, topk, *, cu_seqlens_q=None, cu_seqlens_k=None, q_causal_offsets=None,
                          causal=True):
    """Reference (indices int32 [T, topk], scores float64 [T, topk]) of the whole op."""
    q = _as_np(q)
    k = _as_np(k)
    T, Tkv = q.shape[0], k.shape[0]
    start, end = visible_key_ranges(T, Tkv, cu_seqlens_q, cu_seqlens_k, q_causal_offsets, causal)
    scores = dsa_scores_reference(q, k, weights)
    return select_topk_reference(scores, start, end, topk)
