"""The float64 DSA reference (``cake_rt.reference.dsa``) against an implementation written from the contract's text
alone (shared/spec/dsa_indexer.md, "Math", "Segments and causality", "Output"), on fresh random inputs and on the
adversarial rows of the selection rule: exact ties and all-equal rows, ascending scores, NaN, -0.0, -inf, negative
offsets, empty segments, topk past the visible keys.

The GPU tests compare the kernels with ``cake_rt.reference``: a misreading shared by both (the causal window off by
one, ties to the smaller id, NaN above -inf, the padding) would pass every one of them. ``spec_indexer`` below shares
no code with the reference: Python loops over (query, key), a visibility test per key, a sort on a Python key.
"""
import math

import numpy as np
import pytest

from cake_rt.ops.dsa import _visible_counts, visible_pairs
from cake_rt.reference.dsa import (dsa_indexer_reference, dsa_scores_reference, select_topk_reference,
                                   visible_key_ranges)


# ------------------------------------------------------------------------------------------------------------------
# The contract, written out
def spec_score(q, k, w, t, j):
    """sum_h weights[t, h] * fmax(0, dot(q[t, h], k[j])), in float64 (exact for bf16-sized random inputs)."""
    total = 0.0
    for h in range(q.shape[1]):
        with np.errstate(invalid="ignore"):  # inf * 0 inside a dot: a NaN dot, which the rule maps to 0
            d = float(np.dot(q[t, h].astype(np.float64), k[j].astype(np.float64)))
        relu = 0.0 if (math.isnan(d) or d < 0.0) else d  # IEEE fmaxf(0, NaN) = 0
        total += float(w[t, h]) * relu
    return total


def spec_sees(s_local_q, s_local_k, len_k, offset, causal):
    """Query i of a segment sits at p = offset + i and sees local keys 0 .. min(p, len_k - 1)."""
    if not causal:
        return True
    return s_local_k <= min(offset + s_local_q, len_k - 1)


def spec_rank_key(score, j):
    """Larger is better: a number above every NaN, then the score (-0.0 == 0.0), then the larger id."""
    if math.isnan(score):
        return (0, 0.0, j)
    return (1, score + 0.0, j)


def spec_indexer(q, k, w, topk, cu_q=None, cu_k=None, offsets=None, causal=True):
    T, Tkv = q.shape[0], k.shape[0]
    if cu_q is None:
        cu_q, cu_k = [0, T], [0, Tkv]
    S = len(cu_q) - 1
    idx = np.full((T, topk), -1, np.int64)
    val = np.full((T, topk), -np.inf)
    for s in range(S):
        len_q, len_k = cu_q[s + 1] - cu_q[s], cu_k[s + 1] - cu_k[s]
        off = (len_k - len_q) if offsets is None else int(offsets[s])  # bottom-right aligned by default
        for i in range(len_q):
            t = cu_q[s] + i
            cands = []
            for jl in range(len_k):
                if spec_sees(i, jl, len_k, off, causal):
                    j = cu_k[s] + jl
                    cands.append((spec_score(q, k, w, t, j), j))
            cands.sort(key=lambda c: spec_rank_key(*c), reverse=True)
            chosen = sorted(cands[:topk], key=lambda c: c[1])  # ascending key id in the row
            for n, (sc, j) in enumerate(chosen):
                idx[t, n], val[t, n] = j, sc
    return idx, val


def assert_same(got, want):
    (gi, gv), (wi, wv) = got, want
    assert gi.dtype == np.int32 and gi.shape == wi.shape
    assert np.array_equal(gi, wi), np.argwhere(gi != wi)[:5]
    assert gv.shape == wv.shape
    both_nan = np.isnan(gv) & np.isnan(wv)
    assert np.array_equal(np.isnan(gv), np.isnan(wv))
    assert np.allclose(gv[~both_nan], wv[~both_nan], rtol=1e-12, atol=1e-12)


def bf16_exact(a):
    """Round float32 values to bf16-representable ones (the op's inputs are bf16)."""
    b = np.asarray(a, np.float32).view(np.uint32)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.view(np.float32)


def rand(rng, T, Tkv, H, D):
    q = bf16_exact(rng.standard_normal((T, H, D)))
    k = bf16_exact(rng.standard_normal((Tkv, D)))
    w = (rng.standard_normal((T, H)) * H ** -0.5).astype(np.float32)
    return q, k, w


def ref(q, k, w, topk, cu_q=None, cu_k=None, off=None, causal=True):
    return dsa_indexer_reference(q, k, w, topk, cu_seqlens_q=None if cu_q is None else np.asarray(cu_q, np.int32),
                                 cu_seqlens_k=None if cu_k is None else np.asarray(cu_k, np.int32),
                                 q_causal_offsets=None if off is None else np.asarray(off, np.int32), causal=causal)


# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("topk", [1, 5, 17, 40])
@pytest.mark.parametrize("causal", [True, False])
def test_random_single_segment(topk, causal):
    rng = np.random.default_rng(topk * 2 + causal)
    q, k, w = rand(rng, 13, 29, 8, 16)
    assert_same(ref(q, k, w, topk, causal=causal), spec_indexer(q, k, w, topk, causal=causal))


def test_scores_match_the_formula_including_nan_dots_and_nan_weights():
    rng = np.random.default_rng(3)
    q, k, w = rand(rng, 5, 7, 8, 4)
    q[1, 2, 0] = np.nan           # a NaN dot product contributes 0
    k[3, 1] = np.inf
    q[2, :, 1] = 0.0              # inf * 0 inside a dot: NaN dot, contributes 0
    w[4, 3] = np.nan              # a NaN weight poisons the row's scores
    got = dsa_scores_reference(q, k, w)
    for t in range(5):
        for j in range(7):
            want = spec_score(q, k, w, t, j)
            g = got[t, j]
            assert (math.isnan(want) and math.isnan(g)) or g == pytest.approx(want, rel=1e-12, abs=1e-12), (t, j)


SEGMENT_CASES = [
    # (len_q per segment, len_k per segment, offsets or None, causal)
    ([3, 0, 5, 4], [6, 4, 5, 0], None, True),            # an empty query segment, a segment with no keys
    ([4, 4], [10, 3], [2, -1], True),                     # offsets inside, and one before the first key
    ([6], [6], [-3], True),                               # the first queries see nothing: all-padding rows
    ([3, 2], [4, 4], [7, 0], True),                       # offsets past the last key: everything visible
    ([5, 3, 2], [7, 0, 6], None, False),                  # non-causal: the whole segment
    ([9], [4], None, True),                               # len_q > len_k: default offset negative
]


@pytest.mark.parametrize("case", SEGMENT_CASES)
@pytest.mark.parametrize("topk", [1, 3, 8])
def test_segments_offsets_and_padding(case, topk):
    lq, lk, off, causal = case
    rng = np.random.default_rng(sum(lq) * 31 + sum(lk) + topk)
    cu_q = [0] + np.cumsum(lq).tolist()
    cu_k = [0] + np.cumsum(lk).tolist()
    q, k, w = rand(rng, cu_q[-1], cu_k[-1], 8, 8)
    want = spec_indexer(q, k, w, topk, cu_q, cu_k, off, causal)
    assert_same(ref(q, k, w, topk, cu_q, cu_k, off, causal), want)


@pytest.mark.parametrize("case", SEGMENT_CASES)
def test_visible_ranges_and_the_ops_counts(case):
    """The reference's windows and the op's visible counts (what it plans its work by) against the contract."""
    lq, lk, off, causal = case
    cu_q = np.array([0] + np.cumsum(lq).tolist(), np.int32)
    cu_k = np.array([0] + np.cumsum(lk).tolist(), np.int32)
    start, end = visible_key_ranges(int(cu_q[-1]), int(cu_k[-1]), cu_q, cu_k,
                                    None if off is None else np.array(off, np.int32), causal)
    total = 0
    for s in range(len(lq)):
        o = (lk[s] - lq[s]) if off is None else off[s]
        counts = _visible_counts(lq[s], lk[s], o, causal)
        for i in range(lq[s]):
            t = int(cu_q[s]) + i
            keys = [int(cu_k[s]) + jl for jl in range(lk[s]) if spec_sees(i, jl, lk[s], o, causal)]
            assert list(range(start[t], end[t])) == keys, (s, i)
            assert int(counts[i]) == len(keys), (s, i)
            total += len(keys)
    assert visible_pairs(cu_q, cu_k, None if off is None else np.array(off, np.int32), causal) == total


# ------------------------------------------------------------------------------------------------------------------
# The selection rule on constructed score rows (select_topk_reference takes scores directly)
def select_both(scores, topk, start=None, end=None):
    T, n = scores.shape
    start = np.zeros(T, np.int64) if start is None else start
    end = np.full(T, n, np.int64) if end is None else end
    got = select_topk_reference(scores, start, end, topk)
    idx = np.full((T, topk), -1, np.int64)
    val = np.full((T, topk), -np.inf)
    for t in range(T):
        cands = sorted(((float(scores[t, j]), j) for j in range(start[t], end[t])),
                       key=lambda c: spec_rank_key(*c), reverse=True)
        for m, (sc, j) in enumerate(sorted(cands[:topk], key=lambda c: c[1])):
            idx[t, m], val[t, m] = j, sc
    return got, (idx, val)


@pytest.mark.parametrize("topk", [1, 4, 10, 25])
def test_ties_all_equal_ascending_descending_nan_and_signed_zero(topk):
    n = 20
    rows = [
        np.zeros(n),                                         # all equal: the topk largest ids
        np.arange(n, dtype=np.float64),                      # ascending: the last ids
        np.arange(n, 0, -1, dtype=np.float64),               # descending: the first ids
        np.where(np.arange(n) % 3 == 0, 1.0, 0.0),           # a plateau with a few winners
        np.where(np.arange(n) % 2 == 0, -0.0, 0.0),          # -0.0 == 0.0: ties to the larger id
        np.where(np.arange(n) < 15, np.nan, -np.inf),        # -inf above NaN
        np.where(np.arange(n) % 4 == 0, 2.0, np.nan),        # NaN chosen only when nothing else is left
        np.full(n, np.nan),                                  # NaN equal to each other: larger ids
        np.where(np.arange(n) % 5 == 1, np.inf, -1.0),       # +inf and negative scores
        np.where(np.arange(n) < 10, -3.0, -3.0 - 2 ** -40),  # a gap far below float32 resolution
    ]
    scores = np.stack(rows)
    got, want = select_both(scores, topk)
    assert_same(got, want)
    assert np.array_equal(got[0][0, :min(topk, n)], np.arange(n - min(topk, n), n))


def test_random_rows_with_windows_and_many_ties():
    rng = np.random.default_rng(9)
    T, n = 40, 30
    scores = rng.integers(-2, 3, (T, n)).astype(np.float64)  # few distinct values: ties everywhere
    scores[rng.random((T, n)) < 0.1] = np.nan
    scores[rng.random((T, n)) < 0.1] = -0.0
    start = rng.integers(0, n, T)
    end = np.minimum(n, start + rng.integers(0, n, T))
    for topk in (1, 7, 31):
        got, want = select_both(scores, topk, start, end)
        assert_same(got, want)


def test_zero_plateau_from_all_negative_dots():
    """Keys whose head dots are all <= 0 score exactly 0: the plateau goes to the larger ids."""
    rng = np.random.default_rng(10)
    T, Tkv, H, D = 4, 24, 8, 8
    q = bf16_exact(np.abs(rng.standard_normal((T, H, D))))
    k = bf16_exact(-np.abs(rng.standard_normal((Tkv, D))))          # every dot < 0
    k[[2, 11, 17]] = bf16_exact(np.abs(rng.standard_normal((3, D))))  # three positive keys
    w = np.abs(rng.standard_normal((T, H))).astype(np.float32)
    w[3] = -w[3]  # negative weights: the positive keys score below the zero plateau, and -0.0 == 0.0
    for topk in (2, 5, 30):
        want = spec_indexer(q, k, w, topk, causal=False)
        assert_same(ref(q, k, w, topk, causal=False), want)
    idx, _ = ref(q, k, w, 5, causal=False)
    assert idx[0].tolist() == [2, 11, 17, 22, 23]
    assert idx[3].tolist() == [19, 20, 21, 22, 23]


def test_nan_and_inf_weights_rank_lowest_with_larger_ids_first():
    rng = np.random.default_rng(11)
    q, k, w = rand(rng, 6, 12, 8, 8)
    w[0, 0] = np.nan       # every score NaN: the largest visible ids
    w[1, 2] = np.inf       # inf * 0 on zero-relu keys: NaN there, +inf elsewhere
    w[2, 5] = -np.inf
    for causal in (True, False):
        for topk in (3, 12, 20):
            want = spec_indexer(q, k, w, topk, causal=causal)
            assert_same(ref(q, k, w, topk, causal=causal), want)


def test_duplicate_key_rows_tie_to_the_larger_id():
    rng = np.random.default_rng(12)
    q, k, w = rand(rng, 3, 16, 8, 8)
    k[9] = k[4]
    k[15] = k[4]
    want = spec_indexer(q, k, w, 16, causal=False)
    assert_same(ref(q, k, w, 16, causal=False), want)
    # the key scores identically; with a topk cut inside the tie the larger ids win
    s = dsa_scores_reference(q, k, w)
    for t in range(3):
        row = s[t]
        better = int(np.sum(row > row[4]))
        if better + 1 < 16:
            idx, _ = ref(q[t:t + 1], k, w[t:t + 1], better + 1, causal=False)
            assert 15 in idx[0] and 4 not in idx[0] and 9 not in idx[0]


def test_topk_past_every_key_and_no_keys_at_all():
    rng = np.random.default_rng(13)
    q, k, w = rand(rng, 5, 3, 8, 8)
    for causal in (True, False):
        assert_same(ref(q, k, w, 8, causal=causal), spec_indexer(q, k, w, 8, causal=causal))
    q, k0, w = rand(rng, 4, 0, 8, 8)
    idx, val = ref(q, k0, w, 6)
    assert np.all(idx == -1) and np.all(val == -np.inf)
