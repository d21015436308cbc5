"""Acceptance checks of ``ssd_combined`` written from the contract alone (../shared/spec/ssd_combined.md),
independently of the op's own reference and tests: a per-token float64 recurrence, fresh random inputs,
poisoned outputs, odd lengths, both families bitwise equal.
"""
import math

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

BF16 = None


def _bf16():
    from cake_rt.interop import BF16 as b

    return b


def softplus(v):
    return np.where(v > 20, v, np.log1p(np.exp(np.minimum(v, 20))))


def brute_force(x, dt, A, B, C, chunk, *, D=None, z=None, dt_bias=None, init=None, seq_idx=None, cu=None,
                softplus_on=False, dt_limit=(0.0, math.inf)):
    """float64 per-token recurrence; returns y, final, varlen, chunk_states per the contract."""
    x, dt, A, B, C = (np.asarray(a, np.float64) for a in (x, dt, A, B, C))
    b, L, H, P = x.shape
    G, N = B.shape[2], B.shape[3]
    per = H // G
    y = np.zeros_like(x)
    segs = []  # (row, start, end, initial state)
    if cu is not None:
        for s in range(len(cu) - 1):
            segs.append((0, int(cu[s]), int(cu[s + 1]), None if init is None else init[s]))
    else:
        for r in range(b):
            if seq_idx is None:
                bounds = [0, L]
            else:
                bounds = [0] + [t for t in range(1, L) if seq_idx[r, t] != seq_idx[r, t - 1]] + [L]
            for i in range(len(bounds) - 1):
                st = init[r] if (init is not None and i == 0) else None
                segs.append((r, bounds[i], bounds[i + 1], st))
    finals = {}
    varlen, chunks = [], []
    for (r, s0, s1, st) in segs:
        h = np.zeros((H, P, N)) if st is None else np.asarray(st, np.float64).copy()
        for t in range(s0, s1):
            d = dt[r, t] + (0 if dt_bias is None else dt_bias)
            if softplus_on:
                d = softplus(d)
            if tuple(dt_limit) != (0.0, math.inf):
                d = np.clip(d, dt_limit[0], dt_limit[1])
            Bt = np.repeat(B[r, t], per, axis=0)  # [H, N]
            Ct = np.repeat(C[r, t], per, axis=0)
            h = np.exp(d * A)[:, None, None] * h + d[:, None, None] * x[r, t][:, :, None] * Bt[:, None, :]
            yt = np.einsum("hpn,hn->hp", h, Ct)
            if D is not None:
                yt = yt + (D[:, None] if D.ndim == 1 else D) * x[r, t]
            if z is not None:
                zt = z[r, t].astype(np.float64)
                yt = yt * zt / (1 + np.exp(-zt))
            y[r, t] = yt
            if (t - s0 + 1) % chunk == 0:
                chunks.append(h.copy())
        varlen.append(h)
        finals[r] = h
    final = np.stack([finals[r] for r in sorted(finals)])
    return y, final, np.stack(varlen), (np.stack(chunks) if chunks else np.zeros((0, H, P, N)))


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def _inputs(rng, b, L, H, P, G, N, dtype, *, with_z=True):
    import cupy

    x = rng.standard_normal((b, L, H, P)).astype(dtype)
    dt = (rng.standard_normal((b, L, H)) * 0.5 - 1.0).astype(np.float32)
    A = (-np.exp(rng.uniform(-1, 1.5, H))).astype(np.float32)
    B = (rng.standard_normal((b, L, G, N)) / math.sqrt(N)).astype(dtype)
    C = (rng.standard_normal((b, L, G, N)) / math.sqrt(N)).astype(dtype)
    D = rng.standard_normal(H).astype(np.float32)
    z = rng.standard_normal((b, L, H, P)).astype(dtype) if with_z else None
    bias = (rng.standard_normal(H) * 0.3).astype(np.float32)
    host = dict(x=x, dt=dt, A=A, B=B, C=C, D=D, z=z, dt_bias=bias)
    dev = {k: (None if v is None else cupy.asarray(v)) for k, v in host.items()}
    return host, dev


TOL = {"bf16": 1e-2, "fp16": 5e-3, "fp32": 1e-4}


@pytest.mark.parametrize("dtype_name,chunk,G,L", [("bf16", 64, 1, 203), ("fp16", 128, 2, 300),
                                                  ("fp32", 256, 1, 517)])
def test_batched_against_brute_force_both_families_bitwise(dtype_name, chunk, G, L):
    import cupy

    import cake_rt

    dtype = {"bf16": _bf16(), "fp16": np.float16, "fp32": np.float32}[dtype_name]
    rng = np.random.default_rng(100 + chunk)
    b, H, P, N = 2, 4, 64, 64
    host, dev = _inputs(rng, b, L, H, P, G, N, dtype)
    init = (rng.standard_normal((b, H, P, N)) * 0.1).astype(np.float32)
    results = {}
    for fam in ("exact", "chunkpar"):
        out = cupy.full((b, L, H, P), np.nan, dtype=dtype)
        y, fin, ck = cake_rt.ssd_combined(dev["x"], dev["dt"], dev["A"], dev["B"], dev["C"], chunk, D=dev["D"],
                                          z=dev["z"], dt_bias=dev["dt_bias"], initial_states=cupy.asarray(init),
                                          dt_softplus=True, return_final_states=True, return_chunk_states=True,
                                          family=fam, out=out)
        assert y is out
        results[fam] = (y.get(), fin.get(), ck.get())
    for a, bb in zip(results["exact"], results["chunkpar"]):
        assert a.tobytes() == bb.tobytes()
    ry, rf, _, rc = brute_force(host["x"], host["dt"], host["A"], host["B"], host["C"], chunk, D=host["D"],
                                z=host["z"], dt_bias=host["dt_bias"], init=init, softplus_on=True)
    y, fin, ck = results["exact"]
    assert np.isfinite(y.astype(np.float32)).all()
    assert rel(y, ry) < TOL[dtype_name]
    assert rel(fin, rf) < TOL[dtype_name]
    assert ck.shape == rc.shape
    assert rel(ck, rc) < TOL[dtype_name]


def test_varlen_with_empty_and_short_sequences_and_varlen_states():
    import cupy

    import cake_rt

    rng = np.random.default_rng(7)
    lens = [0, 5, 130, 0, 64, 1, 257]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    L, H, P, G, N, chunk = int(cu[-1]), 4, 64, 2, 128, 64
    host, dev = _inputs(rng, 1, L, H, P, G, N, _bf16(), with_z=False)
    init = (rng.standard_normal((len(lens), H, P, N)) * 0.1).astype(np.float32)
    outs = {}
    for fam in ("exact", "chunkpar"):
        y, fin, var, ck = cake_rt.ssd_combined(
            dev["x"], dev["dt"], dev["A"], dev["B"], dev["C"], chunk, D=dev["D"], dt_bias=dev["dt_bias"],
            initial_states=cupy.asarray(init), cu_seqlens=cupy.asarray(cu), dt_softplus=True,
            return_final_states=True, return_varlen_states=True, return_chunk_states=True, family=fam)
        outs[fam] = [a.get() for a in (y, fin, var, ck)]
    for a, b in zip(outs["exact"], outs["chunkpar"]):
        assert a.tobytes() == b.tobytes()
    ry, rf, rv, rc = brute_force(host["x"], host["dt"], host["A"], host["B"], host["C"], chunk, D=host["D"],
                                 dt_bias=host["dt_bias"], init=init, cu=cu, softplus_on=True)
    y, fin, var, ck = outs["exact"]
    assert rel(y, ry) < 1e-2 and rel(var, rv) < 1e-2
    # empty sequences return their initial state exactly
    for s, n in enumerate(lens):
        if n == 0:
            assert np.array_equal(var[s], init[s])
    assert np.array_equal(fin[0], var[-1])
    assert ck.shape[0] == sum(n // chunk for n in lens)
    assert rel(ck, rc) < 1e-2


def test_seq_idx_segments_start_from_zero_state_and_dt_limit_clamps():
    import cupy

    import cake_rt

    rng = np.random.default_rng(11)
    b, L, H, P, G, N, chunk = 2, 150, 2, 64, 1, 64, 64
    host, dev = _inputs(rng, b, L, H, P, G, N, np.float32, with_z=True)
    seq_idx = np.zeros((b, L), np.int32)
    seq_idx[0, 40:] = 1
    seq_idx[0, 41:] = 2  # a one-token segment
    seq_idx[1, 99:] = 5
    init = (rng.standard_normal((b, H, P, N)) * 0.1).astype(np.float32)
    lim = (0.05, 0.6)
    y, fin = cake_rt.ssd_combined(dev["x"], dev["dt"], dev["A"], dev["B"], dev["C"], chunk, D=dev["D"], z=dev["z"],
                                  dt_bias=dev["dt_bias"], initial_states=cupy.asarray(init),
                                  seq_idx=cupy.asarray(seq_idx), dt_softplus=True, dt_limit=lim,
                                  return_final_states=True, family="exact")
    ry, rf, _, _ = brute_force(host["x"], host["dt"], host["A"], host["B"], host["C"], chunk, D=host["D"],
                               z=host["z"], dt_bias=host["dt_bias"], init=init, seq_idx=seq_idx,
                               softplus_on=True, dt_limit=lim)
    assert rel(y.get(), ry) < 1e-4
    assert rel(fin.get(), rf) < 1e-4


def test_state_dtype_bf16_states_are_rounded_float32_states():
    import cake_rt

    rng = np.random.default_rng(5)
    host, dev = _inputs(rng, 1, 200, 2, 64, 1, 64, _bf16())
    kw = dict(D=dev["D"], dt_bias=dev["dt_bias"], dt_softplus=True, return_final_states=True)
    _, f32 = cake_rt.ssd_combined(dev["x"], dev["dt"], dev["A"], dev["B"], dev["C"], 64, **kw)
    _, fbf = cake_rt.ssd_combined(dev["x"], dev["dt"], dev["A"], dev["B"], dev["C"], 64, state_dtype="bfloat16",
                                  **kw)
    assert fbf.dtype == _bf16() and f32.dtype == np.float32
    assert np.array_equal(fbf.get().view(np.uint16), f32.get().astype(_bf16()).view(np.uint16))


def test_errors_name_the_argument_and_leave_out_untouched():
    import cupy

    import cake_rt

    rng = np.random.default_rng(3)
    host, dev = _inputs(rng, 1, 64, 4, 64, 2, 64, _bf16())
    out = cupy.full(dev["x"].shape, 3.0, dtype=_bf16())
    before = out.get().tobytes()
    cases = [
        (dict(chunk_size=100), "chunk_size"),
        (dict(dt_limit=(1.0, 0.5)), "dt_limit"),
        (dict(cu_seqlens=cupy.asarray(np.array([0, 10, 20], np.int32))), "cu_seqlens"),  # does not end at seqlen
        (dict(A=cupy.zeros(3, np.float32)), "A"),
        (dict(dt=dev["dt"][0]), "dt"),  # wrong rank
    ]
    for kw, name in cases:
        args = dict(x=dev["x"], dt=dev["dt"], A=dev["A"], B=dev["B"], C=dev["C"], chunk_size=64)
        args.update(kw)
        with pytest.raises((ValueError, TypeError), match=f"^{name}: "):  # the message starts with the name
            cake_rt.ssd_combined(args["x"], args["dt"], args["A"], args["B"], args["C"], args["chunk_size"],
                                 dt_limit=args.get("dt_limit", (0.0, math.inf)),
                                 cu_seqlens=args.get("cu_seqlens"), out=out)
    cupy.cuda.runtime.deviceSynchronize()
    assert out.get().tobytes() == before
    with pytest.raises(ValueError, match="^x: "):
        cake_rt.ssd_combined(dev["x"][:, ::2], dev["dt"][:, ::2], dev["A"], dev["B"][:, ::2], dev["C"][:, ::2], 64)


def test_plan_explains_family_and_env_override(monkeypatch):
    import cake_rt

    rng = np.random.default_rng(9)
    _, dev = _inputs(rng, 1, 4096, 2, 64, 1, 128, _bf16(), with_z=False)
    args = (dev["x"], dev["dt"], dev["A"], dev["B"], dev["C"], 256)
    monkeypatch.setenv("CAKE_RT_SSD_CHUNK_PARALLEL", "never")
    p = cake_rt.ssd_plan(*args)
    assert p.family == "exact" and p.reason
    monkeypatch.setenv("CAKE_RT_SSD_CHUNK_PARALLEL", "always")
    assert cake_rt.ssd_plan(*args).family == "chunkpar"
    assert cake_rt.ssd_plan(*args, family="exact").family == "exact"  # explicit family wins
