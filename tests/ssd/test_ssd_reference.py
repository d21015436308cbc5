"""CPU tests of the float64 SSD reference: the per-token recurrence against the chunked matrix form."""
import math

import numpy as np
import pytest

from cake_rt.reference.ssd import preprocess_dt, reference_segments, ssd_reference, ssd_reference_chunked


def _inputs(rng, b, L, H, P, N, G, *, nseq_init=None):
    x = rng.standard_normal((b, L, H, P))
    dt = rng.standard_normal((b, L, H)) * 0.5 - 1.0
    A = -np.exp(rng.standard_normal(H) * 0.5)
    B = rng.standard_normal((b, L, G, N))
    C = rng.standard_normal((b, L, G, N))
    D = rng.standard_normal((H, P))
    z = rng.standard_normal((b, L, H, P))
    bias = rng.standard_normal(H) * 0.3
    init = rng.standard_normal((nseq_init or b, H, P, N))
    return x, dt, A, B, C, D, z, bias, init


def _rel(a, b):
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)


@pytest.mark.parametrize("chunk", [4, 8, 16])
def test_recurrence_matches_chunked_batched(chunk):
    rng = np.random.default_rng(1)
    x, dt, A, B, C, D, z, bias, init = _inputs(rng, 2, 37, 4, 8, 6, 2)
    kw = dict(D=D, z=z, dt_bias=bias, initial_states=init, dt_softplus=True, return_final_states=True,
              return_chunk_states=True)
    r1 = ssd_reference(x, dt, A, B, C, chunk, **kw)
    r2 = ssd_reference_chunked(x, dt, A, B, C, chunk, **kw)
    assert len(r1) == 3 and r1[2].shape == (2 * (37 // chunk), 4, 8, 6)
    for a, b in zip(r1, r2):
        assert a.shape == b.shape
        assert _rel(a, b) < 1e-12


def test_recurrence_matches_chunked_varlen_with_empty_and_short():
    rng = np.random.default_rng(2)
    lens = [0, 5, 16, 1, 0, 23, 9]
    L = sum(lens)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    x, dt, A, B, C, D, z, bias, init = _inputs(rng, 1, L, 4, 4, 8, 1, nseq_init=len(lens))
    kw = dict(D=D[:, 0], dt_bias=bias, initial_states=init, cu_seqlens=cu, dt_softplus=True,
              dt_limit=(0.01, 2.0), return_final_states=True, return_varlen_states=True, return_chunk_states=True)
    r1 = ssd_reference(x, dt, A, B, C, 8, **kw)
    r2 = ssd_reference_chunked(x, dt, A, B, C, 8, **kw)
    for a, b in zip(r1, r2):
        assert _rel(a, b) < 1e-12
    y, fin, var, ck = r1
    assert ck.shape[0] == sum(l // 8 for l in lens)
    # empty sequences return their initial state; final == last varlen state
    assert np.array_equal(var[0], init[0]) and np.array_equal(var[4], init[4])
    assert np.array_equal(fin[0], var[-1])


def test_seq_idx_segments_reset_state():
    rng = np.random.default_rng(3)
    x, dt, A, B, C, D, z, bias, init = _inputs(rng, 2, 30, 2, 4, 4, 1)
    seq_idx = np.zeros((2, 30), np.int32)
    seq_idx[0, 11:] = 1
    seq_idx[0, 25:] = 2
    seq_idx[1, 3:] = 7
    kw = dict(initial_states=init, seq_idx=seq_idx, return_final_states=True, return_chunk_states=True)
    r1 = ssd_reference(x, dt, A, B, C, 4, **kw)
    r2 = ssd_reference_chunked(x, dt, A, B, C, 4, **kw)
    for a, b in zip(r1, r2):
        assert _rel(a, b) < 1e-12
    # the second segment of row 0 starts from zeros: it equals a fresh call on that slice
    y2 = ssd_reference(x[:1, 11:25], dt[:1, 11:25], A, B[:1, 11:25], C[:1, 11:25], 4)
    assert _rel(r1[0][:1, 11:25], y2) < 1e-12
    segs = reference_segments(2, 30, seq_idx)
    assert [(s[0], s[1], s[2], s[3]) for s in segs] == [(0, 0, 11, 0), (0, 11, 25, -1), (0, 25, 30, -1),
                                                       (1, 0, 3, 1), (1, 3, 30, -1)]


def test_single_token_matches_closed_form():
    rng = np.random.default_rng(4)
    x, dt, A, B, C, D, z, bias, init = _inputs(rng, 1, 1, 2, 3, 5, 1)
    y = ssd_reference(x, dt, A, B, C, 4, D=D, initial_states=init, dt_softplus=True)
    dtp = np.log1p(np.exp(dt[0, 0]))
    for h in range(2):
        hs = np.exp(dtp[h] * A[h]) * init[0, h] + dtp[h] * np.outer(x[0, 0, h], B[0, 0, 0])
        assert np.allclose(y[0, 0, h], hs @ C[0, 0, 0] + D[h] * x[0, 0, h], rtol=1e-13, atol=1e-13)


def test_preprocess_dt_softplus_and_clamp():
    dt = np.array([-30.0, -1.0, 0.0, 19.0, 21.0, 50.0])
    v = preprocess_dt(dt, dt_softplus=True)
    assert v[4] == 21.0 and v[5] == 50.0 and abs(v[2] - math.log(2.0)) < 1e-15
    assert np.all(v > 0)
    # default limit: no clamp; explicit limit clamps
    assert np.array_equal(preprocess_dt(dt), dt)
    assert np.array_equal(preprocess_dt(dt, dt_limit=(0.0, 1.0)), np.clip(dt, 0.0, 1.0))
