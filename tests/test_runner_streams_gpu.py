"""A prepared DSA runner on many streams and on another device than the current one (GPU).

The architecture contract's per-stream rule ("released when its stream is gone, or bounded") applied to a runner's
further streams: a runner run on more streams than ``MAX_STREAM_STATES``, each a ``cupy.cuda.Stream`` dropped after its
run, keeps a bounded number of them and every run still gives the reference's bits; a stream whose run is still queued
behind a long kernel when its memory is released still reads its own ticket word and workspace when the run starts,
with the pool's blocks handed out and filled from another stream meanwhile. A runner prepared on
device 1 with device 0 current runs on device 1 and refuses a stream of device 0. Inputs as in
``test_robustness_gpu.py`` (exact scores: results equal the float64 reference bit for bit)."""
import gc

import numpy as np
import pytest

from test_robustness_gpu import TOPK, exact_inputs, hold, poisoned

pytestmark = pytest.mark.gpu


def _meta(T, Tkv):
    # Two segments and a key split: the plan needs ticket words and a library workspace of its own on each stream.
    cu_q = np.array([0, T // 3, T], np.int32)
    cu_k = np.array([0, Tkv // 2, Tkv], np.int32)
    return dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, key_split=1024, schedule="ticket")


def _reference(host, meta):
    from cake_rt.reference.dsa import dsa_indexer_reference

    ref = {k: v for k, v in meta.items() if k.startswith("cu_")}
    wi, ws = dsa_indexer_reference(*host, TOPK, **ref)
    return np.asarray(wi), np.asarray(ws, np.float32)


def test_runner_on_many_dropped_streams_is_bounded_and_exact():
    import cupy

    from cake_rt.launch.streams import MAX_STREAM_STATES, collect
    from cake_rt.ops import dsa

    T, Tkv = 96, 8192
    host, dev = exact_inputs(21, T, Tkv)
    meta = _meta(T, Tkv)
    wi, ws = _reference(host, meta)
    idx, sc = poisoned(T)
    runner = dsa.prepare_dsa_indexer_det_topk(*dev, TOPK, indices=idx, scores=sc, **meta)
    assert runner.workspace is not None and runner.tickets is not None
    runner()
    cupy.cuda.Device().synchronize()
    for i in range(2 * MAX_STREAM_STATES + 3):
        s = cupy.cuda.Stream(non_blocking=True)
        with s:
            idx.fill(0x7F7F7F7F)
            sc.fill(np.nan)
        runner(stream=s)
        s.synchronize()
        np.testing.assert_array_equal(idx.get(), wi, err_msg=f"stream {i}")
        np.testing.assert_array_equal(sc.get(), ws, err_msg=f"stream {i}")
        del s
        gc.collect()
    assert len(runner._per_stream) <= MAX_STREAM_STATES + 1, len(runner._per_stream)
    cupy.cuda.Device().synchronize()
    collect()
    assert np.all(runner.tickets.read() == 0)


def test_released_stream_memory_outlives_its_queued_run():
    """A run queued on ``s`` behind a 1 s kernel (the outputs poisoned on ``s`` just before it); ``s``'s memory is
    released while it waits (more further streams than the runner keeps), and blocks of the sizes of its workspace and
    ticket word are then taken from ``s``'s pool (which hands a freed block back at once) and filled with junk from
    another stream, before the run starts. The run must read its own ticket word and workspace: junk words would skip
    its units and leave the poison."""
    import cupy

    from cake_rt.launch.streams import MAX_STREAM_STATES, collect
    from cake_rt.ops import dsa

    T, Tkv = 96, 8192
    host, dev = exact_inputs(22, T, Tkv)
    meta = _meta(T, Tkv)
    wi, ws = _reference(host, meta)
    idx, sc = poisoned(T)
    runner = dsa.prepare_dsa_indexer_det_topk(*dev, TOPK, indices=idx, scores=sc, **meta)
    runner()
    cupy.cuda.Device().synchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    runner(stream=s)                      # the runner's first further stream: the oldest one it keeps
    s.synchronize()
    nbytes, nwords = runner.workspace.nbytes, runner.tickets.array.size
    hold(s, 1_000_000_000)
    with s:
        idx.fill(0x7F7F7F7F)
        sc.fill(np.nan)
    runner(stream=s)                      # queued behind the hold
    others = [cupy.cuda.Stream(non_blocking=True) for _ in range(MAX_STREAM_STATES)]
    for o in others:
        runner(stream=o)                  # the last one releases s's memory
    assert s.ptr not in runner._per_stream
    collect()
    junk, side = [], cupy.cuda.Stream(non_blocking=True)
    for _ in range(4):
        with s:
            a, b = cupy.empty(nbytes, cupy.uint8), cupy.empty(nwords, cupy.uint32)
        with side:                        # written now, not behind the hold
            a.fill(0xAB)
            b.fill(0x55555555)
        junk += [a, b]
    cupy.cuda.Device().synchronize()
    np.testing.assert_array_equal(idx.get(), wi)
    np.testing.assert_array_equal(sc.get(), ws)


def test_runner_on_device_1_while_device_0_is_current():
    import cupy

    from cake_rt.ops import dsa

    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs >= 2 CUDA devices")
    T, Tkv = 96, 8192
    with cupy.cuda.Device(1):
        host, dev = exact_inputs(23, T, Tkv)
        idx, sc = poisoned(T)
        s1 = cupy.cuda.Stream(non_blocking=True)
    meta = _meta(T, Tkv)
    wi, ws = _reference(host, meta)
    with cupy.cuda.Device(0):
        s0 = cupy.cuda.Stream(non_blocking=True)
        runner = dsa.prepare_dsa_indexer_det_topk(*dev, TOPK, indices=idx, scores=sc, **meta)
        for stream in (None, s1):
            with cupy.cuda.Device(1):
                idx.fill(0x7F7F7F7F)
                sc.fill(np.nan)
                cupy.cuda.Device().synchronize()
            runner(stream=stream)
            assert cupy.cuda.runtime.getDevice() == 0
            with cupy.cuda.Device(1):
                cupy.cuda.Device().synchronize()
                np.testing.assert_array_equal(idx.get(), wi)
                np.testing.assert_array_equal(sc.get(), ws)
        with pytest.raises(ValueError, match="^stream: "):
            runner(stream=s0)
        assert cupy.cuda.runtime.getDevice() == 0
