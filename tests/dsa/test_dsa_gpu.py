"""GPU tests of the deterministic DSA indexer top-k: against the float64 reference on fresh random inputs,
bitwise determinism across schedules / key splits / entries / streams / graph replays, launch records,
ticket words, argument errors on device arrays. Skipped without a GPU (marker ``gpu``)."""

import numpy as np
import pytest

from cake_rt.interop import BF16
from cake_rt.reference import dsa as ref

pytestmark = pytest.mark.gpu

POISON_IDX = 0x7F7F7F7F


def _cp():
    import cupy

    return cupy


def _op():
    from cake_rt.ops import dsa

    return dsa


# ------------------------------------------------------------------------------------------------ inputs

def make_inputs(seed, T, Tkv, H=32, D=128, *, positive_q=False, negative_frac=0.0, dup_pairs=0):
    """Fresh random bf16 q/k and float32 weights; host copies (bf16-exact) and device arrays."""
    cupy = _cp()
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((T, H, D)).astype(np.float32)
    if positive_q:
        q = np.abs(q)
    k = rng.standard_normal((Tkv, D)).astype(np.float32)
    if negative_frac:
        neg = rng.random(Tkv) < negative_frac
        k[neg] = -np.abs(k[neg])
    for _ in range(dup_pairs):  # identical key rows must score identically
        a, b = rng.integers(0, Tkv, 2)
        k[b] = k[a]
    w = (rng.standard_normal((T, H)) * H ** -0.5).astype(np.float32)
    if positive_q:
        w = np.abs(w)
    qb, kb = q.astype(BF16), k.astype(BF16)
    return (qb, kb, w), (cupy.asarray(qb), cupy.asarray(kb), cupy.asarray(w))


def poisoned(T, topk):
    """Outputs filled with poison, complete on return (the fill runs on the current stream; a later call on
    a non-blocking stream is not ordered after it)."""
    cupy = _cp()
    out = (cupy.full((T, topk), POISON_IDX, dtype=cupy.int32), cupy.full((T, topk), np.nan, dtype=cupy.float32))
    cupy.cuda.get_current_stream().synchronize()
    return out


def run_eager(dev_in, topk, **kw):
    cupy = _cp()
    q, k, w = dev_in
    idx, sc = poisoned(q.shape[0], topk)
    out = _op().dsa_indexer_det_topk(q, k, w, topk, indices=idx, scores=sc, **kw)
    assert out[0] is idx and out[1] is sc
    cupy.cuda.get_current_stream().synchronize()
    return idx.get(), sc.get()


# ------------------------------------------------------------------------------------------------ checker

def check_against_reference(idx, sc, host_in, topk, cu_q=None, cu_k=None, off=None, causal=True):
    """Chosen sets and scores agree with the float64 reference under the spec's tie rule.

    Scores: within a float32 accumulation bound. Sets: no unchosen visible key beats a chosen one by more
    than the bound; exact float64 ties (0.0 plateaus, duplicate rows) go to the larger id. Rows with NaN
    scores must match the reference selection exactly.
    """
    q, k, w = host_in
    T, Tkv = q.shape[0], k.shape[0]
    assert idx.shape == (T, topk) and sc.shape == (T, topk)
    start, end = ref.visible_key_ranges(T, Tkv, cu_q, cu_k, off, causal)
    S, scale = ref.dsa_scores_reference(q, k, w, with_scale=True)
    ref_idx, _ = ref.select_topk_reference(S, start, end, topk)
    for t in range(T):
        nvis = int(end[t] - start[t])
        nreal = min(topk, nvis)
        row = idx[t]
        assert np.all(row[nreal:] == -1), (t, row[nreal:][:8])
        assert np.all(np.isneginf(sc[t, nreal:])), t
        ids = row[:nreal].astype(np.int64)
        assert np.all((ids >= start[t]) & (ids < end[t])), (t, ids[:8], start[t], end[t])
        assert np.all(np.diff(ids) > 0), t
        if nreal == 0:
            continue
        r = S[t, ids]
        tol = 1.6e-5 * scale[t, ids] + 1e-6
        g = sc[t, :nreal].astype(np.float64)
        vis_scores = S[t, start[t]:end[t]]
        if np.isnan(vis_scores).any():
            assert np.array_equal(row, ref_idx[t]), t
            assert np.array_equal(np.isnan(g), np.isnan(r)), t
            continue
        assert np.all(np.abs(g - r) <= tol), (t, np.max(np.abs(g - r) - tol))
        rest = np.setdiff1d(np.arange(start[t], end[t]), ids)
        if rest.size:
            rs = S[t, rest]
            rtol = 1.6e-5 * scale[t, rest] + 1e-6
            assert (rs - rtol).max() <= (r + tol).min(), t
            for v in np.intersect1d(r, rs):  # exact ties straddling the boundary: larger ids chosen
                assert rest[rs == v].max() < ids[r == v].min(), (t, v)


def bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


def same_bits(a, b):
    return np.array_equal(a[0], b[0]) and np.array_equal(bits(a[1]), bits(b[1]))


# ------------------------------------------------------------------------------------------------ correctness

@pytest.mark.parametrize("schedule", ["ticket", "static"])
def test_single_causal_document(schedule):
    host, dev = make_inputs(1, 777, 777)
    idx, sc = run_eager(dev, 100, schedule=schedule)
    check_against_reference(idx, sc, host, 100)


def test_topk_2048_long_rows_split_and_unsplit():
    host, dev = make_inputs(2, 64, 5000)
    a = run_eager(dev, 2048)                    # few blocks: key range split, merge kernel
    b = run_eager(dev, 2048, key_split=10 ** 6)  # one unit per block: compactions inside the scan
    check_against_reference(*a, host, 2048)
    assert same_bits(a, b)


def test_multi_segment_pack_h64():
    cu_q = np.array([0, 100, 100, 137, 387], np.int32)
    cu_k = np.array([0, 120, 130, 167, 467], np.int32)
    host, dev = make_inputs(3, 387, 467, H=64, D=128)
    idx, sc = run_eager(dev, 64, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    check_against_reference(idx, sc, host, 64, cu_q, cu_k)


def _zigzag(doc_lens, W, r):
    """CP zigzag rank r: per document, chunks r and 2W-1-r, each a segment over the doc's key prefix."""
    cu_q, cu_k, off, qsrc, ksrc = [0], [0], [], [], []
    base = 0
    for L in doc_lens:
        c = L // (2 * W)
        for ch in (r, 2 * W - 1 - r):
            s0, s1 = ch * c, (ch + 1) * c
            qsrc.extend(range(base + s0, base + s1))
            ksrc.extend(range(base, base + s1))
            cu_q.append(cu_q[-1] + (s1 - s0))
            cu_k.append(cu_k[-1] + s1)
            off.append(s0)
        base += L
    return (np.array(cu_q, np.int32), np.array(cu_k, np.int32), np.array(off, np.int32),
            np.array(qsrc), np.array(ksrc))


@pytest.mark.parametrize("rank", [0, 1])
def test_cp_zigzag_explicit_offsets(rank):
    cupy = _cp()
    cu_q, cu_k, off, qsrc, ksrc = _zigzag([256, 160], 2, rank)
    (q, k, w), _ = make_inputs(10 + rank, 416, 416, H=32, D=64)
    host = (q[qsrc], k[ksrc], w[qsrc])
    dev = tuple(cupy.asarray(x) for x in host)
    idx, sc = run_eager(dev, 50, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, q_causal_offsets=off)
    check_against_reference(idx, sc, host, 50, cu_q, cu_k, off)
    # device metadata gives the same bits
    idx2, sc2 = run_eager(dev, 50, cu_seqlens_q=cupy.asarray(cu_q), cu_seqlens_k=cupy.asarray(cu_k),
                          q_causal_offsets=cupy.asarray(off))
    assert same_bits((idx, sc), (idx2, sc2))


def test_non_causal_two_segments():
    cu_q = np.array([0, 20, 50], np.int32)
    cu_k = np.array([0, 400, 700], np.int32)
    host, dev = make_inputs(4, 50, 700, H=64, D=64)
    idx, sc = run_eager(dev, 300, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=False)
    check_against_reference(idx, sc, host, 300, cu_q, cu_k, None, False)


def test_topk_larger_than_keys_and_negative_offsets():
    cu_q = np.array([0, 6, 9], np.int32)
    cu_k = np.array([0, 30, 33], np.int32)
    off = np.array([-3, 0], np.int32)  # queries 0..2 see nothing: all padding
    host, dev = make_inputs(5, 9, 33)
    idx, sc = run_eager(dev, 64, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, q_causal_offsets=off)
    check_against_reference(idx, sc, host, 64, cu_q, cu_k, off)
    assert np.all(idx[:3] == -1)


def test_single_query_many_keys():
    host, dev = make_inputs(6, 1, 3000)
    idx, sc = run_eager(dev, 2048)
    check_against_reference(idx, sc, host, 2048)


@pytest.mark.parametrize("T", [1, 4])
def test_split_tail_of_many_small_parts(T):
    """One query block over 40000 keys cut into 313 parts of 128 keys: more parts than one batch of the last
    arrival's merge (256), and usually more kept keys than its copy path takes (4096), so the merge streams the parts
    from the floor (which path runs depends on what each part saw of the histogram; the bits must not). The result
    is the reference's and bit for bit the unsplit call's."""
    host, dev = make_inputs(11, T, 40000)
    whole = run_eager(dev, 2048, key_split=1 << 20)
    parts = run_eager(dev, 2048, key_split=128)
    check_against_reference(parts[0], parts[1], host, 2048)
    assert same_bits(parts, whole)


@pytest.mark.parametrize("topk", [1, 700])
def test_zero_plateau_boundary_and_duplicate_rows(topk):
    host, dev = make_inputs(7, 40, 1500, positive_q=True, negative_frac=0.8, dup_pairs=40)
    idx, sc = run_eager(dev, topk, causal=False)
    check_against_reference(idx, sc, host, topk, causal=False)
    if topk == 700:
        S = ref.dsa_scores_reference(*host)
        assert np.all((S > 0).sum(axis=1) < 700)  # the boundary lies inside the 0.0 plateau
        assert np.all((sc == 0.0).sum(axis=1) > 0)  # part of the plateau is chosen, by the tie rule
    # duplicate key rows score bit-identically wherever they sit in a tile
    k = host[1].astype(np.float32)
    _, first = np.unique(k, axis=0, return_index=True)
    dups = np.setdiff1d(np.arange(k.shape[0]), first)
    assert dups.size
    q, kk, w = dev
    idx2, sc2 = poisoned(40, 1500)
    _op().dsa_indexer_det_topk(q, kk, w, 1500, causal=False, indices=idx2, scores=sc2)
    full_i, full_s = idx2.get(), sc2.get()
    for j in dups[:10]:
        j0 = int(np.flatnonzero((k == k[j]).all(axis=1))[0])
        for t in range(0, 40, 7):
            a = full_s[t, np.flatnonzero(full_i[t] == j)]
            b = full_s[t, np.flatnonzero(full_i[t] == j0)]
            assert bits(a).tolist() == bits(b).tolist()


def test_nan_weights_rank_lowest():
    cupy = _cp()
    host, dev = make_inputs(8, 12, 300)
    w = host[2].copy()
    w[3, 5] = np.nan     # every score of query 3 is NaN: ties among NaN go to the larger ids
    w[7, 0] = np.inf     # inf * 0 = NaN for keys with dot <= 0 on head 0, +inf otherwise
    host = (host[0], host[1], w)
    dev = (dev[0], dev[1], cupy.asarray(w))
    idx, sc = run_eager(dev, 40)
    check_against_reference(idx, sc, host, 40)
    assert np.all(np.isnan(sc[3][idx[3] >= 0]))


def test_mma_sync_program_on_any_arch(monkeypatch):
    """The portable mma.sync program (the only one below sm_90a) checked on this GPU too."""
    monkeypatch.setenv("CAKE_RT_DSA_MMA", "sync")
    for H, topk in ((32, 2048), (64, 50)):
        host, dev = make_inputs(40 + H, 70, 4500, H=H)
        idx, sc = run_eager(dev, topk)
        check_against_reference(idx, sc, host, topk)
        assert same_bits((idx, sc), run_eager(dev, topk, key_split=640, schedule="static"))


@pytest.mark.parametrize("H,D", [(64, 64), (32, 64), (64, 128)])
def test_head_and_dim_variants(H, D):
    """A call of fewer queries than SMs (one-query blocks, split) and one of more (whole blocks)."""
    sms = _cp().cuda.Device().attributes["MultiProcessorCount"]
    for T in (131, sms + 9):
        host, dev = make_inputs(9 + T, T, 389, H=H, D=D)
        for topk in (1, 37):
            idx, sc = run_eager(dev, topk)
            check_against_reference(idx, sc, host, topk)


def test_torch_tensors_through_dlpack():
    torch = pytest.importorskip("torch")
    cupy = _cp()
    host, dev = make_inputs(12, 96, 400)
    ref_out = run_eager(dev, 32)
    tq, tk, tw = (torch.from_dlpack(x) for x in dev)
    ti = torch.full((96, 32), 7, dtype=torch.int32, device="cuda")
    ts = torch.full((96, 32), float("nan"), dtype=torch.float32, device="cuda")
    _op().dsa_indexer_det_topk(tq, tk, tw, 32, indices=ti, scores=ts)
    torch.cuda.synchronize()
    assert same_bits(ref_out, (ti.cpu().numpy(), ts.cpu().numpy()))
    cupy.cuda.Device().synchronize()



# ------------------------------------------------------------------------------------------------ head counts

@pytest.mark.parametrize("H,D", [(8, 64), (16, 64), (24, 64), (48, 64), (72, 64), (88, 64), (104, 64), (128, 64),
                                 (8, 128), (80, 128), (96, 128), (112, 128), (120, 128), (128, 128)])
def test_any_head_count_against_reference(H, D):
    """Every multiple of 8: blocks of 128 // H queries (or fewer; one at H = 72-120), the same head-sum order in every
    block. 53 queries: fewer blocks than SMs, so the keys are split and the parts merged."""
    host, dev = make_inputs(60 + H + D, 53, 1300, H=H, D=D)
    for topk in (1, 37, 300):
        base = run_eager(dev, topk)
        check_against_reference(*base, host, topk)
        assert same_bits(base, run_eager(dev, topk, key_split=256, schedule="static")), (H, D, topk)


@pytest.mark.parametrize("H,D", [(72, 64), (96, 128)])
def test_one_query_blocks_unsplit_against_reference(H, D):
    """The programs of one query a block (H = 72-120) on a call of more queries than SMs: every block whole (no key
    split), its final selection over its own buffer, then the same bits split."""
    cupy = _cp()
    T = cupy.cuda.Device().attributes["MultiProcessorCount"] + 9
    host, dev = make_inputs(80 + H + D, T, 1500, H=H, D=D)
    for topk in (5, 700):
        base = run_eager(dev, topk)
        check_against_reference(*base, host, topk)
        assert same_bits(base, run_eager(dev, topk, key_split=384)), (H, D, topk)


@pytest.mark.parametrize("H", [24, 48, 8])
def test_score_bits_independent_of_query_position(H):
    """score(t, j) depends on q[t], k[j], w[t] only: shifting the queries by one moves every query to another
    block position (and block), the rows' bits stay the same. More queries than SMs, so the blocks are whole (with
    fewer every block holds one query)."""
    T = _cp().cuda.Device().attributes["MultiProcessorCount"] + 9
    host, dev = make_inputs(70 + H, T, 900, H=H, D=64)
    q, k, w = dev
    a = run_eager((q, k, w), 900, causal=False)
    b = run_eager((q[1:], k, w[1:]), 900, causal=False)
    assert same_bits((a[0][1:], a[1][1:]), b)



@pytest.mark.parametrize("H, D", [(16, 128), (32, 128), (64, 128), (32, 64)])
def test_score_bits_independent_of_block_size(H, D):
    """A query scored in a block of one (the product's narrowest wgmma: 32 or 64 pair columns) and in a full
    block (128 columns) gets the same bits: the instruction's N does not change an element's operations. Every
    key is in the output (topk = Tkv, not causal), so every score is compared."""
    cupy = _cp()
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    T, Tkv = sms + 8, 700  # more queries than SMs: a key-split plan keeps full blocks
    host, dev = make_inputs(90 + H + D, T, Tkv, H=H, D=D)
    q, k, w = dev
    full = run_eager(dev, Tkv, causal=False, key_split=10 ** 6)
    alone = run_eager((q[:8], k, w[:8]), Tkv, causal=False)  # one-query blocks
    assert same_bits((full[0][:8], full[1][:8]), alone), (H, D)

@pytest.mark.parametrize("H, D, kind, mma", [(64, 128, "random", ""), (64, 64, "random", ""), (64, 128, "ascending", ""),
                                             (128, 128, "random", ""),
                                             # every block width and joint compaction the other tests leave to one-query
                                             # units: 10, 8, 5, 4 (all four together), 3, 2 queries a block
                                             (8, 64, "random", ""), (16, 64, "random", ""), (24, 64, "random", ""),
                                             (32, 64, "random", ""), (24, 128, "random", ""), (40, 128, "random", ""),
                                             (48, 64, "random", ""), (48, 128, "random", ""), (56, 64, "random", ""),
                                             # the mma.sync loop's whole blocks (CAKE_RT_DSA_MMA=sync on a Hopper)
                                             (8, 64, "random", "sync"), (32, 128, "ascending", "sync")])
def test_two_pass_blocks_against_reference(monkeypatch, H, D, kind, mma):
    """Whole blocks of every width. The widest: at H = 64 on sm_90a four queries a block, scored in two product passes a
    key tile from one key buffer (H = 128: two); at H = 8-56 blocks of 10 down to 2 queries, compacted together (CB).
    More queries than SMs keep the blocks whole, and 5000 keys overflow the candidate buffers (ascending scores: a
    compaction every few tiles). The unsplit plan is checked against the float64 reference; the default plan (parts of
    whole blocks and their merge) and a static schedule with another split give the same bits."""
    cupy = _cp()
    monkeypatch.setenv("CAKE_RT_DSA_MMA", mma)
    T, Tkv = cupy.cuda.Device().attributes["MultiProcessorCount"] + 9, 5000
    if kind == "ascending":
        host, dev = _ascending_inputs(97, T, Tkv, H=H, D=D)
    else:
        host, dev = make_inputs(95 + H + D, T, Tkv, H=H, D=D)
    unsplit = run_eager(dev, 2048, key_split=10 ** 6)
    check_against_reference(*unsplit, host, 2048)
    assert same_bits(unsplit, run_eager(dev, 2048)), (H, D, kind)
    assert same_bits(unsplit, run_eager(dev, 2048, key_split=1500, schedule="static")), (H, D, kind)


def test_rows_over_several_windows_run_unsplit():
    """Rows of more than 65,536 visible keys (a candidate's id is a 16-bit offset in its 65,536-key window of the
    unit, a unit spans up to 16 windows) run unsplit, with no workspace: the float64 reference, causal and not, and the
    same bits as a plan of one-window parts merged (few queries would be split over the SMs: key_split keeps them
    whole, as many queries do; a 128K-key prefill's plan: test_dsa_args.py)."""
    T = 40
    for causal, Tkv in ((False, 140_001), (True, 131_200)):
        host, dev = make_inputs(99 + causal, T, Tkv, H=8, D=64)
        assert _op().dsa_indexer_workspace_bytes(*dev, 2048, causal=causal, key_split=10 ** 6) == 0
        out = run_eager(dev, 2048, causal=causal, key_split=10 ** 6)
        check_against_reference(*out, host, 2048, causal=causal)
        assert same_bits(out, run_eager(dev, 2048, causal=causal, key_split=60_000, schedule="static")), causal
        # split parts of more than one window (70,016 keys: the windows' program on split units and their merge)
        assert same_bits(out, run_eager(dev, 2048, causal=causal, key_split=70_000)), causal


def test_a_block_over_the_unit_span_is_cut_into_parts():
    """A row of more than 1,048,576 keys (16 windows of 65,536: a unit's span) is always split: a part of the whole
    span (16 windows) and one of the last key, merged; the reference, and the same bits split otherwise."""
    Tkv = (1 << 20) + 1
    host, dev = make_inputs(98, 1, Tkv, H=8, D=64)
    out = run_eager(dev, 2048, causal=False, key_split=1 << 21)
    check_against_reference(*out, host, 2048, causal=False)
    assert out[0][0, -1] >= 0  # every row full
    assert same_bits(out, run_eager(dev, 2048, causal=False, key_split=300_000, schedule="static"))


@pytest.mark.parametrize("H, D, T, Tkv, key_split", [(72, 64, 1, 10_240, 2048), (32, 128, 141, 5000, 1024)])
def test_merge_streams_its_parts_and_makes_room_on_a_plateau(H, D, T, Tkv, key_split):
    """All scores equal: every part keeps all its keys (each is above any floor a histogram gives), so the merge holds
    more keys than the register selection reaches and streams them (stream_parts), cutting a full buffer to the topk
    largest on the way (make_room: one query a block at H = 72, whose merge buffer is the smallest); at H = 32 blocks of
    four queries (more queries than SMs), each query's parts streamed in turn. The ties go to the largest ids."""
    host, dev = _ascending_inputs(60 + H, T, Tkv, H=H, D=D, plateau=True)
    out = run_eager(dev, 2048, key_split=key_split)
    check_against_reference(*out, host, 2048)
    if T == 1:
        assert np.array_equal(out[0][0], np.arange(Tkv - 2048, Tkv))
    assert same_bits(out, run_eager(dev, 2048, key_split=10 ** 6))


def _class_inputs(seed, T, Tkv, H, D, top):
    """Scores of three levels (every key's score is its class's: q, w > 0 and a key is its class times e_0); the top
    class on the ids `top` only, so the k-th key is a tie the id order decides, across windows."""
    cupy = _cp()
    rng = np.random.default_rng(seed)
    q = np.zeros((T, H, D), np.float32)
    q[:, :, 0] = rng.uniform(0.5, 2.0, (T, H))
    cls = rng.integers(1, 3, Tkv).astype(np.float32)
    cls[top] = 3.0
    k = np.zeros((Tkv, D), np.float32)
    k[:, 0] = cls
    w = rng.uniform(0.01, 1.0, (T, H)).astype(np.float32)
    qb, kb = q.astype(BF16), k.astype(BF16)
    return cls, (cupy.asarray(qb), cupy.asarray(kb), cupy.asarray(w))


@pytest.mark.parametrize("blocks", ["one_query", "whole"])
@pytest.mark.parametrize("H", [8, 32, 64, 128])
@pytest.mark.parametrize("case", ["spread", "gap", "two_windows"])
def test_ties_across_windows_go_to_the_larger_id(case, H, blocks):
    """The k-th key is a tie between windows of one unit: the larger global id wins (its window decides, not its
    16-bit offset). "gap": no top-class key in the middle window (its run of the buffer empties). Blocks of one query
    (fewer queries than SMs) and whole blocks (more: the joint compactions and final selection)."""
    T = 37 if blocks == "one_query" else _cp().cuda.Device().attributes["MultiProcessorCount"] + 5
    Tkv = 65_537 + 2047 if case == "two_windows" else 200_003
    rng = np.random.default_rng(7 + H)
    if case == "gap":
        pool = np.r_[0:65_536, 131_072:Tkv]
    elif case == "two_windows":
        pool = np.r_[60_000:Tkv]  # the top class on both sides of 65,536
    else:
        pool = np.arange(Tkv)
    top = rng.choice(pool, 3000 if case != "two_windows" else 2500, replace=False)
    cls, dev = _class_inputs(11 + H, T, Tkv, H, 128 if H <= 64 else 64, top)
    ids = np.arange(Tkv)
    order = np.lexsort((ids, cls))[::-1]  # descending by (class, id)
    want = np.sort(order[:2048])
    idx, sc = run_eager(dev, 2048, causal=False, key_split=10 ** 6)  # unsplit: every query's unit spans the windows
    assert (idx == want[None, :]).all(), (case, H)
    assert same_bits((idx, sc), run_eager(dev, 2048, causal=False, key_split=50_000, schedule="static"))


# ------------------------------------------------------------------------------------------------ adversarial orders

def _ascending_inputs(seed, T, Tkv, H=32, D=128, plateau=False):
    """Scores that never decrease with the key id (every tile beats the running floor: a compaction every
    few tiles), or one all-equal plateau (the radix passes run down to the id bits)."""
    cupy = _cp()
    rng = np.random.default_rng(seed)
    q = np.zeros((T, H, D), np.float32)
    q[:, :, 0] = rng.uniform(0.5, 2.0, (T, H))
    k = np.zeros((Tkv, D), np.float32)
    k[:, 0] = 1.0 if plateau else np.linspace(0.25, 64.0, Tkv)
    w = rng.uniform(0.01, 1.0, (T, H)).astype(np.float32)
    qb, kb = q.astype(BF16), k.astype(BF16)
    return (qb, kb, w), (cupy.asarray(qb), cupy.asarray(kb), cupy.asarray(w))


@pytest.mark.parametrize("plateau", [False, True])
@pytest.mark.parametrize("H", [32, 64])
def test_adversarial_ascending_and_plateau_scores(plateau, H):
    host, dev = _ascending_inputs(80 + H, 70, 9000, H=H, plateau=plateau)
    for topk, kw in ((2048, {}), (2048, dict(key_split=10 ** 6)), (512, dict(key_split=700, schedule="static"))):
        out = run_eager(dev, topk, **kw)
        check_against_reference(*out, host, topk)
        if not kw:
            base = out
        elif topk == 2048:
            assert same_bits(base, out)
    if plateau:  # all scores equal: the largest visible ids, ascending
        idx = base[0]
        T, Tkv = 70, 9000
        for t in (0, 35, 69):
            end = Tkv - T + t + 1
            assert idx[t].tolist() == list(range(end - 2048, end))


@pytest.mark.parametrize("H", [32, 64])
@pytest.mark.parametrize("scores", ["random", "ascending", "descending"])
def test_split_parts_that_raise_their_floor(monkeypatch, scores, H):
    """One-query split parts of RFLOOR_TILES tiles or more run the program in which a part raises its floor from its
    block's histogram a third of the way through (DSA_RFLOOR): against the reference, and bit for bit the result of
    parts one tile shorter (the plain program) and of the unsplit call. Ascending scores: every tile beats the raised
    floor; descending: the first third holds the whole top-k and the rest falls below it."""
    import cake_rt.launch.compile as compile_mod

    dsa = _op()
    # (a plan is cached per shape: each case has its own, so that each launches its program through get_kernel)
    T, Tkv, topk = 4, {"random": 30011, "ascending": 30029, "descending": 30047}[scores] + H, 2048
    if scores == "random":
        host, dev = make_inputs(60 + H, T, Tkv, H=H)
    else:
        host, dev = _ascending_inputs(62 + H, T, Tkv, H=H)
        if scores == "descending":
            cupy = _cp()
            host = (host[0], np.ascontiguousarray(host[1][::-1]), host[2])
            dev = (dev[0], cupy.asarray(host[1]), dev[2])
    programs = []
    real = compile_mod.get_kernel
    monkeypatch.setattr(compile_mod, "get_kernel", lambda *a, **k: programs.append(k.get("defines")) or real(*a, **k))
    raised = run_eager(dev, topk, key_split=dsa.RFLOOR_TILES * 128)
    assert programs and all(d.get("DSA_RFLOOR") == 1 for d in programs), programs
    check_against_reference(*raised, host, topk)
    programs.clear()
    shorter = run_eager(dev, topk, key_split=(dsa.RFLOOR_TILES - 1) * 128, schedule="static")
    assert programs and not any("DSA_RFLOOR" in d for d in programs), programs
    assert same_bits(raised, shorter)
    assert same_bits(raised, run_eager(dev, topk, key_split=10 ** 6))


# ------------------------------------------------------------------------------------------------ program cases

PROGRAM_CASES = {
    # many compactions per query inside one unit (no key split), partial last tile, T not a multiple of BQ
    "long_rows_unsplit": dict(seed=50, T=67, Tkv=9001, topk=2048, kw=dict(key_split=10 ** 6)),
    # few queries: one query per block, the key range split, the parts merged by the last arrival
    "long_rows_split": dict(seed=51, T=9, Tkv=12345, topk=2048, kw={}),
    "h64": dict(seed=52, T=41, Tkv=7000, topk=2048, H=64, kw=dict(key_split=10 ** 6)),
    # compaction boundary inside exact 0.0 plateaus: the radix passes run down to the id bits
    "zero_plateau": dict(seed=53, T=40, Tkv=6000, topk=700, kw=dict(causal=False, key_split=10 ** 6),
                         make=dict(positive_q=True, negative_frac=0.8, dup_pairs=40)),
    # topk close to the program's limit: tight buffers, a merge round on top of topk
    "topk_3000": dict(seed=54, T=12, Tkv=8000, topk=3000, kw=dict(key_split=10 ** 6)),
    "small_topk": dict(seed=55, T=130, Tkv=2000, topk=37, kw={}),
    # A-row geometry: 4 queries, 22018 keys, one launch
    "a1_tail": dict(seed=56, T=4, Tkv=22018, topk=2048, kw={}),
    # the largest topk of the H = 32, D = 128 programs (CAP - TILE: no compaction slack; parts of one tile, merged)
    "topk_max": dict(seed=57, T=3, Tkv=8192, topk=3968, kw={}),
}


@pytest.mark.parametrize("mma", ["", "sync"])
@pytest.mark.parametrize("case", sorted(PROGRAM_CASES))
def test_program_cases_reference_and_entries(monkeypatch, case, mma):
    """Against the reference (wgmma program; the mma.sync program on this GPU with CAKE_RT_DSA_MMA=sync),
    then the same bits from a split / unsplit plan, the static schedule and a prepared runner run twice."""
    c = PROGRAM_CASES[case]
    H = c.get("H", 32)
    host, dev = make_inputs(c["seed"], c["T"], c["Tkv"], H=H, **c.get("make", {}))
    monkeypatch.setenv("CAKE_RT_DSA_MMA", mma)
    causal = c["kw"].get("causal", True)
    base = run_eager(dev, c["topk"], **c["kw"])
    check_against_reference(*base, host, c["topk"], causal=causal)
    other = dict(causal=causal, key_split=(1000 if "key_split" in c["kw"] else 10 ** 6), schedule="static")
    assert same_bits(base, run_eager(dev, c["topk"], **other)), case
    cupy = _cp()
    from cake_rt.launch.grid import record_launches

    for sched in ("ticket", "static"):
        idx, sc = poisoned(c["T"], c["topk"])
        r = _op().prepare_dsa_indexer_det_topk(*dev, c["topk"], indices=idx, scores=sc, schedule=sched, **c["kw"])
        assert r.launches_per_call == 1
        for _ in range(2):
            with record_launches() as recs:
                r()
            assert [x.name for x in recs] == ["dsa_scan"]
            cupy.cuda.get_current_stream().synchronize()
            assert same_bits(base, (idx.get(), sc.get())), (case, sched)
            idx.fill(POISON_IDX)  # both outputs: the second run must write every index and score again
            sc.fill(np.nan)
        assert (r.tickets is not None) == r._dp.reads_words(sched), (case, sched)  # words where the launch reads them
        if r.tickets is not None:
            assert np.all(r.tickets.read() == 0)  # ticket word and arrival words


# ------------------------------------------------------------------------------------------------ determinism

@pytest.fixture(scope="module")
def det_problem():
    cu_q = np.array([0, 300, 301, 557], np.int32)
    cu_k = np.array([0, 4000, 4100, 6000], np.int32)
    off = np.array([3700, 50, 1700], np.int32)
    host, dev = make_inputs(20, 557, 6000)
    meta = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, q_causal_offsets=off)
    return host, dev, meta


def test_bitwise_identical_across_runs_schedules_splits_entries(det_problem):
    cupy = _cp()
    host, dev, meta = det_problem
    topk = 2048
    base = run_eager(dev, topk, schedule="ticket", **meta)
    check_against_reference(*base, host, topk, meta["cu_seqlens_q"], meta["cu_seqlens_k"],
                            meta["q_causal_offsets"])
    variants = [dict(schedule="ticket"), dict(schedule="static"), dict(key_split=128), dict(key_split=1000),
                dict(key_split=1, schedule="static"), dict(key_split=10 ** 7)]
    for v in variants:
        assert same_bits(base, run_eager(dev, topk, **meta, **v)), v
    for sched in ("ticket", "static"):
        idx, sc = poisoned(dev[0].shape[0], topk)
        runner = _op().prepare_dsa_indexer_det_topk(*dev, topk, **meta, indices=idx, scores=sc, schedule=sched)
        for _ in range(2):
            runner()
            cupy.cuda.get_current_stream().synchronize()
            assert same_bits(base, (idx.get(), sc.get())), sched
            idx.fill(POISON_IDX)
            sc.fill(np.nan)
        if runner.tickets is not None:
            assert np.all(runner.tickets.read() == 0)


@pytest.mark.parametrize("held", [1, 32])
def test_bitwise_identical_while_side_stream_holds_sms(det_problem, held):
    cupy = _cp()
    host, dev, meta = det_problem
    topk = 512
    base = run_eager(dev, topk, **meta)
    from cake_rt.bench.spinner import SMHolder

    holder = SMHolder()
    main = cupy.cuda.Stream(non_blocking=True)
    for sched in ("ticket", "static"):
        for ks in (None, 300):  # also a split plan: the last-arrival merges with SMs held
            idx, sc = poisoned(dev[0].shape[0], topk)
            runner = _op().prepare_dsa_indexer_det_topk(*dev, topk, **meta, indices=idx, scores=sc, schedule=sched,
                                                        key_split=ks)
            with holder.hold(held):  # the holders are resident before the call starts
                runner(stream=main)
                main.synchronize()
            assert same_bits(base, (idx.get(), sc.get())), (sched, ks)


def test_graph_capture_replays_prepared_and_eager(det_problem):
    cupy = _cp()
    host, dev, meta = det_problem
    topk = 256
    base = run_eager(dev, topk, **meta)
    s = cupy.cuda.Stream(non_blocking=True)
    idx, sc = poisoned(dev[0].shape[0], topk)
    runner = _op().prepare_dsa_indexer_det_topk(*dev, topk, **meta, indices=idx, scores=sc, schedule="ticket")
    sidx, ssc = poisoned(dev[0].shape[0], topk)  # a prepared runner of a split plan (parts and their merge)
    split_runner = _op().prepare_dsa_indexer_det_topk(*dev, topk, **meta, indices=sidx, scores=ssc, key_split=200)
    ws_bytes = _op().dsa_indexer_workspace_bytes(*dev, topk, **meta, key_split=200)
    ws = cupy.empty(max(ws_bytes, 1), dtype=cupy.uint8)
    eidx, esc = poisoned(dev[0].shape[0], topk)
    eager = dict(indices=eidx, scores=esc, workspace=ws, stream=s, key_split=200, schedule="ticket")
    _op().dsa_indexer_det_topk(*dev, topk, **meta, **eager)  # warm: plan, ticket words of stream s
    s.synchronize()
    s.begin_capture()
    runner(stream=s)
    _op().dsa_indexer_det_topk(*dev, topk, **meta, **eager)
    split_runner(stream=s)
    graph = s.end_capture()
    for _ in range(3):
        with s:
            for a, b in ((idx, sc), (eidx, esc), (sidx, ssc)):
                a.fill(POISON_IDX)
                b.fill(np.nan)
        graph.launch(s)
        s.synchronize()
        assert same_bits(base, (idx.get(), sc.get()))
        assert same_bits(base, (eidx.get(), esc.get()))
        assert same_bits(base, (sidx.get(), ssc.get()))
    assert (runner.tickets is not None) == runner._dp.draws("ticket")  # no split: words only to draw units
    assert runner.tickets is None or np.all(runner.tickets.read() == 0)
    assert split_runner.plan.nsplit > 0 and np.all(split_runner.tickets.read() == 0)  # its arrival words too
    from cake_rt.launch.streams import stream_state

    words = stream_state(cupy.cuda.Device().id, s.ptr).tickets
    assert words and all(np.all(w.read() == 0) for w in words.values())  # the eager call's words, left at zero


def test_eager_capture_with_device_metadata_is_a_clear_error(det_problem):
    cupy = _cp()
    host, dev, meta = det_problem
    s = cupy.cuda.Stream(non_blocking=True)
    idx, sc = poisoned(dev[0].shape[0], 16)
    s.begin_capture()
    try:
        with pytest.raises(ValueError, match="cu_seqlens_q"):
            _op().dsa_indexer_det_topk(*dev, 16, cu_seqlens_q=cupy.asarray(meta["cu_seqlens_q"]),
                                       cu_seqlens_k=cupy.asarray(meta["cu_seqlens_k"]), indices=idx, scores=sc,
                                       stream=s)
    finally:
        s.end_capture()


def test_eager_with_workspace_launches_only_scan_kernels(det_problem):
    cupy = _cp()
    from cake_rt.launch.grid import record_launches

    host, dev, meta = det_problem
    topk = 128
    for key_split, expect in ((None, ["dsa_scan"]), (300, ["dsa_scan"])):
        nbytes = _op().dsa_indexer_workspace_bytes(*dev, topk, **meta, key_split=key_split)
        ws = cupy.empty(max(nbytes, 1), dtype=cupy.uint8)
        idx, sc = poisoned(dev[0].shape[0], topk)
        _op().dsa_indexer_det_topk(*dev, topk, **meta, indices=idx, scores=sc, workspace=ws, key_split=key_split)
        with record_launches() as recs:
            _op().dsa_indexer_det_topk(*dev, topk, **meta, indices=idx, scores=sc, workspace=ws,
                                       key_split=key_split)
        assert [r.name for r in recs] == expect


def test_ticket_word_rezeroed_after_failed_launch(det_problem):
    cupy = _cp()
    host, dev, meta = det_problem
    topk = 64
    base = run_eager(dev, topk, **meta)
    idx, sc = poisoned(dev[0].shape[0], topk)
    # A split plan: its launch reads the words (the split blocks' arrival records), whatever the grid's size.
    runner = _op().prepare_dsa_indexer_det_topk(*dev, topk, **meta, indices=idx, scores=sc, schedule="ticket",
                                                key_split=200)
    assert runner.plan.nsplit > 0 and runner.tickets is not None
    # Simulate a launch that raised after the words were touched: garbage in them, marked dirty.
    runner.tickets.array.fill(12345)
    cupy.cuda.Device().synchronize()
    runner.tickets.mark_dirty()
    s = cupy.cuda.Stream(non_blocking=True)
    runner(stream=s)
    s.synchronize()
    assert same_bits(base, (idx.get(), sc.get()))
    assert np.all(runner.tickets.read() == 0)


# ------------------------------------------------------------------------------------------------ errors

def test_bad_arguments_on_device_leave_outputs_untouched():
    cupy = _cp()
    _, (q, k, w) = make_inputs(30, 16, 400)
    op = _op().dsa_indexer_det_topk
    idx, sc = poisoned(16, 8)
    cases = [
        (TypeError, "q", dict(q=q.astype(cupy.float32))),
        (ValueError, "q", dict(q=q[:, :12])),
        (ValueError, "q", dict(q=cupy.concatenate([q, q, q, q, q], axis=1)[:, :136])),
        (ValueError, "q", dict(q=q[:, :, :96])),
        (ValueError, "q", dict(q=cupy.ascontiguousarray(q.transpose(1, 0, 2)).transpose(1, 0, 2))),
        (ValueError, "k", dict(k=k[:, :64])),
        (TypeError, "k", dict(k=k.astype(cupy.float32))),
        (ValueError, "weights", dict(w=w[:8])),
        (TypeError, "weights", dict(w=w.astype(cupy.float64))),
        (TypeError, "indices", dict(indices=cupy.zeros((16, 8), cupy.int64))),
        (ValueError, "scores", dict(scores=cupy.zeros((16, 9), cupy.float32))),
        (ValueError, "cu_seqlens_k", dict(cu_seqlens_q=np.array([0, 16], np.int32),
                                          cu_seqlens_k=np.array([0, 399], np.int32))),
        (ValueError, "workspace", dict(workspace=cupy.empty(1, cupy.uint8), key_split=128)),
        (TypeError, "workspace", dict(workspace=cupy.empty(10 ** 7, cupy.int32), key_split=128)),
    ]
    for exc, name, over in cases:
        args = dict(q=q, k=k, w=w, indices=idx, scores=sc)
        args.update(over)
        kw = {n: v for n, v in args.items() if n not in ("q", "k", "w")}
        with pytest.raises(exc, match=name):
            op(args["q"], args["k"], args["w"], 8, **kw)
    cupy.cuda.Device().synchronize()
    assert np.all(idx.get() == POISON_IDX) and np.all(np.isnan(sc.get()))
    with pytest.raises(ValueError, match="indices"):
        _op().prepare_dsa_indexer_det_topk(q, k, w, 8, scores=sc)


@pytest.mark.parametrize("W", [1, 3])
def test_cp_zigzag_layout_ranks_equal_the_unsplit_call_bit_for_bit(W):
    # The spec: bits independent of key splitting and CP layout. Every rank of cake_rt.cp_zigzag_layout (zero-length
    # documents, chunks of odd length), every schedule and a forced key split, against one unsplit call.
    from cake_rt.cp import cp_zigzag_layout

    cupy = _cp()
    doc_lens = [42 * W, 0, 18 * W, 6 * W, 0, 96 * W]
    total = sum(doc_lens)
    (q, k, w), dev = make_inputs(31 + W, total, total, H=64, D=128, negative_frac=0.3, dup_pairs=20)
    cu = np.cumsum([0] + doc_lens).astype(np.int32)
    topk = 40
    full_i, full_s = run_eager(dev, topk, cu_seqlens_q=cu, cu_seqlens_k=cu)
    check_against_reference(full_i, full_s, (q, k, w), topk, cu, cu)
    seen = np.zeros(total, dtype=np.int64)
    for r in range(W):
        lay = cp_zigzag_layout(doc_lens, W, r)
        rank_dev = tuple(cupy.asarray(a) for a in (q[lay.q_index], k[lay.k_index], w[lay.q_index]))
        for extra in ({}, {"schedule": "static"}, {"schedule": "ticket", "key_split": 64}):
            i, s = run_eager(rank_dev, topk, **lay.indexer_kwargs(), **extra)
            np.testing.assert_array_equal(lay.to_global_keys(i), full_i[lay.q_index], err_msg=f"rank {r} {extra}")
            np.testing.assert_array_equal(s.view(np.uint32), full_s[lay.q_index].view(np.uint32),
                                          err_msg=f"rank {r} {extra}: score bits")
        seen[lay.q_index] += 1
    assert (seen == 1).all()
