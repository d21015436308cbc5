"""The float64 SSD reference the GPU tests compare the kernels with (``cake_rt.reference.ssd``), checked on the CPU
against the contract's per-token brute force of the acceptance tests: the reference's two formulations share their
preprocessing (dt', the group of a head, the z gate, the segments), so only an independent implementation catches a
slip there, and the acceptance tests run only on a GPU."""
import numpy as np
import pytest

from cake_rt.reference.ssd import ssd_reference, ssd_reference_chunked
from test_ssd_contract_gpu import brute_force

CHUNK = 4


def _case(rng, layout):
    H, G, P, N = 4, 2, 3, 2
    init_rows = 2
    kw, ref_kw = {}, {}
    if layout == "cu_seqlens":  # empty, shorter than a chunk, chunk multiples, one over
        lens = [0, 3, CHUNK, 0, 2 * CHUNK + 1, 2 * CHUNK]
        cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        b, L, init_rows = 1, int(cu[-1]), len(lens)
        kw["cu"], ref_kw["cu_seqlens"] = cu, cu
    else:
        b, L = 2, 3 * CHUNK + 2
        if layout == "seq_idx":  # a one-token run, a run ending on a chunk boundary of its own
            s = np.zeros((b, L), np.int32)
            s[0, 5:] = 1
            s[0, 6:] = 2
            s[1, CHUNK:] = 4
            kw["seq_idx"], ref_kw["seq_idx"] = s, s
    x = rng.standard_normal((b, L, H, P))
    dt = rng.standard_normal((b, L, H))
    dt[0, 1, 0] = 30.0  # softplus(v) = v for v > 20
    A = -np.exp(rng.standard_normal(H) * 0.5) * 0.2
    B, C = rng.standard_normal((b, L, G, N)), rng.standard_normal((b, L, G, N))
    args = (x, dt, A, B, C, CHUNK)
    opt = dict(D=rng.standard_normal((H, P)) if layout == "seq_idx" else rng.standard_normal(H),
               z=rng.standard_normal((b, L, H, P)) * 3, dt_bias=rng.standard_normal(H) * 0.5)
    init = rng.standard_normal((init_rows, H, P, N))
    kw.update(opt, init=init, softplus_on=True, dt_limit=(0.05, 5.0))
    ref_kw.update(opt, initial_states=init, dt_softplus=True, dt_limit=(0.05, 5.0))
    return args, kw, ref_kw


@pytest.mark.parametrize("layout", ["batched", "seq_idx", "cu_seqlens"])
@pytest.mark.parametrize("reference", [ssd_reference, ssd_reference_chunked])
def test_reference_equals_the_contract_brute_force(layout, reference):
    args, kw, ref_kw = _case(np.random.default_rng(len(layout)), layout)
    y, final, varlen, chunks = brute_force(*args, **kw)
    varlen_asked = layout == "cu_seqlens"
    got = reference(*args, **ref_kw, return_final_states=True, return_varlen_states=varlen_asked,
                    return_chunk_states=True)
    want = [y, final] + ([varlen] if varlen_asked else []) + [chunks]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert np.linalg.norm(g - w) <= 1e-12 * np.linalg.norm(w)
