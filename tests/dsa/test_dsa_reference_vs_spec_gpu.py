"""The kernel against the contract-text implementation of ``test_dsa_reference_vs_spec_cpu.spec_indexer`` on a row
kind the other GPU tests do not build: every weight <= 0, so the zero plateau is made of -0.0 scores (w * +0), beside
keys whose dot is a signed zero (a zero key row against a query of negative entries) and weights that are -0.0 or
+0.0 themselves. The contract: -0.0 == 0.0, ties to the larger id. The plateau is the row's maximum and topk stays
inside it, so the chosen set is exact (no float32 rounding can reorder it)."""
import numpy as np
import pytest

from test_dsa_reference_vs_spec_cpu import bf16_exact, spec_indexer

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("H,D", [(32, 128), (8, 64)])
def test_signed_zero_plateau_ties_to_the_larger_id(causal, H, D):
    import cupy

    from cake_rt.interop import BF16
    from cake_rt.ops.dsa import dsa_indexer_det_topk

    rng = np.random.default_rng(H + D + causal)
    T, Tkv, topk = 6, 300, 40
    q = bf16_exact(-np.abs(rng.standard_normal((T, H, D))))           # every entry negative
    k = bf16_exact(np.abs(rng.standard_normal((Tkv, D))))             # dot < 0: relu +0, score w * +0 = -0.0
    pos = rng.random(Tkv) < 0.3
    k[pos] = -k[pos]                                                  # dot > 0: score < 0 (w < 0)
    k[[5, 50, 150, 289, 299]] = 0.0                                   # dot a signed zero
    w = (-np.abs(rng.standard_normal((T, H))) * H ** -0.5).astype(np.float32)
    w[1, : H // 2] = -0.0
    w[2, ::2] = 0.0            # +0.0 weights: this row's plateau is +0.0
    w[3, :] = -0.0             # every score a zero: the topk largest visible ids
    want_idx, want_val = spec_indexer(q, k, w, topk, causal=causal)
    for t in range(T):         # the plateau fills every slot, so the set is exact
        assert np.all(want_val[t] == 0.0), t
    qd, kd, wd = cupy.asarray(q.astype(BF16)), cupy.asarray(k.astype(BF16)), cupy.asarray(w)
    idx, sc = dsa_indexer_det_topk(qd, kd, wd, topk, causal=causal)
    idx, sc = idx.get(), sc.get()
    assert np.array_equal(idx, want_idx.astype(np.int32))
    assert np.all(sc == 0.0)
