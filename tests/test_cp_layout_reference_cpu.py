"""CPU tests of cp_zigzag_layout against the library's float64 reference (cake_rt.reference.dsa) and the op's own host
path (metadata checks, work planning): the spec's promise that the top-k of every query is independent of the CP
layout, with the visible (query, key) pairs of all ranks the full causal mask of every document, each pair once.

tests/test_cp_layout.py checks the layout with its own brute-force helpers; here the rule a rank's call follows is the
reference's (``visible_key_ranges``, ``dsa_indexer_reference``), so a layout and the op cannot agree with each other
only by sharing a misreading of the spec."""
import numpy as np
import pytest

from cake_rt.cp import cp_zigzag_layout
from cake_rt.ops import dsa
from cake_rt.reference import dsa as ref


def _docs(rng, W, n, max_chunks=4, zero_prob=0.2):
    lens = rng.integers(1, max_chunks + 1, size=n) * 2 * W
    lens[rng.random(n) < zero_prob] = 0
    return [int(v) for v in lens]


_CASES = [(W, seed) for W in (1, 2, 3, 4) for seed in range(4)]


def _case_docs(W, seed):
    rng = np.random.default_rng(1000 * W + seed)
    return _docs(rng, W, int(rng.integers(1, 5)))


@pytest.mark.parametrize("W, seed", _CASES)
def test_every_rank_sees_exactly_the_full_causal_mask_by_the_reference_rule(W, seed):
    doc_lens = _case_docs(W, seed)
    total = sum(doc_lens)
    full_s, full_e = ref.visible_key_ranges(total, total, np.cumsum([0] + doc_lens), np.cumsum([0] + doc_lens))
    count = np.zeros((total, total), dtype=np.int64)
    for r in range(W):
        lay = cp_zigzag_layout(doc_lens, W, r)
        s, e = ref.visible_key_ranges(lay.num_queries, lay.num_keys, **lay.indexer_kwargs())
        for t in range(lay.num_queries):
            count[lay.q_index[t], lay.k_index[s[t]:e[t]]] += 1
    want = np.zeros_like(count)
    for t in range(total):
        want[t, full_s[t]:full_e[t]] = 1
    np.testing.assert_array_equal(count, want)  # every visible pair once, nothing else
    # and the full call's rows are exactly each document's causal prefix
    start = 0
    for L in doc_lens:
        for i in range(L):
            assert (full_s[start + i], full_e[start + i]) == (start, start + i + 1)
        start += L


def _inputs(rng, total, H=3, D=4, kind="ints"):
    if kind == "ints":  # small integers: exact float64 sums, many exact ties and all-zero (0.0) scores
        q = rng.integers(-2, 3, size=(total, H, D)).astype(np.float64)
        k = rng.integers(-2, 3, size=(total, D)).astype(np.float64)
        w = rng.integers(0, 3, size=(total, H)).astype(np.float64)
    else:  # dyadic values: still exact, fewer ties; some NaN and -inf weights rows
        q = rng.integers(-64, 65, size=(total, H, D)) / 32.0
        k = rng.integers(-64, 65, size=(total, D)) / 32.0
        w = rng.integers(-8, 9, size=(total, H)) / 8.0
        if total:
            w[rng.random(total) < 0.1, 0] = np.nan
            w[rng.random(total) < 0.1, -1] = -np.inf
    return q, k, w


@pytest.mark.parametrize("kind", ["ints", "dyadic"])
@pytest.mark.parametrize("W, seed", _CASES)
def test_each_rank_gives_the_unsplit_calls_rows(W, seed, kind):
    doc_lens = _case_docs(W, seed)
    total = sum(doc_lens)
    rng = np.random.default_rng(7 + seed)
    q, k, w = _inputs(rng, total, kind=kind)
    cu = np.cumsum([0] + doc_lens).astype(np.int32)
    for topk in (1, 3, max(1, max(doc_lens)) + 2):  # the last one larger than any document: padding
        full_i, full_s = ref.dsa_indexer_reference(q, k, w, topk, cu_seqlens_q=cu, cu_seqlens_k=cu)
        seen = np.zeros(total, dtype=np.int64)
        for r in range(W):
            lay = cp_zigzag_layout(doc_lens, W, r)
            np.testing.assert_array_equal(lay.doc_cu_seqlens, cu)
            i, s = ref.dsa_indexer_reference(q[lay.q_index], k[lay.k_index], w[lay.q_index], topk,
                                             **lay.indexer_kwargs())
            np.testing.assert_array_equal(lay.to_global_keys(i), full_i[lay.q_index], err_msg=f"rank {r} topk {topk}")
            np.testing.assert_array_equal(s.view(np.uint64), full_s[lay.q_index].view(np.uint64),
                                          err_msg=f"rank {r} topk {topk}: score bits")
            # keys from the rank-major all-gather of the ranks' local tokens: the same rows as k[k_index]
            gathered = np.concatenate([k[cp_zigzag_layout(doc_lens, W, v).q_index] for v in range(W)])
            np.testing.assert_array_equal(gathered[lay.k_index_allgather], k[lay.k_index])
            seen[lay.q_index] += 1
        np.testing.assert_array_equal(seen, 1)


@pytest.mark.parametrize("W, seed", _CASES)
def test_the_ops_host_path_takes_each_ranks_metadata_and_its_plan_covers_the_visible_keys(W, seed):
    doc_lens = _case_docs(W, seed)
    for r in range(W):
        lay = cp_zigzag_layout(doc_lens, W, r)
        T, Tkv = lay.num_queries, lay.num_keys
        cu_q, cu_k, off = dsa._check_metadata(lay.cu_seqlens_q, lay.cu_seqlens_k, lay.q_causal_offsets, True, T, Tkv)
        np.testing.assert_array_equal(off, lay.q_causal_offsets)
        s, e = ref.visible_key_ranges(T, Tkv, cu_q, cu_k, off)
        assert dsa.visible_pairs(cu_q, cu_k, off) == int((e - s).sum())
        for BQ, key_split in ((4, None), (1, 5), (16, 1)):
            plan = dsa.plan_units(T, Tkv, cu_q, cu_k, off, True, 8, BQ, 4, 132, key_split)
            cover = {}
            for q0, nq, _ks0, _lenk, _pb, klo, khi, *_ in plan.units.tolist():
                for t in range(q0, q0 + nq):
                    cover.setdefault(t, []).append((klo, khi))
            assert sorted(cover) == [t for t in range(T)]
            for t in range(T):
                parts = sorted(cover[t])
                assert parts[0][0] == s[t] and parts[-1][1] >= e[t]
                assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))


def test_list_tuple_numpy_and_every_integer_dtype_give_the_same_layout():
    base = cp_zigzag_layout([12, 0, 24, 6], 3, 1)
    fields = ("doc_cu_seqlens", "cu_seqlens_q", "cu_seqlens_k", "q_causal_offsets", "q_index", "k_index",
              "k_index_allgather", "segment_doc", "segment_chunk")
    dtypes = ("i1", "u1", "i2", "u2", ">i4", "u4", "i8", "u8")
    for doc_lens in ((12, 0, 24, 6), *[np.array([12, 0, 24, 6], dt) for dt in dtypes]):
        lay = cp_zigzag_layout(doc_lens, np.int16(3), np.uint8(1))
        for f in fields:
            np.testing.assert_array_equal(getattr(lay, f), getattr(base, f), err_msg=f)
            assert getattr(lay, f).dtype == getattr(base, f).dtype
    # a strided (non-contiguous) NumPy view is read by value
    lay = cp_zigzag_layout(np.array([12, 99, 0, 99, 24, 99, 6, 99])[::2], 3, 1)
    np.testing.assert_array_equal(lay.k_index, base.k_index)


@pytest.mark.parametrize("doc_lens, W", [([2], 2), ([1], 1), ([3, 4], 1), ([6], 2), ([4, 8, 13], 2)])
def test_lengths_short_or_not_a_multiple_of_2w_are_refused_naming_doc_lens(doc_lens, W):
    for r in range(W):
        with pytest.raises(ValueError, match=f"^doc_lens: .*multiple of 2 \\* cp_size = {2 * W}"):
            cp_zigzag_layout(doc_lens, W, r)


def test_cp_size_1_is_two_chunks_per_document_on_rank_0():
    lay = cp_zigzag_layout([4, 0, 2], 1, 0)
    np.testing.assert_array_equal(lay.cu_seqlens_q, [0, 2, 4, 4, 4, 5, 6])
    np.testing.assert_array_equal(lay.cu_seqlens_k, [0, 2, 6, 6, 6, 7, 9])
    np.testing.assert_array_equal(lay.q_causal_offsets, [0, 2, 0, 0, 0, 1])
    np.testing.assert_array_equal(lay.q_index, np.arange(6))
    np.testing.assert_array_equal(lay.k_index_allgather, lay.k_index)  # one rank: the gather is the batch
    with pytest.raises(ValueError, match="^rank: expected 0 <= rank < cp_size = 1, got 1"):
        cp_zigzag_layout([4], 1, 1)


@pytest.mark.parametrize("doc_lens, W", [([80], 2), ([24, 0, 48], 3), ([16, 16], 4), ([6, 2], 1)])
def test_the_int32_refusal_is_at_the_ranks_real_key_count(monkeypatch, doc_lens, W):
    # Every rank holds L + L / 2W keys of a document (chunk r's prefix, (r+1) c, and chunk 2W-1-r's, (2W-r) c): the
    # layout is refused exactly when that count, the end of its cu_seqlens_k, is past the int32 limit. Shown with the
    # limit lowered (a real one needs gigabytes of k_index): the bound was total + W * sum(c), so layouts that fit were
    # refused for W > 1, and the message gave that overestimate as the rank's key count.
    import cake_rt.cp as cp

    keys = sum(L + L // (2 * W) for L in doc_lens)
    assert {cp_zigzag_layout(doc_lens, W, r).num_keys for r in range(W)} == {keys}
    monkeypatch.setattr(cp, "_INT32_MAX", keys)
    for r in range(W):
        assert int(cp_zigzag_layout(doc_lens, W, r).cu_seqlens_k[-1]) == keys
    monkeypatch.setattr(cp, "_INT32_MAX", keys - 1)
    with pytest.raises(ValueError, match=f"^doc_lens: .*up to {keys} keys on one rank"):
        cp_zigzag_layout(doc_lens, W, W - 1)


@pytest.mark.parametrize("doc_lens", [[2**70], [8, -(2**64)], (8, 2**63)])
def test_python_int_lengths_past_int64_are_a_range_error_naming_doc_lens(doc_lens):
    # NumPy makes such ints an object (or a float64) array; they were refused as "expected integer lengths, got dtype
    # object / float64" (a TypeError saying integers are not integers), where any other too-large length is a
    # ValueError.
    with pytest.raises(ValueError, match="^doc_lens: .*(does not fit|>= 0)"):
        cp_zigzag_layout(doc_lens, 1, 0)
    with pytest.raises(TypeError, match="^doc_lens: expected integer lengths, got dtype object"):
        cp_zigzag_layout([8, None], 1, 0)
