"""A raw stream handle destroyed while a call on it is still queued, and a new stream that the driver gives the same
handle (GPU). The library cannot see a raw handle's destruction: a call on the new stream takes the old one's state
(ticket words, workspace). That is safe only if the driver does not hand out a destroyed stream's handle before the
stream's queued work has run (``cudaStreamDestroy`` returns at once and releases the stream's resources after its
work). This test measures that premise: the old call is queued behind a 1 s kernel, the stream destroyed, streams made
until one has the old handle (skipped when none does), and a call on it made at once; both calls must give the
reference's bits. Inputs as in ``test_robustness_gpu.py``."""
import numpy as np
import pytest

from test_robustness_gpu import TOPK, exact_inputs, hold, poisoned

pytestmark = pytest.mark.gpu


def test_a_reused_handle_does_not_share_state_with_queued_work():
    import cupy
    from cupy_backends.cuda.api import runtime

    import cake_rt
    from cake_rt.launch.streams import external_stream
    from cake_rt.reference.dsa import dsa_indexer_reference

    T, Tkv = 96, 8192
    meta = dict(cu_seqlens_q=np.array([0, 32, T], np.int32), cu_seqlens_k=np.array([0, 4096, Tkv], np.int32),
                key_split=1024, schedule="ticket")
    host, dev = exact_inputs(31, T, Tkv)
    wi, ws = dsa_indexer_reference(*host, TOPK, cu_seqlens_q=meta["cu_seqlens_q"], cu_seqlens_k=meta["cu_seqlens_k"])
    old = runtime.streamCreateWithFlags(1)
    idx1, sc1 = poisoned(T)
    idx2, sc2 = poisoned(T)
    cake_rt.dsa_indexer_det_topk(*dev, TOPK, indices=idx1, scores=sc1, stream=old, **meta)  # its state made
    runtime.streamSynchronize(old)
    with external_stream(old):
        idx1.fill(0x7F7F7F7F)
        sc1.fill(np.nan)
    hold(external_stream(old), 1_000_000_000)
    cake_rt.dsa_indexer_det_topk(*dev, TOPK, indices=idx1, scores=sc1, stream=old, **meta)  # queued behind the hold
    runtime.streamDestroy(old)
    made, new = [], None
    for _ in range(64):
        h = runtime.streamCreateWithFlags(1)
        if h == old:
            new = h
            break
        made.append(h)
    try:
        if new is None:
            cupy.cuda.Device().synchronize()
            pytest.skip("the driver gave no new stream the destroyed stream's handle while its work was queued")
        cake_rt.dsa_indexer_det_topk(*dev, TOPK, indices=idx2, scores=sc2, stream=new, **meta)
        cupy.cuda.Device().synchronize()
        for i, s in ((idx1, sc1), (idx2, sc2)):
            np.testing.assert_array_equal(i.get(), np.asarray(wi))
            np.testing.assert_array_equal(s.get(), np.asarray(ws, np.float32))
    finally:
        for h in made + ([new] if new is not None else []):
            runtime.streamDestroy(h)
