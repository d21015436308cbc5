"""The kernels against the contract-text implementation of ``test_ssd_reference_vs_spec_cpu.spec_ssd`` on the rules the
other GPU tests do not reach: dt + dt_bias < 0 without softplus under the default dt_limit (the contract: no clamp, so
dt' stays negative; mamba_ssm's Triton kernel would clamp it to 0, docs/reliability.md), dt + dt_bias on and around
softplus's switch at 20, and seq_idx runs whose ids come back later, with boundaries on chunk edges.

fp32 inputs (the contract's 1e-4 bound), both families, bitwise equal to each other; the dt rules again with bf16 inputs
(the sm_90a programs, whose producer warpgroups form dt' apart from the fp32 path's), against the reference on the
rounded inputs at the bf16 bound (1e-2)."""
import math

import numpy as np
import pytest

from cake_rt.interop import BF16
from test_ssd_reference_vs_spec_cpu import rel, spec_ssd

pytestmark = pytest.mark.gpu

CHUNK = 64


def _inputs(rng, b, L, H, P, G, N):
    x = rng.standard_normal((b, L, H, P)).astype(np.float32)
    A = (-np.exp(rng.uniform(-1, 1, H))).astype(np.float32)
    B = (rng.standard_normal((b, L, G, N)) / math.sqrt(N)).astype(np.float32)
    C = (rng.standard_normal((b, L, G, N)) / math.sqrt(N)).astype(np.float32)
    D = rng.standard_normal(H).astype(np.float32)
    z = rng.standard_normal((b, L, H, P)).astype(np.float32)
    init = (rng.standard_normal((b, H, P, N)) * 0.1).astype(np.float32)
    return x, A, B, C, D, z, init


def _rounded(dtype, x, B, C, z):
    """x, B, C, z rounded to ``dtype`` (the kernel's inputs) and the same values in float32 (the reference's)."""
    if dtype is None:
        return (x, B, C, z), (x, B, C, z)
    low = tuple(a.astype(dtype) for a in (x, B, C, z))
    return low, tuple(a.astype(np.float32) for a in low)


BOUND = {None: 1e-4, BF16: 1e-2}


def _both_families(x, dt, A, B, C, **kw):
    import cake_rt

    from ssd_gpu_util import to_dev, to_host

    dev = {k: (to_dev(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    outs = {}
    for fam in ("exact", "chunkpar"):
        res = cake_rt.ssd_combined(to_dev(x), to_dev(dt), to_dev(A), to_dev(B), to_dev(C), CHUNK, **dev,
                                   return_final_states=True, return_chunk_states=True, family=fam)
        outs[fam] = [to_host(a) for a in res]
    for a, b in zip(outs["exact"], outs["chunkpar"]):
        assert a.tobytes() == b.tobytes()
    return outs["exact"]


@pytest.mark.parametrize("low", [None, BF16])
def test_negative_dt_without_softplus_is_not_clamped_by_the_default_limit(low):
    rng = np.random.default_rng(1)
    b, L, H, P, G, N = 2, 150, 2, 64, 1, 64
    x, A, B, C, D, z, init = _inputs(rng, b, L, H, P, G, N)
    dt = (rng.uniform(-0.02, 0.05, (b, L, H))).astype(np.float32)
    bias = np.array([-0.01, 0.0], np.float32)
    (xk, Bk, Ck, zk), (x, B, C, z) = _rounded(low, x, B, C, z)
    kw = dict(D=D, dt_bias=bias, initial_states=init)
    got = _both_families(xk, dt, A, Bk, Ck, z=zk, **kw)
    want = spec_ssd(x, dt, A, B, C, CHUNK, z=z, **kw, final=True, chunks=True)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert rel(g, w) < BOUND[low]
    # the case tells the two readings apart: clamping at 0 gives another answer
    clamped = spec_ssd(x, np.maximum(dt + bias, 0.0), A, B, C, CHUNK, D=D, z=z, initial_states=init, final=True)
    assert rel(clamped[1], want[1]) > 0.1


@pytest.mark.parametrize("low", [None, BF16])
@pytest.mark.parametrize("limit", [(0.0, math.inf), (0.0, 20.0)])
def test_softplus_switch_at_20(limit, low):
    rng = np.random.default_rng(2)
    b, L, H, P, G, N = 1, 140, 4, 64, 2, 64
    x, A, B, C, D, z, init = _inputs(rng, b, L, H, P, G, N)
    A = (A * 0.01).astype(np.float32)  # dt' ~ 20 must not wipe the state out entirely
    bias = np.array([0.0, 0.5, -0.5, 0.0], np.float32)
    dt = (rng.standard_normal((b, L, H)) * 0.5 - 3.0).astype(np.float32)
    for t, v in zip((3, 64, 65, 100, 127), (19.5, 20.0, 20.5, 25.0, 19.999)):
        dt[0, t, :] = v
    (xk, Bk, Ck, zk), (x, B, C, z) = _rounded(low, x, B, C, z)
    kw = dict(D=D, dt_bias=bias, initial_states=init, dt_softplus=True, dt_limit=limit)
    got = _both_families(xk, dt, A, Bk, Ck, z=zk, **kw)
    want = spec_ssd(x, dt, A, B, C, CHUNK, z=z, **kw, final=True, chunks=True)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert rel(g, w) < BOUND[low]


def test_seq_idx_ids_that_come_back_are_new_runs():
    rng = np.random.default_rng(3)
    b, L, H, P, G, N = 2, 200, 2, 64, 1, 64
    x, A, B, C, D, z, init = _inputs(rng, b, L, H, P, G, N)
    dt = (rng.standard_normal((b, L, H)) * 0.5 - 1.0).astype(np.float32)
    seq_idx = np.zeros((b, L), np.int32)
    seq_idx[0, 63:64] = 1    # a one-token run on a chunk's last position
    seq_idx[0, 64:128] = 0   # id 0 again: a new run, from zeros, starting on a chunk edge
    seq_idx[0, 128:] = 2
    seq_idx[1, :] = 7
    seq_idx[1, 64:65] = 3    # a one-token run on a chunk's first position
    seq_idx[1, 65:] = 7      # id 7 again: a new run
    kw = dict(D=D, z=z, dt_bias=np.zeros(H, np.float32), initial_states=init, dt_softplus=True, seq_idx=seq_idx)
    got = _both_families(x, dt, A, B, C, **kw)
    want = spec_ssd(x, dt, A, B, C, CHUNK, **kw, final=True, chunks=True)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert rel(g, w) < 1e-4
