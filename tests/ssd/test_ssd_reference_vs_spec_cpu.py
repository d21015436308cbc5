"""The float64 SSD reference (``cake_rt.reference.ssd``) against an implementation written from the contract's text
alone (shared/spec/ssd_combined.md, "Arguments" and "Math"), on fresh random inputs and adversarial layouts.

The GPU tests compare the kernels with ``cake_rt.reference``: a misreading shared by the reference and the kernels
(the order of bias / softplus / clamp, the group of a head, which segment gets which initial state, which chunks are
checkpointed and in what order) would pass every one of them. ``spec_ssd`` below is deliberately written another way
(Python scalars for dt', one head at a time, segments found by walking the tokens, the gate through tanh), so it
shares no code and as little structure as possible with the reference.
"""
import itertools
import math

import numpy as np
import pytest

from cake_rt.ops.ssd import _build_table, _segments_from_runs
from cake_rt.reference.ssd import preprocess_dt, reference_segments, ssd_reference, ssd_reference_chunked

REFS = [ssd_reference, ssd_reference_chunked]
TOL = 1e-10  # float64 against float64: only the summation order differs


# ------------------------------------------------------------------------------------------------------------------
# The contract, written out
def spec_dt_scalar(dt, bias, softplus, dt_limit):
    """dt' = clamp(softplus?(dt + dt_bias), lo, hi): bias first, then softplus (log1p(exp(v)), v itself for v > 20),
    then the clamp, which applies only when dt_limit is not the default (0, inf)."""
    v = float(dt) + float(bias)
    if softplus:
        v = v if v > 20.0 else math.log1p(math.exp(v))
    lo, hi = float(dt_limit[0]), float(dt_limit[1])
    if not (lo == 0.0 and hi == math.inf):
        v = min(max(v, lo), hi)
    return v


def spec_segments(batch, seqlen, seq_idx, cu_seqlens):
    """[(row, first token, end token, initial-state index or None)], in segment-major order."""
    out = []
    if cu_seqlens is not None:
        for s in range(len(cu_seqlens) - 1):
            out.append((0, int(cu_seqlens[s]), int(cu_seqlens[s + 1]), s))
        return out
    for b in range(batch):
        if seq_idx is None:
            out.append((b, 0, seqlen, b))
            continue
        first = 0
        for t in range(1, seqlen + 1):
            if t == seqlen or seq_idx[b][t] != seq_idx[b][t - 1]:
                out.append((b, first, t, b if first == 0 else None))  # later runs of a row start from zeros
                first = t
        if seqlen == 0:
            out.append((b, 0, 0, b))
    return out


def spec_ssd(x, dt, A, B, C, chunk, *, D=None, z=None, dt_bias=None, initial_states=None, seq_idx=None,
             cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, math.inf), final=False, varlen=False, chunks=False):
    x = np.asarray(x, np.float64)
    batch, L, H, P = x.shape
    G, N = np.shape(B)[2], np.shape(B)[3]
    heads_per_group = H // G
    y = np.zeros((batch, L, H, P))
    finals = np.zeros((batch, H, P, N))
    varlens, ckpts = [], []
    for (b, t0, t1, init) in spec_segments(batch, L, seq_idx, cu_seqlens):
        state = np.zeros((H, P, N))
        if init is not None and initial_states is not None:
            state = np.array(initial_states[init], np.float64)
        for t in range(t0, t1):
            for h in range(H):
                g = h // heads_per_group
                d = spec_dt_scalar(dt[b][t][h], 0.0 if dt_bias is None else dt_bias[h], dt_softplus, dt_limit)
                Bt = np.asarray(B[b][t][g], np.float64)
                Ct = np.asarray(C[b][t][g], np.float64)
                xt = x[b, t, h]
                state[h] = math.exp(d * float(A[h])) * state[h] + d * np.outer(xt, Bt)
                out = state[h] @ Ct
                if D is not None:
                    Dh = np.asarray(D, np.float64)[h]
                    out = out + Dh * xt  # a scalar per head or a [headdim] row
                if z is not None:
                    zt = np.asarray(z, np.float64)[b, t, h]
                    out = out * zt * (0.5 + 0.5 * np.tanh(0.5 * zt))  # sigmoid(z) = (1 + tanh(z / 2)) / 2
                y[b, t, h] = out
            if (t - t0 + 1) % chunk == 0:  # a complete chunk of this segment (chunks start at t0)
                ckpts.append(state.copy())
        varlens.append(state.copy())
        finals[b] = state  # the row's last segment is written last
    res = [y]
    if final:
        res.append(finals)
    if varlen:
        res.append(np.stack(varlens) if varlens else np.zeros((0, H, P, N)))
    if chunks:
        res.append(np.stack(ckpts) if ckpts else np.zeros((0, H, P, N)))
    return res[0] if len(res) == 1 else tuple(res)


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    n = np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / n) if n else float(np.linalg.norm(a))


def assert_same(got, want, tol=TOL):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, (i, g.shape, w.shape)
        assert np.all(np.isfinite(g)), i
        assert rel(g, w) <= tol, (i, rel(g, w))


def inputs(rng, b, L, H, P, G, N, *, init_rows=None):
    x = rng.standard_normal((b, L, H, P))
    dt = rng.standard_normal((b, L, H)) * 1.5 - 0.5
    A = -np.exp(rng.standard_normal(H) * 0.5) * 0.3
    B = rng.standard_normal((b, L, G, N))
    C = rng.standard_normal((b, L, G, N))
    opt = dict(D=rng.standard_normal(H), z=rng.standard_normal((b, L, H, P)) * 2.5,
               dt_bias=rng.standard_normal(H) * 0.5,
               initial_states=rng.standard_normal((b if init_rows is None else init_rows, H, P, N)))
    return (x, dt, A, B, C), opt


def both(args, chunk, flags, **kw):
    """(spec, [reference results]) with the same arguments."""
    want = spec_ssd(*args, chunk, **kw, final=flags[0], varlen=flags[1], chunks=flags[2])
    got = [r(*args, chunk, **kw, return_final_states=flags[0], return_varlen_states=flags[1],
             return_chunk_states=flags[2]) for r in REFS]
    return want, got


# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("G", [1, 2, 6])
def test_batched_odd_sizes_every_option(G):
    rng = np.random.default_rng(100 + G)
    args, opt = inputs(rng, 2, 13, 6, 3, G, 5)
    want, got = both(args, 4, (True, False, True), dt_softplus=True, **opt)
    for g in got:
        assert_same(g, want)
    assert want[2].shape == (2 * 3, 6, 3, 5)  # floor(13 / 4) = 3 checkpoints per row, row 0's first


def test_group_of_a_head_is_h_div_heads_per_group():
    """Distinct B/C per group: head h must use group h // (nheads // ngroups), not h % ngroups."""
    rng = np.random.default_rng(7)
    args, opt = inputs(rng, 1, 6, 4, 2, 2, 3)
    want = spec_ssd(*args, 4, final=True)
    for r in REFS:
        assert_same(r(*args, 4, return_final_states=True), want)
    # h % ngroups would give something else: the check above can tell the two mappings apart
    x, dt, A, B, C = args
    mod = [h % 2 for h in range(4)]
    alt = spec_ssd(x, dt, A, B[:, :, mod], C[:, :, mod], 4, final=True)  # one group per head, h % 2's
    assert rel(alt[0], want[0]) > 1e-3


@pytest.mark.parametrize("dp", [False, True])
def test_D_per_head_and_per_head_and_headdim(dp):
    rng = np.random.default_rng(11)
    args, opt = inputs(rng, 2, 9, 4, 3, 2, 4)
    D = rng.standard_normal((4, 3)) if dp else rng.standard_normal(4)
    want, got = both(args, 4, (True, False, False), D=D, dt_bias=opt["dt_bias"], dt_softplus=True)
    for g in got:
        assert_same(g, want)


def test_gate_is_silu_of_z_and_survives_large_z():
    rng = np.random.default_rng(12)
    args, opt = inputs(rng, 1, 7, 2, 4, 1, 3)
    z = rng.standard_normal((1, 7, 2, 4)) * 3
    z[0, 0] = 60.0   # sigmoid -> 1
    z[0, 1] = -60.0  # exp(-z) overflows nothing in float64, but y must go to ~0, not NaN
    z[0, 2, 0] = 0.0
    want, got = both(args, 4, (False, False, False), D=opt["D"], z=z, dt_softplus=True)
    for g in got:
        assert np.all(np.isfinite(g))
        assert_same(g, want)
    assert np.all(np.abs(want[0, 1]) < 1e-20)
    assert np.all(want[0, 2, 0] == 0.0)


# ------------------------------------------------------------------------------------------------------------------
# dt'
DT_LIMITS = [(0.0, math.inf), (0.05, 5.0), (-1.0, 0.3), (0.0, 1.0), (0.7, 0.7), (-math.inf, 2.0)]


@pytest.mark.parametrize("softplus", [False, True])
@pytest.mark.parametrize("limit", DT_LIMITS)
@pytest.mark.parametrize("with_bias", [False, True])
def test_preprocess_dt_order_threshold_and_default_limit(softplus, limit, with_bias):
    # values around softplus's switch at 20 (20 itself takes log1p(exp(20))), far negative and positive, and
    # negative sums (default limit: no clamp, so they stay negative without softplus)
    dt = np.array([[-40.0, -3.0, -0.2, 0.0, 0.4, 19.5, 20.0, 20.0 + 1e-9, 21.0, 60.0]] * 2).T  # [10, 2]
    bias = np.array([0.0, -2.5]) if with_bias else None
    got = preprocess_dt(dt, bias, softplus, limit)
    want = np.array([[spec_dt_scalar(dt[t, h], 0.0 if bias is None else bias[h], softplus, limit)
                      for h in range(2)] for t in range(dt.shape[0])])
    assert got.shape == want.shape
    assert np.allclose(got, want, rtol=1e-15, atol=0.0), (got - want)


def test_preprocess_dt_bias_before_softplus_before_clamp():
    """A value where every other order differs: dt + bias = -3, softplus -> 0.0486, clamp to [0.5, 2] -> 0.5."""
    dt, bias = np.array([[-1.0]]), np.array([-2.0])
    v = preprocess_dt(dt, bias, True, (0.5, 2.0))
    assert v[0, 0] == 0.5
    v = preprocess_dt(dt, bias, True, (0.0, 2.0))  # lo = 0 still clamps (the pair is not the default)
    assert abs(v[0, 0] - math.log1p(math.exp(-3.0))) < 1e-16
    v = preprocess_dt(np.array([[-1.0]]), np.array([-2.0]), False, (0.0, math.inf))
    assert v[0, 0] == -3.0  # the default (0, inf) is no clamp at all


@pytest.mark.parametrize("softplus", [False, True])
@pytest.mark.parametrize("limit", [(0.0, math.inf), (0.05, 0.9), (0.0, 0.5)])
def test_dt_rules_through_the_whole_recurrence(softplus, limit):
    rng = np.random.default_rng(21)
    args, opt = inputs(rng, 2, 11, 3, 2, 3, 3)
    x, dt, A, B, C = args
    dt = dt.copy()
    dt[0, 2, :] = 25.0   # over the softplus threshold
    dt[1, 3, :] = 20.0   # on it
    if not softplus:
        dt = np.abs(dt) * 0.2  # no softplus: keep the recurrence from blowing up, but some sums stay negative
    args = (x, dt, A, B, C)
    want, got = both(args, 4, (True, False, True), dt_bias=opt["dt_bias"] * 0.3, dt_softplus=softplus,
                     dt_limit=limit, initial_states=opt["initial_states"])
    for g in got:
        assert_same(g, want)


# ------------------------------------------------------------------------------------------------------------------
# Segments: seq_idx runs, cu_seqlens, initial states, the states returned
SEQ_IDX_ROWS = [
    # one-token runs, a run starting exactly on a chunk edge (4, 8), a run ending on one
    [0, 0, 0, 0, 1, 1, 1, 1, 2, 3, 3, 3, 3, 3],
    # a first run of one token, ids that come back later (a new run, not the old sequence), a last one-token run
    [5, 7, 7, 7, 7, 7, 5, 5, 5, 5, 5, 5, 5, 9],
]


@pytest.mark.parametrize("with_init", [False, True])
def test_seq_idx_runs_reset_and_initial_state_only_for_a_rows_first_run(with_init):
    rng = np.random.default_rng(31)
    L = len(SEQ_IDX_ROWS[0])
    args, opt = inputs(rng, 2, L, 4, 3, 2, 3)
    seq_idx = np.array(SEQ_IDX_ROWS, np.int32)
    kw = dict(D=opt["D"], z=opt["z"], dt_bias=opt["dt_bias"], dt_softplus=True, seq_idx=seq_idx)
    if with_init:
        kw["initial_states"] = opt["initial_states"]
    want, got = both(args, 4, (True, False, True), **kw)
    for g in got:
        assert_same(g, want)
    # checkpoints: row 0 runs of 4, 4, 1, 5 tokens -> 1 + 1 + 0 + 1; row 1 runs of 1, 5, 7, 1 -> 0 + 1 + 1 + 0
    assert want[2].shape[0] == 5
    # the reference's segment list is the contract's
    ref_segs = [(b, s0, s1, None if ii < 0 else ii) for (b, s0, s1, ii, _) in reference_segments(2, L, seq_idx)]
    assert ref_segs == spec_segments(2, L, seq_idx, None)


def test_seq_idx_segment_equals_an_independent_call():
    """A later seq_idx run of a row is the same computation as that run alone, from a zero state."""
    rng = np.random.default_rng(32)
    args, opt = inputs(rng, 1, 12, 2, 3, 1, 4)
    seq_idx = np.array([[0] * 5 + [1] * 7], np.int32)
    y, fin = ssd_reference(*args, 4, seq_idx=seq_idx, initial_states=opt["initial_states"], dt_softplus=True,
                           return_final_states=True)
    tail = tuple(a[:, 5:] if a.ndim >= 2 else a for a in args)
    y2, fin2 = spec_ssd(*tail, 4, dt_softplus=True, final=True)
    assert rel(y[:, 5:], y2) <= TOL and rel(fin, fin2) <= TOL


CU_CASES = [
    [0, 1, 0, 4, 9, 0, 8, 1],   # empty first-but-one, single tokens, a chunk, 2 chunks + 1, two chunks, one token
    [0, 0, 3],                  # empty sequences first, one shorter than a chunk
    [4, 0],                     # a last sequence that is empty: final = its initial state
    [12],                       # one sequence, exact chunks
    [0],                        # nothing at all
]


@pytest.mark.parametrize("lens", CU_CASES)
@pytest.mark.parametrize("with_init", [False, True])
def test_cu_seqlens_empty_single_token_and_per_sequence_initial_states(lens, with_init):
    rng = np.random.default_rng(41 + len(lens))
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    L = int(cu[-1])
    args, opt = inputs(rng, 1, L, 4, 3, 2, 3, init_rows=len(lens))
    kw = dict(D=rng.standard_normal((4, 3)), z=opt["z"], dt_bias=opt["dt_bias"], dt_softplus=True, cu_seqlens=cu)
    if with_init:
        kw["initial_states"] = opt["initial_states"]
    want, got = both(args, 4, (True, True, True), **kw)
    for g in got:
        assert_same(g, want)
    y, final, varlen, chunks = want
    assert final.shape == (1, 4, 3, 3) and varlen.shape == (len(lens), 4, 3, 3)
    assert np.array_equal(final[0], varlen[-1])
    assert chunks.shape[0] == sum(n // 4 for n in lens)
    for s, n in enumerate(lens):
        if n == 0:  # an empty sequence returns its initial state (zeros without one)
            expect = opt["initial_states"][s] if with_init else np.zeros((4, 3, 3))
            for g in got:
                assert np.array_equal(g[2][s], expect)


def test_cu_seqlens_with_an_agreeing_seq_idx_changes_nothing():
    rng = np.random.default_rng(45)
    lens = [3, 0, 6, 5]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    args, opt = inputs(rng, 1, int(cu[-1]), 2, 3, 1, 3, init_rows=len(lens))
    seq_idx = np.repeat(np.array([0, 1, 2, 3], np.int32), lens)[None]
    for r in REFS:
        a = r(*args, 4, cu_seqlens=cu, initial_states=opt["initial_states"], return_varlen_states=True)
        b = r(*args, 4, cu_seqlens=cu, seq_idx=seq_idx, initial_states=opt["initial_states"],
              return_varlen_states=True)
        for u, v in zip(a, b):
            assert np.array_equal(u, v)


def test_chunk_states_are_segment_major_and_count_only_complete_chunks():
    """Checkpoint k of segment s is the state after token s0 + (k + 1) * chunk - 1, segment 0's first."""
    rng = np.random.default_rng(51)
    lens = [9, 3, 8, 4]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    args, opt = inputs(rng, 1, int(cu[-1]), 2, 2, 2, 3, init_rows=len(lens))
    kw = dict(cu_seqlens=cu, initial_states=opt["initial_states"], dt_softplus=True, dt_bias=opt["dt_bias"])
    expect = []
    x, dt, A, B, C = args
    for s, n in enumerate(lens):
        for k in range(n // 4):
            end = int(cu[s]) + (k + 1) * 4
            part = tuple(a[:, int(cu[s]):end] if a.ndim >= 2 else a for a in args)
            expect.append(spec_ssd(*part, 4, initial_states=opt["initial_states"][s:s + 1], dt_softplus=True,
                                   dt_bias=opt["dt_bias"], final=True)[1][0])
    for r in REFS:
        ck = r(*args, 4, **kw, return_chunk_states=True)[1]
        assert ck.shape == (len(expect), 2, 2, 3)
        for got, want in zip(ck, expect):
            assert rel(got, want) <= TOL


def test_final_states_are_each_rows_last_segment():
    rng = np.random.default_rng(52)
    args, opt = inputs(rng, 3, 10, 2, 2, 1, 3)
    seq_idx = np.array([[0] * 10, [0] * 6 + [1] * 4, [0] * 9 + [3]], np.int32)
    for r in REFS:
        y, fin = r(*args, 4, seq_idx=seq_idx, initial_states=opt["initial_states"], return_final_states=True)
        for b, start in ((0, 0), (1, 6), (2, 9)):
            part = tuple(a[b:b + 1, start:] if a.ndim >= 2 else a for a in args)
            init = opt["initial_states"][b:b + 1] if start == 0 else None
            want = spec_ssd(*part, 4, initial_states=init, final=True)[1][0]
            assert rel(fin[b], want) <= TOL


def test_seqlen_zero_returns_the_initial_states():
    rng = np.random.default_rng(53)
    args, opt = inputs(rng, 2, 0, 2, 3, 1, 4)
    for r in REFS:
        y, fin, ck = r(*args, 4, initial_states=opt["initial_states"], return_final_states=True,
                       return_chunk_states=True)
        assert y.shape == (2, 0, 2, 3) and ck.shape == (0, 2, 3, 4)
        assert np.array_equal(fin, opt["initial_states"])


@pytest.mark.parametrize("flags", list(itertools.product([False, True], repeat=3)))
def test_return_tuple_holds_those_asked_for_in_order(flags):
    rng = np.random.default_rng(61)
    lens = [5, 0, 4]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    args, opt = inputs(rng, 1, int(cu[-1]), 2, 2, 1, 2, init_rows=3)
    want, got = both(args, 4, flags, cu_seqlens=cu, initial_states=opt["initial_states"], dt_softplus=True)
    for g in got:
        assert_same(g, want)


def test_real_chunk_size_with_boundaries_on_chunk_edges():
    """chunk 64 (a size the op takes), sequences ending exactly on, one before and one after a chunk edge."""
    rng = np.random.default_rng(71)
    lens = [64, 63, 65, 1, 128]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    args, opt = inputs(rng, 1, int(cu[-1]), 2, 4, 1, 4, init_rows=len(lens))
    kw = dict(D=opt["D"], z=opt["z"], dt_bias=opt["dt_bias"], dt_softplus=True, dt_limit=(0.001, 0.2),
              cu_seqlens=cu, initial_states=opt["initial_states"])
    want, got = both(args, 64, (True, True, True), **kw)
    for g in got:
        assert_same(g, want)
    assert want[3].shape[0] == 1 + 0 + 1 + 0 + 2


# ------------------------------------------------------------------------------------------------------------------
# The op's own segment tables (what the kernels read) against the contract
@pytest.mark.parametrize("rows", [SEQ_IDX_ROWS, [[3] * 14, [0] * 13 + [1]]])
def test_op_segments_from_seq_idx_runs(rows):
    seq_idx = np.array(rows, np.int32)
    b, L = seq_idx.shape
    got = [(r, s0, s1, None if ii < 0 else ii) for (r, s0, s1, ii, _) in _segments_from_runs(seq_idx, b, L)]
    assert got == spec_segments(b, L, seq_idx, None)
    lasts = [last for (*_, last) in _segments_from_runs(seq_idx, b, L)]
    rows_of = [r for (r, *_) in got]
    assert lasts == [i == len(rows_of) - 1 or rows_of[i + 1] != r for i, r in enumerate(rows_of)]


@pytest.mark.parametrize("chunk", [64, 128, 256])
def test_op_table_counts_checkpoints_per_segment(chunk):
    lens = [0, 1, chunk - 1, chunk, chunk + 1, 3 * chunk, 0]
    cu = np.concatenate([[0], np.cumsum(lens)])
    segs = [(0, int(cu[s]), int(cu[s + 1]), s, s == len(lens) - 1) for s in range(len(lens))]
    table, nseg, total_chunks, max_chunks, total_ckpts = _build_table(segs, int(cu[-1]), chunk, True)
    assert nseg == len(lens)
    assert total_ckpts == sum(n // chunk for n in lens)
    assert total_chunks == sum(-(-n // chunk) for n in lens)
    rec = table[:8 * nseg].reshape(nseg, 8)
    # checkpoint bases are segment-major prefix sums of floor(len / chunk)
    assert rec[:, 4].tolist() == np.concatenate([[0], np.cumsum([n // chunk for n in lens])[:-1]]).tolist()
    assert rec[:, 2].tolist() == list(range(len(lens)))  # initial state s for sequence s
