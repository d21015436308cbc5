"""Device metadata under CUDA graph capture (GPU): every public entry that copies device metadata to the host raises a
``ValueError`` naming it, and the capture it was called in stays valid (it ends, and its graph replays what was
captured around the refused call). The copy cannot be captured: made anyway, the driver refuses it and invalidates
the capture. Captures by CuPy's graph API (relaxed mode, its default, and global mode), by ``torch.cuda.graph`` (global
mode) when torch is present, and on a blocking stream while the entry copies on the legacy default stream, which the
legacy stream's implicit synchronization would join. The CPU side: ``tests/test_host_path_cpu.py``
(``test_device_metadata_under_capture_is_refused_by_every_entry``).
"""
import numpy as np
import pytest

from test_robustness_gpu import TOPK, _cp, _ssd_inputs, exact_inputs

pytestmark = pytest.mark.gpu

T = 64
CU = np.array([0, 24, T], np.int32)
SEQ_IDX = np.repeat([0, 1], [80, 120])[None].astype(np.int32)  # _ssd_inputs' 200 tokens in two sequences


def _refusals(stream):
    """(argument name, a call that copies that device argument to the host on ``stream``, or on CuPy's current stream
    for the entries without ``stream=``)."""
    cupy = _cp()
    import cake_rt
    from cake_rt.ops.dsa import visible_pairs

    _, ssd = _ssd_inputs(41)
    _, dsa = exact_inputs(42, T, T)
    cu = cupy.asarray(CU)
    cu_ssd = cupy.asarray(np.array([0, 80, 200], np.int32))
    seq_idx = cupy.asarray(SEQ_IDX)
    lay = cake_rt.cp_zigzag_layout([8, 16], 2, 0)
    ids = cupy.zeros((4, 2), np.int32)
    doc_lens = cupy.asarray(np.array([8, 16]))  # made here: a copy to the device inside the capture would break it
    cupy.cuda.Device().synchronize()
    return [
        ("cu_seqlens", lambda: cake_rt.ssd_plan(*ssd, 64, cu_seqlens=cu_ssd, stream=stream)),
        ("seq_idx", lambda: cake_rt.ssd_plan(*ssd, 64, seq_idx=seq_idx, stream=stream)),
        ("seq_idx", lambda: cake_rt.ssd_combined(*ssd, 64, seq_idx=seq_idx, stream=stream)),
        ("cu_seqlens_q", lambda: cake_rt.dsa_indexer_det_topk(*dsa, TOPK, cu_seqlens_q=cu, cu_seqlens_k=CU,
                                                              stream=stream)),
        ("cu_seqlens_k", lambda: cake_rt.dsa_indexer_workspace_bytes(*dsa, TOPK, cu_seqlens_q=CU, cu_seqlens_k=cu)),
        ("cu_seqlens_q", lambda: visible_pairs(cu, CU)),
        ("doc_lens", lambda: cake_rt.cp_zigzag_layout(doc_lens, 2, 0)),
        ("indices", lambda: lay.to_global_keys(ids)),
    ]


def _assert_refused(calls):
    for name, call in calls:
        with pytest.raises(ValueError, match=f"^{name}: device"):
            call()


@pytest.mark.parametrize("mode", ["relaxed", "global"])
def test_cupy_capture_refuses_device_metadata_and_stays_valid(mode):
    cupy = _cp()
    s = cupy.cuda.Stream(non_blocking=True)
    calls = _refusals(s)
    counter = cupy.zeros(1, np.int32)
    cupy.cuda.Device().synchronize()
    modes = {"relaxed": cupy.cuda.runtime.streamCaptureModeRelaxed,
             "global": cupy.cuda.runtime.streamCaptureModeGlobal}
    with s:
        s.begin_capture(mode=modes[mode])
        try:
            counter += 1
            _assert_refused(calls)
            counter += 1
        finally:
            graph = s.end_capture()  # raises when the capture was invalidated
        graph.launch(s)
    s.synchronize()
    assert int(counter.get()[0]) == 2


def test_legacy_stream_joined_to_a_blocking_capture_is_refused():
    """A blocking stream captures; the entries copy on the legacy default stream (CuPy's current stream, no
    ``stream=``), which would join that capture (cudaErrorStreamCaptureImplicit)."""
    cupy = _cp()
    blocking = cupy.cuda.Stream()  # blocking: the legacy stream synchronizes with it
    calls = _refusals(None)
    counter = cupy.zeros(1, np.int32)
    cupy.cuda.Device().synchronize()
    assert cupy.cuda.get_current_stream().ptr == 0
    blocking.begin_capture(mode=cupy.cuda.runtime.streamCaptureModeThreadLocal)
    try:
        with blocking:
            counter += 1
        _assert_refused(calls)
        with blocking:
            counter += 1
    finally:
        graph = blocking.end_capture()
    graph.launch(blocking)
    blocking.synchronize()
    assert int(counter.get()[0]) == 2


def test_torch_cuda_graph_refuses_device_metadata_and_stays_valid():
    """``torch.cuda.graph`` (global mode): the entries on torch's capture stream (``stream=`` its handle, the compat
    entries on torch's current stream by themselves) with CUDA tensor metadata."""
    torch = pytest.importorskip("torch")
    import cake_rt
    from cake_rt.compat.dsa import indexer_topk
    from cake_rt.compat.mamba_ssm import mamba_chunk_scan_combined

    _, ssd = _ssd_inputs(43)
    _, dsa = exact_inputs(44, T, T)
    ssd = [torch.from_dlpack(a).clone() for a in ssd]
    dsa = [torch.from_dlpack(a).clone() for a in dsa]
    seq_idx = torch.from_numpy(SEQ_IDX).cuda()
    cu = torch.from_numpy(CU).cuda()
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):
        handle = torch.cuda.current_stream().cuda_stream
        counter += 1
        _assert_refused([
            ("seq_idx", lambda: cake_rt.ssd_plan(*ssd, 64, seq_idx=seq_idx, stream=handle)),
            ("seq_idx", lambda: mamba_chunk_scan_combined(*ssd, 64, seq_idx=seq_idx)),
            ("cu_seqlens_q", lambda: indexer_topk(*dsa, TOPK, cu_seqlens_q=cu, cu_seqlens_k=CU)),
        ])
        counter += 1
    g.replay()
    torch.cuda.synchronize()
    assert int(counter.item()) == 2
