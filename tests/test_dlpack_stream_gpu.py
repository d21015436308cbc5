"""Arrays taken through DLPack (PyTorch tensors) are exported to the call's stream (GPU; needs torch).

A DLPack consumer names the stream it will use the data on, and the producer orders its pending work on the array
before that stream (PyTorch: an event on its current stream, waited for on the named one). cake-rt runs on the
call's ``stream=``: naming CuPy's current stream instead leaves a kernel on a non-blocking call stream unordered
after PyTorch's writes of its inputs, and under ``torch.cuda.graph`` makes the legacy default stream wait on an
event of the capture. Inputs are written on PyTorch's current stream behind a ~100 ms sleep, so an unordered call
reads the old values. The CPU side of the same clause: ``tests/test_host_path_cpu.py``
(``test_dlpack_arrays_are_exported_to_the_call_stream``).
"""
import numpy as np
import pytest

from test_robustness_gpu import TOPK, _cp, _ssd_inputs, assert_exact, exact_inputs, poisoned, reference

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

SLEEP_CYCLES = 200_000_000  # torch.cuda._sleep: ~0.1 s at the H200's clock


def _torch_copies(dev):
    """PyTorch tensors of their own (clones of CuPy arrays), complete on return."""
    out = [torch.from_dlpack(a).clone() for a in dev]
    torch.cuda.synchronize()
    return out


def _rewrite_behind_a_sleep(tensors, dev):
    """On PyTorch's current stream: a sleep, then ``tensors`` overwritten with the values of ``dev`` (the producer's
    pending writes that a call on another stream must wait for)."""
    new = [torch.from_dlpack(a) for a in dev]
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)
    for t, n in zip(tensors, new):
        t.copy_(n)


def test_dsa_torch_inputs_written_on_torchs_stream_are_read_after_those_writes():
    from cake_rt import dsa_indexer_det_topk

    T = 128
    _, dev_a = exact_inputs(21, T, T)
    host_b, dev_b = exact_inputs(22, T, T)
    want = reference(host_b, None)
    q, k, w = _torch_copies(dev_a)
    side = torch.cuda.Stream()  # a pool stream: non-blocking, not ordered after PyTorch's default stream
    idx, sc = poisoned(T)
    dsa_indexer_det_topk(q, k, w, TOPK, indices=idx, scores=sc, stream=side.cuda_stream)  # compiled, planned
    torch.cuda.synchronize()
    idx, sc = poisoned(T)
    _rewrite_behind_a_sleep((q, k, w), dev_b)
    dsa_indexer_det_topk(q, k, w, TOPK, indices=idx, scores=sc, stream=side.cuda_stream)
    torch.cuda.synchronize()
    assert_exact(idx, sc, want)


@pytest.mark.parametrize("family", ["exact", "chunkpar"])
def test_ssd_torch_inputs_written_on_torchs_stream_are_read_after_those_writes(family):
    from cake_rt import ssd_combined

    cupy = _cp()
    _, dev_a = _ssd_inputs(23)
    _, dev_b = _ssd_inputs(24)
    want = ssd_combined(*dev_b, 64, family=family)
    cupy.cuda.Device().synchronize()
    want = want.get().view(np.uint16)
    ts = _torch_copies(dev_a)
    out = torch.empty_like(ts[0])
    side = torch.cuda.Stream()
    ssd_combined(*ts, 64, family=family, out=out, stream=side.cuda_stream)  # compiled, table uploaded
    torch.cuda.synchronize()
    out.fill_(float("nan"))
    _rewrite_behind_a_sleep(ts, dev_b)
    ssd_combined(*ts, 64, family=family, out=out, stream=side.cuda_stream)
    torch.cuda.synchronize()
    got = out.view(torch.int16).cpu().numpy().view(np.uint16)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["ssd", "dsa"])
def test_torch_tensors_in_a_torch_cuda_graph_replay_new_values(op):
    """The compat entries (torch tensors in, torch's current stream) captured by ``torch.cuda.graph`` (global capture
    mode, its default) after one eager call on the capture stream; the inputs rewritten in place; the replay equals
    an eager call on the new values, bit for bit."""
    if op == "ssd":
        from cake_rt.compat.mamba_ssm import mamba_chunk_scan_combined

        def got(y):
            return y.view(torch.int16).cpu().numpy().view(np.uint16)

        _, dev_a = _ssd_inputs(31)
        _, dev_b = _ssd_inputs(32)
        # The drop-in's eager call on the new values: its default dt_limit (0, inf) clamps dt' as mamba_ssm does,
        # so ssd_combined without dt_limit is another function of these inputs (dt has negative entries).
        with torch.no_grad():
            want = got(mamba_chunk_scan_combined(*_torch_copies(dev_b), 64))
        ts = _torch_copies(dev_a)

        def run():
            return mamba_chunk_scan_combined(*ts, 64)
    else:
        from cake_rt.compat.dsa import indexer_topk

        T = 128
        _, dev_a = exact_inputs(33, T, T)
        host_b, dev_b = exact_inputs(34, T, T)
        want = reference(host_b, None)[0]
        ts = _torch_copies(dev_a)

        def run():
            return indexer_topk(*ts, TOPK)

        def got(i):
            return i.cpu().numpy()
    cs = torch.cuda.Stream()
    with torch.no_grad():
        with torch.cuda.stream(cs):
            run()  # eager on the capture stream: compiled, planned, its library memory made
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=cs):
            res = run()
    for t, b in zip(ts, dev_b):
        t.copy_(torch.from_dlpack(b))
    torch.cuda.synchronize()
    g.replay()
    torch.cuda.synchronize()
    np.testing.assert_array_equal(got(res), want)


def _legacy_stream_busy():
    """A ~0.1 s sleep queued on the legacy default stream (CuPy's current one when the caller set none): a call with
    ``stream=None`` runs there after it, while PyTorch's pool streams (non-blocking) do not wait for it."""
    with torch.cuda.stream(torch.cuda.default_stream()):
        torch.cuda._sleep(SLEEP_CYCLES)


def test_torch_caller_on_its_own_stream_reads_dsa_outputs_after_the_call():
    """stream=None with PyTorch tensors while PyTorch's current stream is a pool stream of its own: PyTorch's next op
    on that stream (a clone of the outputs) reads what the call wrote, with no synchronization by the caller
    (docs/reliability.md, aud-strm; predicted to fail before: the clone ran before the kernel, behind the sleep)."""
    from cake_rt import dsa_indexer_det_topk

    T = 128
    host, dev = exact_inputs(41, T, T)
    want = reference(host, None)
    q, k, w = _torch_copies(dev)
    idx = torch.empty((T, TOPK), dtype=torch.int32, device=q.device)
    sc = torch.empty((T, TOPK), dtype=torch.float32, device=q.device)
    dsa_indexer_det_topk(q, k, w, TOPK, indices=idx, scores=sc)  # compiled, planned
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        idx.fill_(0x7F7F7F7F)
        sc.fill_(float("nan"))
        _legacy_stream_busy()
        dsa_indexer_det_topk(q, k, w, TOPK, indices=idx, scores=sc)
        got = idx.clone(), sc.clone()
    torch.cuda.synchronize()
    assert_exact(got[0].cpu().numpy(), got[1].cpu().numpy(), want)


@pytest.mark.parametrize("family", ["exact", "chunkpar"])
def test_torch_caller_on_its_own_stream_reads_ssd_out_after_the_call(family):
    """As the DSA test for ``ssd_combined(..., out=torch tensor)``: PyTorch's next op on its own stream reads ``out`` as
    the call wrote it; and an input rewritten on that stream right after the call is read by the call before the
    rewrite (the kernel reads the old values)."""
    from cake_rt import ssd_combined

    cupy = _cp()
    _, dev_a = _ssd_inputs(43)
    _, dev_b = _ssd_inputs(44)
    want = ssd_combined(*dev_a, 64, family=family)
    cupy.cuda.Device().synchronize()
    want = want.get().view(np.uint16)
    ts = _torch_copies(dev_a)
    new = _torch_copies(dev_b)
    out = torch.empty_like(ts[0])
    ssd_combined(*ts, 64, family=family, out=out)  # compiled, table uploaded
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        out.fill_(float("nan"))
        _legacy_stream_busy()
        ssd_combined(*ts, 64, family=family, out=out)
        got = out.clone()
        for t, n in zip(ts, new):  # the caller's next step rewrites its inputs on its stream
            t.copy_(n)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(got.view(torch.int16).cpu().numpy().view(np.uint16), want)
