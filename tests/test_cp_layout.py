"""CPU tests of cake_rt.cp_zigzag_layout against brute-force causal masks of the full documents."""
import numpy as np
import pytest

import cake_rt
from cake_rt.cp import CPZigzagLayout, cp_zigzag_layout


def _full_causal_pairs(doc_lens):
    """Every (query, key) pair of packed token ids allowed by one causal mask per document."""
    pairs = []
    start = 0
    for L in doc_lens:
        for i in range(L):
            for j in range(i + 1):
                pairs.append((start + i, start + j))
        start += L
    return pairs


def _rank_pairs(layout):
    """(global query, global key) pairs a rank's indexer call sees, by the spec's segment rule.

    Local query i of segment s sits at p = q_causal_offsets[s] + i and sees local keys 0 .. min(p, len_k - 1).
    """
    cq, ck, off = layout.cu_seqlens_q, layout.cu_seqlens_k, layout.q_causal_offsets
    pairs = []
    for s in range(layout.num_segments):
        len_k = int(ck[s + 1] - ck[s])
        for i in range(int(cq[s + 1] - cq[s])):
            p = int(off[s]) + i
            gq = int(layout.q_index[cq[s] + i])
            for j in range(min(p, len_k - 1) + 1):
                pairs.append((gq, int(layout.k_index[ck[s] + j])))
    return pairs


def _random_doc_lens(rng, W, n, max_chunks=5, zero_prob=0.15):
    lens = rng.integers(1, max_chunks + 1, size=n) * 2 * W
    lens[rng.random(n) < zero_prob] = 0
    return [int(v) for v in lens]


def test_worked_example_from_docstring():
    r0 = cp_zigzag_layout([8, 16], 2, 0)
    np.testing.assert_array_equal(r0.q_index, [0, 1, 6, 7, 8, 9, 10, 11, 20, 21, 22, 23])
    np.testing.assert_array_equal(
        r0.k_index, [0, 1] + list(range(8)) + list(range(8, 12)) + list(range(8, 24))
    )
    np.testing.assert_array_equal(r0.cu_seqlens_q, [0, 2, 4, 8, 12])
    np.testing.assert_array_equal(r0.cu_seqlens_k, [0, 2, 10, 14, 30])
    np.testing.assert_array_equal(r0.q_causal_offsets, [0, 6, 0, 12])
    np.testing.assert_array_equal(r0.segment_doc, [0, 0, 1, 1])
    np.testing.assert_array_equal(r0.segment_chunk, [0, 3, 0, 3])
    r1 = cp_zigzag_layout([8, 16], 2, 1)
    np.testing.assert_array_equal(r1.q_index, [2, 3, 4, 5, 12, 13, 14, 15, 16, 17, 18, 19])
    np.testing.assert_array_equal(
        r1.k_index, list(range(4)) + list(range(6)) + list(range(8, 16)) + list(range(8, 20))
    )
    np.testing.assert_array_equal(r1.cu_seqlens_q, [0, 2, 4, 8, 12])
    np.testing.assert_array_equal(r1.cu_seqlens_k, [0, 4, 10, 18, 30])
    np.testing.assert_array_equal(r1.q_causal_offsets, [2, 4, 4, 8])
    np.testing.assert_array_equal(r1.segment_chunk, [1, 2, 1, 2])
    np.testing.assert_array_equal(r1.doc_cu_seqlens, [0, 8, 24])
    assert (r1.num_segments, r1.num_queries, r1.num_keys, r1.total_tokens) == (4, 12, 30, 24)


def test_dtypes_and_read_only():
    lay = cp_zigzag_layout(np.array([12, 0, 24], dtype=np.int32), 3, 2)
    for name in ("doc_cu_seqlens", "cu_seqlens_q", "cu_seqlens_k", "q_causal_offsets", "segment_doc", "segment_chunk"):
        assert getattr(lay, name).dtype == np.int32, name
    for name in ("q_index", "k_index", "k_index_allgather", "doc_lens"):
        assert getattr(lay, name).dtype == np.int64, name
    with pytest.raises(ValueError):
        lay.k_index[0] = 5
    assert isinstance(lay, CPZigzagLayout)
    assert cake_rt.cp_zigzag_layout is cp_zigzag_layout
    kw = lay.indexer_kwargs()
    assert set(kw) == {"cu_seqlens_q", "cu_seqlens_k", "q_causal_offsets"}
    assert kw["cu_seqlens_q"] is lay.cu_seqlens_q


@pytest.mark.parametrize("W", [1, 2, 3, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_union_of_ranks_is_the_full_causal_mask(W, seed):
    rng = np.random.default_rng(100 * W + seed)
    doc_lens = _random_doc_lens(rng, W, n=int(rng.integers(1, 5)))
    full = _full_causal_pairs(doc_lens)
    union = []
    for r in range(W):
        union.extend(_rank_pairs(cp_zigzag_layout(doc_lens, W, r)))
    assert len(union) == len(set(union)), "a (query, key) pair is computed on two ranks or twice"
    assert sorted(union) == sorted(full)


@pytest.mark.parametrize("W", [1, 2, 3, 5])
def test_queries_partition_tokens_and_segments_are_aligned(W):
    rng = np.random.default_rng(7 + W)
    doc_lens = _random_doc_lens(rng, W, n=6, max_chunks=7)
    total = sum(doc_lens)
    doc_of = np.repeat(np.arange(len(doc_lens)), doc_lens)
    pos_in_doc = np.arange(total) - np.repeat(np.cumsum(doc_lens) - doc_lens, doc_lens)
    owners = []
    for r in range(W):
        lay = cp_zigzag_layout(doc_lens, W, r)
        owners.append(lay.q_index)
        assert lay.num_queries == total // W  # every rank the same share
        assert lay.num_segments == 2 * len(doc_lens)
        for s in range(lay.num_segments):
            qs = lay.q_index[lay.cu_seqlens_q[s] : lay.cu_seqlens_q[s + 1]]
            ks = lay.k_index[lay.cu_seqlens_k[s] : lay.cu_seqlens_k[s + 1]]
            d = lay.segment_doc[s]
            assert set(doc_of[qs]) <= {d} and set(doc_of[ks]) <= {d}
            # keys are the document's prefix 0 .. end of the chunk, in order
            np.testing.assert_array_equal(pos_in_doc[ks], np.arange(ks.size))
            # query i's own key sits at local key position offset + i
            off = lay.q_causal_offsets[s]
            np.testing.assert_array_equal(ks[off + np.arange(qs.size)] if qs.size else qs, qs)
            assert ks.size == off + qs.size
            assert lay.segment_chunk[s] in (r, 2 * W - 1 - r)
    allq = np.concatenate(owners)
    np.testing.assert_array_equal(np.sort(allq), np.arange(total))


def _visible_pairs(lay):
    lq = np.diff(lay.cu_seqlens_q).astype(np.int64)
    lk = np.diff(lay.cu_seqlens_k).astype(np.int64)
    off = lay.q_causal_offsets.astype(np.int64)
    total = 0
    for a, nq, nk in zip(off, lq, lk):
        i = np.arange(nq)
        total += int(np.minimum(a + i, nk - 1).clip(-1).sum() + nq)
    return total


@pytest.mark.parametrize(
    "doc_lens, T, Tkv, S, pairs",
    [
        ([32768] * 8, 16384, 270336, 16, 268_443_648),  # Z2cp
        ([65536, 32768, 24576, 16384, 12288, 8192, 6144, 4096], 10624, 175296, 16, 203_560_128),  # Z3cp
    ],
)
def test_benchmark_rows_cp16_rank0(doc_lens, T, Tkv, S, pairs):
    lay = cp_zigzag_layout(doc_lens, 16, 0)
    assert (lay.num_queries, lay.num_keys, lay.num_segments) == (T, Tkv, S)
    assert _visible_pairs(lay) == pairs


def test_visible_pairs_over_ranks_sum_to_full():
    doc_lens = [4096, 1024, 2048, 64]
    full = sum(L * (L + 1) // 2 for L in doc_lens)
    assert sum(_visible_pairs(cp_zigzag_layout(doc_lens, 8, r)) for r in range(8)) == full


def test_allgather_index_matches_k_index():
    rng = np.random.default_rng(3)
    W = 3
    doc_lens = _random_doc_lens(rng, W, n=5)
    k_full = rng.standard_normal((sum(doc_lens), 4))
    lays = [cp_zigzag_layout(doc_lens, W, r) for r in range(W)]
    gathered = np.concatenate([k_full[l.q_index] for l in lays])  # what an all-gather of local K gives
    for lay in lays:
        np.testing.assert_array_equal(gathered[lay.k_index_allgather], k_full[lay.k_index])


# ---- end to end on the CPU: a brute-force indexer on each rank's share equals the full call ----

def _brute_indexer(q, k, w, topk, cu_q, cu_k, offsets):
    """float64 spec semantics: score = sum_h w * max(0, q.k); top-k, ties to larger id; ids ascending."""
    T = q.shape[0]
    idx = np.full((T, topk), -1, dtype=np.int64)
    sc = np.full((T, topk), -np.inf)
    for s in range(len(cu_q) - 1):
        kk = k[cu_k[s] : cu_k[s + 1]]
        for i in range(cu_q[s + 1] - cu_q[s]):
            t = cu_q[s] + i
            nvis = min(offsets[s] + i, kk.shape[0] - 1) + 1
            if nvis <= 0:
                continue
            score = (np.maximum(q[t] @ kk[:nvis].T, 0.0) * w[t][:, None]).sum(0)
            ids = np.arange(nvis) + cu_k[s]
            order = np.lexsort((-ids, -score))[:topk]  # score desc, then larger id
            keep = np.sort(ids[order])
            idx[t, : keep.size] = keep
            sc[t, : keep.size] = score[keep - cu_k[s]]
    return idx, sc


@pytest.mark.parametrize("W", [2, 3])
def test_rank_topk_rows_equal_full_topk_rows(W):
    rng = np.random.default_rng(11 * W)
    doc_lens = [6 * W, 2 * W, 0, 10 * W]
    total = sum(doc_lens)
    H, D, topk = 3, 4, 5
    # small integers: many exact ties and all-zero scores, so tie-breaking is exercised
    q = rng.integers(-2, 3, size=(total, H, D)).astype(np.float64)
    k = rng.integers(-2, 3, size=(total, D)).astype(np.float64)
    w = rng.integers(1, 3, size=(total, H)).astype(np.float64)
    cu = np.concatenate([[0], np.cumsum(doc_lens)])
    full_idx, full_sc = _brute_indexer(q, k, w, topk, cu, cu, np.zeros(len(doc_lens), dtype=np.int64))
    seen = np.zeros(total, dtype=bool)
    for r in range(W):
        lay = cp_zigzag_layout(doc_lens, W, r)
        idx, sc = _brute_indexer(
            q[lay.q_index], k[lay.k_index], w[lay.q_index], topk,
            lay.cu_seqlens_q, lay.cu_seqlens_k, lay.q_causal_offsets,
        )
        np.testing.assert_array_equal(lay.to_global_keys(idx), full_idx[lay.q_index])
        np.testing.assert_array_equal(sc, full_sc[lay.q_index])
        seen[lay.q_index] = True
    assert seen.all()


def test_to_global_keys_numpy():
    lay = cp_zigzag_layout([8, 16], 2, 1)
    local = np.array([[0, 4, -1], [29, 10, 3]], dtype=np.int32)
    out = lay.to_global_keys(local)
    np.testing.assert_array_equal(out, [[0, 0, -1], [19, 8, 3]])
    assert out.dtype == np.int64 and out.shape == local.shape
    with pytest.raises(ValueError, match="indices"):
        lay.to_global_keys(np.array([30], dtype=np.int32))
    with pytest.raises(ValueError, match="indices"):
        lay.to_global_keys(np.array([-2], dtype=np.int32))
    with pytest.raises(TypeError, match="indices"):
        lay.to_global_keys(np.array([1.0]))
    with pytest.raises(TypeError, match="indices"):
        lay.to_global_keys([1, 2])


@pytest.mark.parametrize(
    "doc_lens, cp_size, rank, exc, words",
    [
        ([8, 10], 2, 0, ValueError, ["doc_lens", "multiple of 2 * cp_size = 4", "10", "position 1"]),
        ([6], 2, 1, ValueError, ["doc_lens", "6"]),
        ([8, -4], 2, 0, ValueError, ["doc_lens", ">= 0", "-4"]),
        ([], 2, 0, ValueError, ["doc_lens", "at least one"]),
        ([[8, 8]], 2, 0, ValueError, ["doc_lens", "1-D"]),
        ([8.0, 8.0], 2, 0, TypeError, ["doc_lens", "float"]),
        (np.array([True, False]), 1, 0, TypeError, ["doc_lens", "bool"]),
        ("abc", 2, 0, TypeError, ["doc_lens", "str"]),
        (8, 2, 0, TypeError, ["doc_lens", "int"]),
        ([8], 0, 0, ValueError, ["cp_size", ">= 1", "0"]),
        ([8], 2.0, 0, TypeError, ["cp_size", "float"]),
        ([8], True, 0, TypeError, ["cp_size", "bool"]),
        ([8], 2, 2, ValueError, ["rank", "cp_size = 2", "2"]),
        ([8], 2, -1, ValueError, ["rank", ">= 0"]),
        ([8], 2, "0", TypeError, ["rank", "str"]),
        ([2**30, 2**30, 2**30], 1, 0, ValueError, ["doc_lens", "int32"]),
    ],
)
def test_bad_arguments(doc_lens, cp_size, rank, exc, words):
    with pytest.raises(exc) as info:
        cp_zigzag_layout(doc_lens, cp_size, rank)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_numpy_integer_scalars_accepted():
    a = cp_zigzag_layout(np.array([8, 16], dtype=np.uint16), np.int64(2), np.int32(1))
    b = cp_zigzag_layout((8, 16), 2, 1)
    np.testing.assert_array_equal(a.k_index, b.k_index)
    np.testing.assert_array_equal(a.q_causal_offsets, b.q_causal_offsets)


def test_large_zero_docs_and_cp1():
    lay = cp_zigzag_layout([0, 0], 1, 0)
    assert lay.num_queries == 0 and lay.num_keys == 0 and lay.num_segments == 4
    np.testing.assert_array_equal(lay.cu_seqlens_k, [0, 0, 0, 0, 0])
    # W = 1: two chunks, both on rank 0; chunk 1 sees the whole document
    lay = cp_zigzag_layout([6], 1, 0)
    np.testing.assert_array_equal(lay.q_index, np.arange(6))
    np.testing.assert_array_equal(lay.k_index, [0, 1, 2, 0, 1, 2, 3, 4, 5])
    np.testing.assert_array_equal(lay.q_causal_offsets, [0, 3])


class _HostTensor:
    """A CPU tensor stand-in: DLPack says CPU, NumPy conversion through __array__."""

    def __init__(self, values):
        self._a = np.asarray(values)

    def __array__(self, dtype=None, copy=None):
        return self._a if dtype is None else self._a.astype(dtype)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()


def test_host_tensor_doc_lens():
    a = cp_zigzag_layout(_HostTensor(np.array([8, 16], dtype=np.int32)), 2, 0)
    np.testing.assert_array_equal(a.q_index, cp_zigzag_layout([8, 16], 2, 0).q_index)
    with pytest.raises(TypeError, match="doc_lens"):
        cp_zigzag_layout(_HostTensor(np.array([8.0])), 2, 0)


def test_to_global_keys_empty_and_unsigned():
    lay = cp_zigzag_layout([8, 16], 2, 0)
    out = lay.to_global_keys(np.zeros((0, 4), dtype=np.int32))
    assert out.shape == (0, 4) and out.dtype == np.int64
    np.testing.assert_array_equal(lay.to_global_keys(np.array([29, 2], dtype=np.uint32)), [23, 0])
