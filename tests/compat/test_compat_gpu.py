"""cake_rt.compat against the libraries it stands in for, on the same torch inputs (GPU; needs torch, and
mamba_ssm's Triton SSD on PYTHONPATH for the comparison: scripts/prepare-peers builds it into .peers/)."""
import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")


def _mamba():
    try:
        from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
    except Exception as exc:
        pytest.skip(f"mamba_ssm not importable: {exc}")
    return mamba_chunk_scan_combined


def _inputs(b=2, L=777, H=8, P=64, G=2, N=128, dtype=torch.bfloat16, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *s, dt=dtype, scale=1.0: (torch.randn(*s, device="cuda", generator=g) * scale).to(dt)  # noqa: E731
    A = -torch.exp(torch.rand(H, device="cuda", generator=g) * 2.7)
    return dict(x=r(b, L, H, P), dt=r(b, L, H, dt=torch.float32, scale=0.5), A=A, B=r(b, L, G, N), C=r(b, L, G, N),
                D=r(H, dt=torch.float32), z=r(b, L, H, P), dt_bias=r(H, dt=torch.float32, scale=0.5) - 3.0)


def _rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def _cases():
    # (name, kwargs for both, positional D/z/dt_bias?)
    return [("final states, keyword", dict(return_final_states=True), False),
            ("y only, positional D z dt_bias", dict(), True),
            ("bf16 D and dt_bias", dict(return_final_states=True, bf16_D=True), False),
            ("strided x", dict(return_final_states=True, strided=True), False)]


@pytest.mark.parametrize("name, opts, positional", _cases(), ids=[c[0] for c in _cases()])
def test_mamba_chunk_scan_combined_matches_mamba_ssm(name, opts, positional):
    from cake_rt.compat.mamba_ssm import mamba_chunk_scan_combined as ours

    theirs = _mamba()
    opts = dict(opts)
    t = _inputs()
    if opts.pop("bf16_D", False):
        t["D"], t["dt_bias"] = t["D"].bfloat16(), t["dt_bias"].bfloat16()
    if opts.pop("strided", False):
        wide = torch.randn(t["x"].shape[:-1] + (2 * t["x"].shape[-1],), device="cuda").bfloat16()
        wide[..., ::2] = t["x"]
        t["x"] = wide[..., ::2]  # stride 2 along headdim: both libraries copy it
        assert not t["x"].is_contiguous()
    with torch.no_grad():
        outs = []
        for fn in (ours, theirs):
            if positional:
                outs.append(fn(t["x"], t["dt"], t["A"], t["B"], t["C"], 256, t["D"], t["z"], t["dt_bias"],
                               dt_softplus=True, **opts))
            else:
                outs.append(fn(t["x"], t["dt"], t["A"], t["B"], t["C"], 256, D=t["D"], z=t["z"],
                               dt_bias=t["dt_bias"], dt_softplus=True, **opts))
    torch.cuda.synchronize()
    mine, ref = outs
    assert type(mine) is type(ref)
    mine = mine if isinstance(mine, tuple) else (mine,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    assert len(mine) == len(ref)
    for a, b in zip(mine, ref):
        assert isinstance(a, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and a.device == b.device
        assert _rel(a, b) < 2e-2, (name, _rel(a, b))


def test_varlen_states_match_mamba_ssm():
    from cake_rt.compat.mamba_ssm import mamba_chunk_scan_combined as ours

    theirs = _mamba()
    t = _inputs(b=1, L=1100)
    lens = [100, 256, 3, 500, 241]
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), device="cuda", dtype=torch.int32)
    seq_idx = torch.searchsorted(cu[1:].long(), torch.arange(1100, device="cuda"), right=True).int()[None]
    with torch.no_grad():
        kw = dict(D=t["D"], z=t["z"], dt_bias=t["dt_bias"], seq_idx=seq_idx, cu_seqlens=cu, dt_softplus=True,
                  return_final_states=True, return_varlen_states=True)
        mine = ours(t["x"], t["dt"], t["A"], t["B"], t["C"], 128, **kw)
        ref = theirs(t["x"], t["dt"], t["A"], t["B"], t["C"], 128, **kw)
    torch.cuda.synchronize()
    assert len(mine) == len(ref) == 3
    for a, b in zip(mine, ref):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert _rel(a, b) < 2e-2


def test_runs_on_torchs_current_stream_and_refuses_autograd():
    from cake_rt.compat.mamba_ssm import mamba_chunk_scan_combined as ours

    t = _inputs(b=1, L=300)
    s = torch.cuda.Stream()  # a pool stream: non-blocking, not ordered after the default stream the inputs were made on
    s.wait_stream(torch.cuda.current_stream())
    args = (t["x"], t["dt"], t["A"], t["B"], t["C"], 128)
    kw = dict(D=t["D"], dt_bias=t["dt_bias"], dt_softplus=True)
    with torch.no_grad(), torch.cuda.stream(s):
        ours(*args, **kw)  # compile, plan and set up this stream's state first: the call below only launches
    s.synchronize()
    with torch.no_grad(), torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)  # keeps the side stream busy: a call on another stream would finish first
        y = ours(*args, **kw)
        ev = torch.cuda.Event()
        ev.record(s)
    assert not ev.query()  # the call was queued behind the sleep on the current (side) stream
    s.synchronize()
    assert torch.isfinite(y.float()).all()
    x = t["x"].clone().requires_grad_(True)
    with pytest.raises(RuntimeError, match="forward only"):
        ours(x, t["dt"], t["A"], t["B"], t["C"], 128)


def test_dsa_indexer_topk_returns_torch_int32():
    from cake_rt import dsa_indexer_det_topk
    from cake_rt.compat.dsa import indexer_topk

    g = torch.Generator(device="cuda").manual_seed(1)
    T, Tkv, H, D, topk = 40, 900, 32, 128, 64
    q = torch.randn(T, H, D, device="cuda", generator=g).bfloat16()
    k = torch.randn(Tkv, D, device="cuda", generator=g).bfloat16()
    w = torch.randn(T, H, device="cuda", generator=g)
    idx = indexer_topk(q, k, w, topk)
    assert isinstance(idx, torch.Tensor) and idx.dtype == torch.int32 and idx.shape == (T, topk)
    ref_i, _ = dsa_indexer_det_topk(q, k, w, topk)
    torch.cuda.synchronize()
    assert torch.equal(idx.cpu(), torch.from_dlpack(ref_i).cpu())


def test_mamba_chunk_scan_combined_takes_contiguous_views_off_16_bytes():
    # mamba_ssm accepts any start address; the compat layer copies a view the kernels cannot read in place.
    from cake_rt.compat.mamba_ssm import mamba_chunk_scan_combined as ours

    t = _inputs(b=1, L=300, seed=3)
    off = {}
    for name in ("x", "B", "z"):
        flat = torch.empty(t[name].numel() + 1, dtype=t[name].dtype, device="cuda")
        view = flat[1:].view(t[name].shape)  # contiguous, 2 bytes past a 16-byte boundary
        view.copy_(t[name])
        assert view.is_contiguous() and view.data_ptr() % 16 != 0
        off[name] = view
    kw = dict(D=t["D"], dt_bias=t["dt_bias"], dt_softplus=True, return_final_states=True)
    with torch.no_grad():
        y0, s0 = ours(t["x"], t["dt"], t["A"], t["B"], t["C"], 128, z=t["z"], **kw)
        y1, s1 = ours(off["x"], t["dt"], t["A"], off["B"], t["C"], 128, z=off["z"], **kw)
    torch.cuda.synchronize()
    assert torch.equal(y0, y1) and torch.equal(s0, s1)


@pytest.mark.parametrize("topk, err, match", [(0, ValueError, "topk"), (-5, ValueError, "topk"),
                                              (1 << 40, ValueError, "topk"), (2.0, TypeError, "topk")])
def test_dsa_indexer_topk_refuses_topk_before_allocating(topk, err, match):
    from cake_rt.compat.dsa import indexer_topk

    q = torch.randn(16, 32, 128, device="cuda").bfloat16()
    k = torch.randn(100, 128, device="cuda").bfloat16()
    w = torch.randn(16, 32, device="cuda")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    with pytest.raises(err, match=match):
        indexer_topk(q, k, w, topk)
    assert torch.cuda.memory_allocated() == before


def test_default_dt_limit_clamps_a_negative_dt_as_mamba_ssm_kernel_does():
    # dt + dt_bias < 0 without softplus: mamba_ssm's kernel clamps dt' at 0 under the default dt_limit; the drop-in
    # gives ssd_combined's result with that clamp asked for, bit for bit, and not its unclamped default.
    import cake_rt
    from cake_rt.compat.mamba_ssm import mamba_chunk_scan_combined as ours

    t = _inputs(L=300)
    t["dt_bias"] = t["dt_bias"] + 3.0  # dt + dt_bias about N(0, 0.7): dt' of both signs
    assert (t["dt"] + t["dt_bias"][None, None] < 0).any() and (t["dt"] + t["dt_bias"][None, None] > 0).any()
    with torch.no_grad():
        y = ours(t["x"], t["dt"], t["A"], t["B"], t["C"], 128, D=t["D"], z=t["z"], dt_bias=t["dt_bias"])
        kw = dict(D=t["D"], z=t["z"], dt_bias=t["dt_bias"])
        clamped = torch.from_dlpack(cake_rt.ssd_combined(t["x"], t["dt"], t["A"], t["B"], t["C"], 128,
                                                         dt_limit=(0.0, 3.4028234663852886e38), **kw))
        plain = torch.from_dlpack(cake_rt.ssd_combined(t["x"], t["dt"], t["A"], t["B"], t["C"], 128, **kw))
    torch.cuda.synchronize()
    assert torch.equal(y, clamped) and not torch.equal(y, plain)
    try:
        theirs = _mamba()
    except pytest.skip.Exception:
        return
    with torch.no_grad():
        ref = theirs(t["x"], t["dt"], t["A"], t["B"], t["C"], 128, D=t["D"], z=t["z"], dt_bias=t["dt_bias"])
    assert _rel(y, ref) < 2e-2


def test_dsa_indexer_topk_requires_grad_and_torchs_current_stream():
    # Indices of inputs that require grad are given (integers: no gradient in torch either); scores are refused while
    # grad mode is on (they would come back detached), given under no_grad. The call runs on torch's current stream.
    from cake_rt.compat.dsa import indexer_topk

    g = torch.Generator(device="cuda").manual_seed(4)
    T, Tkv, H, D, topk = 24, 500, 32, 128, 16
    q = torch.randn(T, H, D, device="cuda", generator=g).bfloat16().requires_grad_(True)
    k = torch.randn(Tkv, D, device="cuda", generator=g).bfloat16()
    w = torch.randn(T, H, device="cuda", generator=g)
    cu_q = torch.tensor([0, 10, T], dtype=torch.int32)  # host metadata: CPU tensors
    cu_k = torch.tensor([0, 200, Tkv], dtype=torch.int32)
    ref = indexer_topk(q, k, w, topk, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert ref.dtype == torch.int32 and not ref.requires_grad
    with pytest.raises(RuntimeError, match="forward only.*q.*requires grad"):
        indexer_topk(q, k, w, topk, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, return_scores=True)
    with torch.no_grad():
        i2, s2 = indexer_topk(q, k, w, topk, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, return_scores=True)
    assert s2.dtype == torch.float32 and torch.equal(i2, ref)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)  # a call on any other stream would finish before this
        idx = indexer_topk(q, k, w, topk, cu_seqlens_q=cu_q.numpy(), cu_seqlens_k=cu_k.numpy())
        ev = torch.cuda.Event()
        ev.record(s)
    assert not ev.query()
    s.synchronize()
    assert torch.equal(idx, ref)
