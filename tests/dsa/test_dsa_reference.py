"""CPU tests of the float64 reference (cake_rt.reference.dsa) against brute force written another way."""
import functools
import math

import numpy as np
import pytest

from cake_rt.reference import dsa as ref


def _brute_scores(q, k, w, t, j):
    """score(t, j) with Python floats, one term at a time."""
    s = 0.0
    for h in range(q.shape[1]):
        d = sum(float(a) * float(b) for a, b in zip(q[t, h], k[j]))
        r = 0.0 if (d != d or d <= 0.0) else d  # fmax(0, d): NaN -> 0
        s += float(w[t, h]) * r
    return s


def _brute_visible(T, Tkv, cu_q, cu_k, off, causal):
    """Visible key set per query from the segment definition, by enumeration."""
    vis = []
    S = len(cu_q) - 1
    for t in range(T):
        s = next(i for i in range(S) if cu_q[i] <= t < cu_q[i + 1])
        i = t - cu_q[s]
        keys = []
        for jl in range(cu_k[s + 1] - cu_k[s]):
            if not causal or jl <= off[s] + i:
                keys.append(cu_k[s] + jl)
        vis.append(keys)
    return vis


def _cmp(a, b):
    """Total order of (score, id): NaN lowest and equal to each other; then larger id first."""
    (sa, ja), (sb, jb) = a, b
    na, nb = math.isnan(sa), math.isnan(sb)
    if na != nb:
        return -1 if na else 1
    if not na and sa != sb:
        return -1 if sa < sb else 1
    return (ja > jb) - (ja < jb)


def _brute_select(row_scores, keys, topk):
    cands = sorted(((row_scores[j], j) for j in keys), key=functools.cmp_to_key(_cmp), reverse=True)
    chosen = sorted(j for _, j in cands[:topk])
    idx = chosen + [-1] * (topk - len(chosen))
    return idx


def _rand_problem(rng, T, Tkv, H, D):
    q = rng.standard_normal((T, H, D)).astype(np.float32)
    k = rng.standard_normal((Tkv, D)).astype(np.float32)
    w = rng.standard_normal((T, H)).astype(np.float32)
    return q, k, w


def test_scores_match_brute_force():
    rng = np.random.default_rng(1)
    q, k, w = _rand_problem(rng, 5, 7, 3, 4)
    s = ref.dsa_scores_reference(q, k, w)
    for t in range(5):
        for j in range(7):
            assert s[t, j] == pytest.approx(_brute_scores(q, k, w, t, j), rel=1e-12, abs=1e-12)


def test_scores_nan_dot_contributes_zero_and_nan_weight_poisons():
    q = np.ones((2, 2, 2), np.float32)
    k = np.array([[np.nan, 1.0], [1.0, 1.0]], np.float32)
    w = np.array([[1.0, 2.0], [np.nan, 1.0]], np.float32)
    s = ref.dsa_scores_reference(q, k, w)
    assert s[0, 0] == 0.0           # NaN dots -> fmax(0, NaN) = 0
    assert s[0, 1] == 6.0
    assert np.isnan(s[1, 0]) and np.isnan(s[1, 1])  # NaN weight * 0 = NaN


@pytest.mark.parametrize("causal", [True, False])
def test_visible_ranges_match_enumeration(causal):
    cu_q = [0, 3, 3, 10, 12]
    cu_k = [0, 5, 9, 9, 20]
    off = None if not causal else [2, 0, -1, -3]
    T, Tkv = 12, 20
    start, end = ref.visible_key_ranges(T, Tkv, cu_q, cu_k, off, causal)
    offs = off if off is not None else list(np.diff(cu_k) - np.diff(cu_q))
    vis = _brute_visible(T, Tkv, cu_q, cu_k, offs, causal)
    for t in range(T):
        assert list(range(start[t], end[t])) == vis[t]


def test_default_offsets_are_bottom_right():
    start, end = ref.visible_key_ranges(3, 10, None, None, None, True)
    assert end.tolist() == [8, 9, 10] and start.tolist() == [0, 0, 0]


@pytest.mark.parametrize("seed", range(6))
def test_selection_matches_brute_force_random(seed):
    rng = np.random.default_rng(100 + seed)
    T, Tkv, H, D = 9, 40, 2, 3
    q, k, w = _rand_problem(rng, T, Tkv, H, D)
    cu_q, cu_k = [0, 4, 9], [0, 15, 40]
    off = [int(rng.integers(-3, 15)), int(rng.integers(-3, 25))]
    topk = int(rng.integers(1, 30))
    idx, val = ref.dsa_indexer_reference(q, k, w, topk, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                         q_causal_offsets=off)
    s = ref.dsa_scores_reference(q, k, w)
    vis = _brute_visible(T, Tkv, cu_q, cu_k, off, True)
    for t in range(T):
        assert idx[t].tolist() == _brute_select(s[t], vis[t], topk)
        for c, j in enumerate(idx[t]):
            if j < 0:
                assert val[t, c] == -np.inf
            else:
                assert val[t, c] == s[t, j]


def test_large_exact_tie_plateau_goes_to_larger_ids():
    rng = np.random.default_rng(7)
    T, Tkv, H, D = 4, 300, 4, 8
    q = np.abs(rng.standard_normal((T, H, D))).astype(np.float32)
    k = rng.standard_normal((Tkv, D)).astype(np.float32)
    neg = rng.random(Tkv) < 0.8
    k[neg] = -np.abs(k[neg])  # every dot <= 0: score exactly 0.0
    w = np.abs(rng.standard_normal((T, H))).astype(np.float32)
    topk = 150
    idx, val = ref.dsa_indexer_reference(q, k, w, topk, causal=False)
    s = ref.dsa_scores_reference(q, k, w)
    npos = int((s[0] > 0).sum())
    assert npos < topk < Tkv  # the boundary is inside the plateau of exact zeros
    for t in range(T):
        assert idx[t].tolist() == _brute_select(s[t], list(range(Tkv)), topk)
        zeros_chosen = [j for j in idx[t] if s[t, j] == 0.0]
        zeros_all = np.flatnonzero(s[t] == 0.0)
        assert zeros_chosen == sorted(zeros_all)[-len(zeros_chosen):]  # the largest ids of the plateau


def test_nan_ranks_lowest_and_ties_among_nans_to_larger_id():
    scores = np.array([[np.nan, 1.0, np.nan, -np.inf, np.nan, -0.0, 0.0]])
    idx, val = ref.select_topk_reference(scores, np.array([0]), np.array([7]), 5)
    # numbers first: 1.0 (1), 0.0 and -0.0 tie -> both (5, 6), -inf (3); then one NaN: the largest id (4)
    assert idx[0].tolist() == [1, 3, 4, 5, 6]
    idx, _ = ref.select_topk_reference(scores, np.array([0]), np.array([7]), 2)
    assert idx[0].tolist() == [1, 6]  # -0.0 == 0.0: the larger id wins
    assert _brute_select(scores[0], range(7), 5) == [1, 3, 4, 5, 6]


def test_padding_when_topk_exceeds_visible():
    rng = np.random.default_rng(3)
    q, k, w = _rand_problem(rng, 3, 5, 2, 4)
    idx, val = ref.dsa_indexer_reference(q, k, w, 8, q_causal_offsets=[-2], cu_seqlens_q=[0, 3],
                                         cu_seqlens_k=[0, 5])
    assert idx[0].tolist() == [-1] * 8  # p = -2: sees nothing
    assert idx[1].tolist() == [-1] * 8  # p = -1: sees nothing
    assert idx[2].tolist() == [0] + [-1] * 7
    assert np.all(val[0] == -np.inf)
