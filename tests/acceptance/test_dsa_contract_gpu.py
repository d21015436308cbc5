"""Acceptance checks of the DSA indexer top-k written from the contract alone
(../shared/spec/dsa_indexer.md), independently of the op's own reference and tests.

Exactness trick: q and k hold small integers and the weights are powers of two, so every dot product and
every weighted sum is exact in float32 whatever the summation order — ties are real ties and the chosen
set is fully determined by the contract's tie rule (larger key id wins).
"""
import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def _bf16():
    from cake_rt.interop import BF16

    return BF16


def brute_force(q, k, w, topk, cu_q, cu_k, offsets, causal):
    """float64 scores + the contract's selection: indices (global, ascending), scores, -1/-inf padding."""
    q, k, w = (np.asarray(a, np.float64) for a in (q, k, w))
    T = q.shape[0]
    idx = np.full((T, topk), -1, np.int64)
    sc = np.full((T, topk), -np.inf)
    for s in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[s], cu_q[s + 1], cu_k[s], cu_k[s + 1]
        lenq, lenk = q1 - q0, k1 - k0
        off = (lenk - lenq) if offsets is None else offsets[s]
        for i in range(lenq):
            t = q0 + i
            nvis = lenk if not causal else max(0, min(off + i, lenk - 1) + 1)
            if nvis <= 0:
                continue
            keys = np.arange(k0, k0 + nvis)
            dots = np.einsum("hd,jd->hj", q[t], k[keys])
            with np.errstate(invalid="ignore"):  # an inf weight times a 0 term is NaN, as in float32
                s_t = (w[t][:, None] * np.maximum(dots, 0)).sum(0)
            order = np.lexsort((-keys, -s_t))  # score desc, then larger id first
            chosen = keys[order[:topk]]
            chosen_scores = s_t[order[:topk]]
            o = np.argsort(chosen)
            n = len(chosen)
            idx[t, :n] = chosen[o]
            sc[t, :n] = chosen_scores[o]
    return idx, sc


def _exact_inputs(rng, T, Tkv, H, D):
    q = rng.integers(-3, 4, (T, H, D)).astype(_bf16())
    k = rng.integers(-3, 4, (Tkv, D)).astype(_bf16())
    w = (2.0 ** rng.integers(-3, 3, (T, H)) * rng.choice([-1, 1], (T, H))).astype(np.float32)
    return q, k, w


def _run(q, k, w, topk, **kw):
    import cupy

    import cake_rt

    T = q.shape[0]
    idx = cupy.full((T, topk), 12345, np.int32)  # poisoned
    sc = cupy.full((T, topk), np.nan, np.float32)
    out = cake_rt.dsa_indexer_det_topk(cupy.asarray(q), cupy.asarray(k), cupy.asarray(w), topk, indices=idx,
                                       scores=sc, **kw)
    assert out[0] is idx and out[1] is sc
    return idx.get(), sc.get()


@pytest.mark.parametrize("H,D", [(32, 128), (64, 64), (8, 64), (24, 64), (48, 128), (128, 128)])
def test_packed_segments_with_offsets_exact_ties(H, D):
    rng = np.random.default_rng(H + D)
    lq, lk = [5, 0, 37, 64], [300, 10, 100, 700]
    cu_q = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    offsets = np.array([200, 0, -3, 500], np.int32)  # -3: the first queries of segment 2 see nothing
    q, k, w = _exact_inputs(rng, int(cu_q[-1]), int(cu_k[-1]), H, D)
    topk = 97
    got_i, got_s = _run(q, k, w, topk, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, q_causal_offsets=offsets)
    want_i, want_s = brute_force(q, k, w, topk, cu_q, cu_k, offsets, True)
    assert np.array_equal(got_i, want_i)
    assert np.array_equal(got_s, want_s.astype(np.float32))


def test_zero_plateau_ties_go_to_larger_ids_and_default_alignment():
    rng = np.random.default_rng(1)
    T, Tkv, H, D = 33, 900, 32, 128
    q, k, w = _exact_inputs(rng, T, Tkv, H, D)
    w = np.abs(w)  # positive weights: keys with all dots <= 0 score exactly 0
    k[::2] = -np.abs(k[::2].astype(np.float32)).astype(_bf16())
    q = np.abs(q.astype(np.float32)).astype(_bf16())  # so every even key scores exactly 0.0
    topk = 600  # the boundary falls inside the zero plateau
    got_i, got_s = _run(q, k, w, topk)
    want_i, want_s = brute_force(q, k, w, topk, [0, T], [0, Tkv], None, True)
    assert np.array_equal(got_i, want_i)
    assert np.array_equal(got_s, want_s.astype(np.float32))


def test_non_causal_topk_over_visible_and_single_query():
    rng = np.random.default_rng(2)
    q, k, w = _exact_inputs(rng, 1, 50, 32, 128)
    got_i, got_s = _run(q, k, w, 64, causal=False)
    want_i, want_s = brute_force(q, k, w, 64, [0, 1], [0, 50], None, False)
    assert np.array_equal(got_i, want_i)
    assert np.all(got_i[0, 50:] == -1) and np.all(np.isneginf(got_s[0, 50:]))
    assert np.array_equal(got_s, want_s.astype(np.float32))


def _non_finite_weights(w):
    """Rows whose scores are NaN or +-inf by the contract's float32 rules (exact inputs keep every dot finite):
    row 0 all NaN; row 1 -inf where head 0's dot is > 0 and NaN (-inf * 0) elsewhere; row 2 +inf or NaN;
    row 3 exactly 0.0 everywhere; the other rows finite."""
    w = w.copy()
    w[0] = np.nan
    w[1] = 0.0
    w[1, 0] = -np.inf
    w[2, 0] = np.inf
    w[3] = 0.0
    return w


@pytest.mark.parametrize("schedule", ["ticket", "static"])
@pytest.mark.parametrize("key_split", [None, 10 ** 6])  # few queries: split parts merged; one part a query
def test_nan_and_inf_scores_rank_tie_and_pad_exactly(schedule, key_split):
    """NaN ranks below every number (-inf included), NaNs tie to the larger id, the NaN score of key 0 (the
    all-zero 64-bit candidate key of the design hint) is a candidate like any other, and the -1 / -inf padding
    follows the real entries: whole visible ranges (topk >= visible), the k-th key inside the NaN run, unsplit
    blocks and split parts merged, and a query whose one visible key is key 0 with a NaN score."""
    rng = np.random.default_rng(12)
    T, Tkv, H, D = 8, 300, 8, 64
    q, k, w = _exact_inputs(rng, T, Tkv, H, D)
    w = _non_finite_weights(w)
    kw = dict(schedule=schedule, key_split=key_split)
    for topk in (1, 60, 299, 300, 340):
        got_i, got_s = _run(q, k, w, topk, causal=False, **kw)
        want_i, want_s = brute_force(q, k, w, topk, [0, T], [0, Tkv], None, False)
        assert np.array_equal(got_i, want_i), topk
        assert np.array_equal(got_s, want_s.astype(np.float32), equal_nan=True), topk
    assert np.isnan(got_s[0, :Tkv]).all() and np.array_equal(got_i[0, :Tkv], np.arange(Tkv))
    # query 0 of segment 0 sees key 0 alone (offset 0); segment 1's queries see its keys from global id 100 on
    cu_q, cu_k, off = np.array([0, 4, 8], np.int32), np.array([0, 100, 300], np.int32), np.array([0, 150], np.int32)
    w2 = w.copy()
    w2[4] = np.nan  # segment 1's first query: every score NaN
    got_i, got_s = _run(q, k, w2, 64, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, q_causal_offsets=off, **kw)
    want_i, want_s = brute_force(q, k, w2, 64, cu_q, cu_k, off, True)
    assert np.array_equal(got_i, want_i)
    assert np.array_equal(got_s, want_s.astype(np.float32), equal_nan=True)
    assert got_i[0, 0] == 0 and np.isnan(got_s[0, 0]) and (got_i[0, 1:] == -1).all()


@pytest.mark.parametrize("causal", [True, False])
def test_queries_that_see_no_key_get_all_padding_rows(causal):
    """Queries of a segment with no keys, and every query of a call with no keys at all (Tkv = 0), get -1 / -inf
    rows; the segments around the empty one keep their own global key ids."""
    rng = np.random.default_rng(13)
    H, D, topk = 8, 64, 20
    cu_q, cu_k = np.array([0, 3, 9, 12], np.int32), np.array([0, 40, 40, 90], np.int32)  # segment 1: 6 queries, 0 keys
    q, k, w = _exact_inputs(rng, 12, 90, H, D)
    got_i, got_s = _run(q, k, w, topk, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=causal)
    want_i, want_s = brute_force(q, k, w, topk, cu_q, cu_k, None, causal)
    assert np.array_equal(got_i, want_i) and np.array_equal(got_s, want_s.astype(np.float32))
    assert (got_i[3:9] == -1).all() and np.isneginf(got_s[3:9]).all()
    got_i, got_s = _run(q[:5], k[:0], w[:5], topk, causal=causal)
    assert (got_i == -1).all() and np.isneginf(got_s).all()


def test_random_scores_chosen_set_is_the_top_and_partition_independent():
    rng = np.random.default_rng(3)
    T, Tkv, H, D, topk = 16, 5000, 64, 128, 2048
    q = rng.standard_normal((T, H, D)).astype(_bf16())
    k = rng.standard_normal((Tkv, D)).astype(_bf16())
    w = rng.standard_normal((T, H)).astype(np.float32)
    i1, s1 = _run(q, k, w, topk)
    # the same rows computed inside a bigger call (extra queries and keys in other segments) give equal bits
    q2 = np.concatenate([rng.standard_normal((7, H, D)).astype(_bf16()), q])
    k2 = np.concatenate([rng.standard_normal((300, D)).astype(_bf16()), k])
    w2 = np.concatenate([rng.standard_normal((7, H)).astype(np.float32), w])
    i2, s2 = _run(q2, k2, w2, topk, cu_seqlens_q=np.array([0, 7, 7 + T], np.int32),
                  cu_seqlens_k=np.array([0, 300, 300 + Tkv], np.int32))
    assert np.array_equal(i2[7:] - 300 * (i2[7:] >= 0), i1)
    assert s2[7:].tobytes() == s1.tobytes()
    # against float64: chosen scores match, every chosen key beats every visible unchosen one (up to rounding)
    qf, kf, wf = (a.astype(np.float64) for a in (q, k, w))
    off = Tkv - T
    for t in range(T):
        nvis = off + t + 1
        full = (wf[t][:, None] * np.maximum(qf[t] @ kf[:nvis].T, 0)).sum(0)
        sel = i1[t][i1[t] >= 0]
        assert len(sel) == min(topk, nvis) and np.all(np.diff(sel) > 0)
        np.testing.assert_allclose(s1[t][: len(sel)], full[sel], rtol=1e-4, atol=1e-3)
        rest = np.setdiff1d(np.arange(nvis), sel)
        if len(rest):
            assert full[sel].min() >= full[rest].max() - 1e-3 * max(1.0, abs(full).max())


def test_prepared_runner_matches_eager_and_reruns_with_new_values():
    import cupy

    import cake_rt

    rng = np.random.default_rng(4)
    T, Tkv, H, D, topk = 40, 3000, 32, 128, 256
    q, k, w = _exact_inputs(rng, T, Tkv, H, D)
    dq, dk, dw = cupy.asarray(q), cupy.asarray(k), cupy.asarray(w)
    idx = cupy.full((T, topk), 7, np.int32)
    sc = cupy.full((T, topk), np.nan, np.float32)
    runner = cake_rt.prepare_dsa_indexer_det_topk(dq, dk, dw, topk, indices=idx, scores=sc)
    cupy.cuda.get_current_stream().synchronize()  # inputs and poison are written on the current stream, and
    s = cupy.cuda.Stream(non_blocking=True)       # a non-blocking stream is not ordered after it
    runner(stream=s)
    s.synchronize()
    ei, es = _run(q, k, w, topk)
    assert np.array_equal(idx.get(), ei) and sc.get().tobytes() == es.tobytes()
    q2, k2, w2 = _exact_inputs(rng, T, Tkv, H, D)
    dq[...] = cupy.asarray(q2)
    dk[...] = cupy.asarray(k2)
    dw[...] = cupy.asarray(w2)
    cupy.cuda.get_current_stream().synchronize()  # the new values land before the run on `s`
    runner(stream=s.ptr)  # an int handle works too
    s.synchronize()
    wi, ws = brute_force(q2, k2, w2, topk, [0, T], [0, Tkv], None, True)
    assert np.array_equal(idx.get(), wi) and np.array_equal(sc.get(), ws.astype(np.float32))


def test_errors_name_the_argument_before_launch():
    import cupy

    import cake_rt

    rng = np.random.default_rng(5)
    q, k, w = (cupy.asarray(a) for a in _exact_inputs(rng, 8, 64, 32, 128))
    idx = cupy.full((8, 16), 5, np.int32)
    sc = cupy.full((8, 16), 1.5, np.float32)
    cases = [
        (dict(topk=0), "topk"),
        (dict(q=q.astype(np.float32)), "q"),
        (dict(weights=w[:, :16]), "weights"),
        (dict(cu_seqlens_q=np.array([0, 8], np.int32)), "cu_seqlens_[qk]"),  # without cu_seqlens_k
        (dict(cu_seqlens_q=np.array([0, 9, 8], np.int32), cu_seqlens_k=np.array([0, 30, 64], np.int32)),
         "cu_seqlens_q"),
        (dict(causal=False, q_causal_offsets=np.array([0], np.int32)), "q_causal_offsets"),
        (dict(k=k[:, ::2]), "k"),
    ]
    for kw, name in cases:
        args = dict(q=q, k=k, weights=w, topk=16)
        args.update(kw)
        with pytest.raises((ValueError, TypeError), match=f"^{name}: "):  # the message starts with the name
            cake_rt.dsa_indexer_det_topk(args.pop("q"), args.pop("k"), args.pop("weights"), args.pop("topk"),
                                         indices=idx, scores=sc, **args)
    cupy.cuda.runtime.deviceSynchronize()
    assert np.all(idx.get() == 5) and np.all(sc.get() == 1.5)


@pytest.mark.parametrize("H", [32, 64, 16])
def test_split_tail_is_one_launch_and_exact(H):
    """A split tail (4 queries x 22018 keys, the A1 row): the parts and their merge run in one kernel, the
    result equals the float64 selection and the unsplit plan bit for bit, and every ticket word is 0 after."""
    import cupy

    import cake_rt
    from cake_rt.launch.grid import record_launches

    rng = np.random.default_rng(6 + H)
    T, Tkv, D, topk = 4, 22018, 128, 2048
    q, k, w = _exact_inputs(rng, T, Tkv, H, D)
    dq, dk, dw = cupy.asarray(q), cupy.asarray(k), cupy.asarray(w)
    idx = cupy.full((T, topk), 7, np.int32)
    sc = cupy.full((T, topk), np.nan, np.float32)
    runner = cake_rt.prepare_dsa_indexer_det_topk(dq, dk, dw, topk, indices=idx, scores=sc)
    assert runner.plan.nsplit > 0
    want_i, want_s = brute_force(q, k, w, topk, [0, T], [0, Tkv], None, True)
    for run in range(2):
        if run:  # poisoned again: the second run must write every row itself
            idx.fill(7)
            sc.fill(np.nan)
        with record_launches() as recs:
            runner()
        assert [r.name for r in recs] == ["dsa_scan"]
        cupy.cuda.runtime.deviceSynchronize()
        assert np.array_equal(idx.get(), want_i) and np.array_equal(sc.get(), want_s.astype(np.float32))
    ui, us = _run(q, k, w, topk, key_split=10 ** 6)
    assert np.array_equal(ui, idx.get()) and us.tobytes() == sc.get().tobytes()
    assert np.all(runner.tickets.read() == 0)
