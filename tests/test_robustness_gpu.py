"""Robustness on the GPU (issue #9): stream order of library writes on a non-blocking stream with
memory-pool reuse, plan eviction while calls are queued, CUDA graph capture with plan eviction and
workspace growth, misaligned views, aliasing, read-only outputs, stream handles, one runner on two
threads and two streams, per-thread default streams.

Every test here but one fails on the code before the fix (wrong bits, a crash, or no error); the SSD
segment-table test is a guard (that upload was already stream-ordered). Scenarios that crashed
the process (a misaligned address, a bad handle, an illegal address after eviction) run in a subprocess so
a failure cannot poison the CUDA context of the other tests.

Inputs are small integers (q, k) and signed powers of two (weights): every score is exact in float32
whatever the summation order, so results must equal the float64 reference exactly, ties included.
"""
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from cake_rt.interop import BF16

pytestmark = pytest.mark.gpu

H, D, TOPK = 32, 128, 16
HOLD_NS = 200_000_000  # a 200 ms kernel keeps a stream busy while the host queues work behind it


def _cp():
    import cupy

    return cupy


def _dsa():
    from cake_rt.ops import dsa

    return dsa


def exact_inputs(seed, T, Tkv):
    """Host inputs and their device copies, complete on return (``cupy.asarray`` copies asynchronously on the
    current stream; a later call on a non-blocking stream is not ordered after it)."""
    rng = np.random.default_rng(seed)
    q = rng.integers(-3, 4, (T, H, D)).astype(BF16)
    k = rng.integers(-3, 4, (Tkv, D)).astype(BF16)
    w = (2.0 ** rng.integers(-3, 3, (T, H)) * rng.choice([-1, 1], (T, H))).astype(np.float32)
    cupy = _cp()
    dev = (cupy.asarray(q), cupy.asarray(k), cupy.asarray(w))
    cupy.cuda.get_current_stream().synchronize()
    return (q, k, w), dev


def layout(seed, T, nseg):
    """cu_seqlens (int32, host) of ``nseg`` segments over T tokens (same number of segments, moved cuts)."""
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.choice(np.arange(1, T), nseg - 1, replace=False))
    return np.concatenate([[0], cuts, [T]]).astype(np.int32)


def reference(host, cu):
    from cake_rt.reference.dsa import dsa_indexer_reference

    i, s = dsa_indexer_reference(*host, TOPK, cu_seqlens_q=cu, cu_seqlens_k=cu)
    return np.asarray(i, np.int32), np.asarray(s, np.float32)


def assert_exact(idx, sc, want):
    i = idx.get() if hasattr(idx, "get") else idx
    s = sc.get() if hasattr(sc, "get") else sc
    np.testing.assert_array_equal(i, want[0])
    np.testing.assert_array_equal(s, want[1])


_HOLD_WORDS = []  # the spinner's words: never freed, so no pool block is reused under a queued hold


def hold(stream, ns=HOLD_NS):
    """Queue the bench spinner (one CTA) on ``stream``: it runs for ``ns`` nanoseconds (no stop flag)."""
    from cake_rt.launch.compile import get_kernel
    from cake_rt.launch.grid import launch

    cupy = _cp()
    if not _HOLD_WORDS:
        _HOLD_WORDS.append(cupy.zeros(8, dtype=cupy.uint32))
        cupy.cuda.Device().synchronize()
    words = _HOLD_WORDS[0]
    kern = get_kernel("bench/spin.cu", "cake_bench_spin")
    launch(kern, 1, 32, (words, words[4:], np.uint64(ns)), shared_mem=1024, stream=stream)


def junk_queued_after_hold(stream, value=0, max_bytes=1 << 17):
    """Pool blocks of every small size, written by kernels queued behind a hold on ``stream`` and freed at
    once: the next allocations on this stream get memory that a queued kernel will still write."""
    cupy = _cp()
    with stream:
        blocks = [cupy.empty(n, dtype=cupy.uint8) for n in range(512, max_bytes + 1, 512)]
        hold(stream)
        for b in blocks:
            b.fill(value)
    del blocks


def poisoned(T):
    """Outputs filled with poison, complete on return (a later call on a non-blocking stream is not ordered
    after the current stream's fill)."""
    cupy = _cp()
    out = cupy.full((T, TOPK), 0x7F7F7F7F, dtype=cupy.int32), cupy.full((T, TOPK), np.nan, dtype=cupy.float32)
    cupy.cuda.get_current_stream().synchronize()
    return out


def run_script(body: str, timeout=40, args=()):
    """Run ``_PRELUDE`` then ``body`` (dedented) in a fresh Python (same PYTHONPATH and cache; ``args``
    in ``sys.argv[1:]``): (returncode, combined output)."""
    code = _PRELUDE + textwrap.dedent(body)
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", os.getcwd())
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                       env=env)
    return p.returncode, p.stdout + p.stderr


_PRELUDE = """
import numpy as np, cupy
from cake_rt.interop import BF16
from cake_rt.ops.dsa import dsa_indexer_det_topk, prepare_dsa_indexer_det_topk
rng = np.random.default_rng(3)
def inputs(T, Tkv, H=32, D=128):
    q = cupy.asarray(rng.integers(-3, 4, (T, H, D)).astype(BF16))
    k = cupy.asarray(rng.integers(-3, 4, (Tkv, D)).astype(BF16))
    w = cupy.asarray((2.0 ** rng.integers(-3, 3, (T, H))).astype(np.float32))
    return q, k, w
"""


# ----------------------------------------------------------------------------------------------------
# stream order of library writes (memory-pool reuse on a non-blocking stream)
# ----------------------------------------------------------------------------------------------------

def test_dsa_eager_plan_table_is_written_in_stream_order():
    cupy = _cp()
    T = 128
    host, dev = exact_inputs(1, T, T)
    cu = layout(101, T, 5)
    want = reference(host, cu)
    s = cupy.cuda.Stream(non_blocking=True)
    junk_queued_after_hold(s)
    with s:
        idx, sc = _dsa().dsa_indexer_det_topk(*dev, TOPK, cu_seqlens_q=cu, cu_seqlens_k=cu, stream=s)
    s.synchronize()
    assert_exact(idx, sc, want)


def test_dsa_prepared_first_run_is_ordered_after_prepare():
    cupy = _cp()
    T = 128
    host, dev = exact_inputs(2, T, T)
    cu = layout(102, T, 3)
    want = reference(host, cu)
    s = cupy.cuda.Stream(non_blocking=True)
    other = cupy.cuda.Stream(non_blocking=True)
    idx, sc = poisoned(T)
    junk_queued_after_hold(s)
    with s:
        runner = _dsa().prepare_dsa_indexer_det_topk(*dev, TOPK, cu_seqlens_q=cu, cu_seqlens_k=cu, indices=idx,
                                                     scores=sc, schedule="ticket")
    runner(stream=s)  # first run on the prepare stream, queued behind the pool's earlier writers
    s.synchronize()
    assert_exact(idx, sc, want)
    idx.fill(0x7F7F7F7F)
    sc.fill(np.nan)
    cupy.cuda.get_current_stream().synchronize()  # the poison lands before the run on `other`
    runner(stream=other)  # and on another stream
    other.synchronize()
    assert_exact(idx, sc, want)


def test_ticket_words_zeroed_on_the_creating_stream():
    """Words made while stream ``t`` is current come from ``t``'s pool, whose block a kernel queued on ``t``
    still writes: their zero must land after that write (on ``t``) and be complete before a launch on
    another stream ``s`` that is not ordered after ``t``. Then the same with ``s`` current (same stream)."""
    cupy = _cp()
    from cake_rt.launch.compile import get_kernel
    from cake_rt.launch.grid import launch
    from cake_rt.launch.tickets import TicketWords

    k = get_kernel("common/selftest.cu", "selftest_ticket")
    nunits = 2053
    s = cupy.cuda.Stream(non_blocking=True)
    t = cupy.cuda.Stream(non_blocking=True)
    junk_queued_after_hold(t, value=0x40)  # a stale count (0x40404040) that would skip every unit
    with t:
        words = TicketWords(1)
    claims = cupy.zeros(nunits, np.uint32)
    cupy.cuda.Device().synchronize()  # `t`'s queued junk write has landed; `s` is not ordered after `t`
    launch(k, 97, 64, (words.array, claims, np.int32(nunits)), stream=s)
    s.synchronize()
    assert np.all(claims.get() == 1), "words made on another stream were used before their zero landed"

    junk_queued_after_hold(s, value=0x40)
    with s:
        words = TicketWords(1)
    claims.fill(0)
    cupy.cuda.Device().synchronize()
    launch(k, 97, 64, (words.array, claims, np.int32(nunits)), stream=s)
    s.synchronize()
    assert np.all(claims.get() == 1), "words made on the launch stream were not zeroed after its queued writes"


def _ssd_inputs(seed, L=200, Hh=4, P=64, N=64):
    cupy = _cp()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, L, Hh, P)).astype(np.float32).astype(BF16)
    B = rng.standard_normal((1, L, 1, N)).astype(np.float32).astype(BF16)
    C = rng.standard_normal((1, L, 1, N)).astype(np.float32).astype(BF16)
    dt = (rng.standard_normal((1, L, Hh)) * 0.5).astype(np.float32)
    A = (-rng.uniform(1.0, 8.0, Hh)).astype(np.float32)
    dev = [cupy.asarray(a) for a in (x, dt, A, B, C)]
    return (x, dt, A, B, C), dev


def test_ssd_segment_table_is_written_in_stream_order():
    cupy = _cp()
    from cake_rt.ops.ssd import ssd_combined

    host, dev = _ssd_inputs(5)
    cu = np.array([0, 17, 64, 151, 200], np.int32)
    base = ssd_combined(*dev, 64, cu_seqlens=cu, family="exact")
    cupy.cuda.Device().synchronize()
    base = base.get()
    s = cupy.cuda.Stream(non_blocking=True)
    from cake_rt.ops import ssd as ssd_mod

    ssd_mod._tables.clear()  # the next call uploads the table again
    junk_queued_after_hold(s)
    with s:
        y = ssd_combined(*dev, 64, cu_seqlens=cu, family="exact", stream=s)
    s.synchronize()
    np.testing.assert_array_equal(y.get().view(np.uint16), base.view(np.uint16))


# ----------------------------------------------------------------------------------------------------
# lifetimes: eviction while queued, graph capture with eviction and workspace growth
# ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("current", ["call stream current", "call stream not current"])
def test_plan_eviction_while_calls_are_queued_keeps_the_table_alive(current):
    # Under CuPy's stream-ordered allocator (cudaMallocAsync) a block freed by an eviction is handed to the
    # next table upload at once; every layout has the same number of work units (segment lengths are
    # multiples of 8), so every table has the same size and that upload lands on the evicted table while
    # the call that reads it still waits behind the hold. The evicting calls write into preallocated
    # outputs. A sync of the legacy stream and a pool trim at the end give the pool its chance to unmap.
    rc, out = run_script("""
    import sys
    pool = cupy.cuda.MemoryAsyncPool()
    cupy.cuda.set_allocator(pool.malloc)
    from cake_rt.launch.compile import get_kernel
    from cake_rt.launch.grid import launch
    from cake_rt.reference.dsa import dsa_indexer_reference
    T = 128
    q, k, w = inputs(T, T)
    def lay(seed):
        r = np.random.default_rng(seed)
        cuts = 8 * np.sort(r.choice(np.arange(1, T // 8), 4, replace=False))
        return np.concatenate([[0], cuts, [T]]).astype(np.int32)
    layouts, seen = [], set()
    for i in range(10000):
        cu = lay(i)
        if cu.tobytes() not in seen:
            seen.add(cu.tobytes())
            layouts.append(cu)
        if len(layouts) == 81:
            break
    cu0 = layouts[0]
    s = cupy.cuda.Stream(non_blocking=True)
    kern = get_kernel("bench/spin.cu", "cake_bench_spin")
    words = cupy.zeros(8, dtype=cupy.uint32)
    idx = cupy.full((T, 16), 0x7F7F7F7F, dtype=cupy.int32)
    sc = cupy.full((T, 16), np.nan, dtype=cupy.float32)
    idx2 = cupy.empty((T, 16), dtype=cupy.int32)
    sc2 = cupy.empty((T, 16), dtype=cupy.float32)
    cupy.cuda.Device().synchronize()  # inputs and outputs (legacy stream) complete before the calls on s
    # compile and make the stream's state before the hold
    dsa_indexer_det_topk(q, k, w, 16, cu_seqlens_q=cu0, cu_seqlens_k=cu0, indices=idx2, scores=sc2, stream=s)
    cupy.cuda.Device().synchronize()
    def calls():
        launch(kern, 1, 32, (words, words[4:], np.uint64(400_000_000)), shared_mem=1024, stream=s)
        dsa_indexer_det_topk(q, k, w, 16, cu_seqlens_q=cu0, cu_seqlens_k=cu0, indices=idx, scores=sc, stream=s)
        # 80 other layouts evict the queued call's plan while it waits behind the hold
        for cu in layouts[1:]:
            dsa_indexer_det_topk(q, k, w, 16, cu_seqlens_q=cu, cu_seqlens_k=cu, indices=idx2, scores=sc2,
                                 stream=s)
    if sys.argv[1] == "call stream current":
        with s:
            calls()
    else:
        calls()
    cupy.cuda.Stream.null.synchronize()
    pool.free_all_blocks()
    s.synchronize()
    wi, ws = dsa_indexer_reference(q.get(), k.get(), w.get(), 16, cu_seqlens_q=cu0, cu_seqlens_k=cu0)
    ok = np.array_equal(idx.get(), wi) and np.array_equal(sc.get(), np.asarray(ws, np.float32))
    print("RESULT", "OK" if ok else "WRONG")
    """, args=(current,))
    assert rc == 0 and "RESULT OK" in out, out[-3000:]


@pytest.mark.parametrize("stream_arg", ["owned stream", "current stream", "raw handle"])
def test_dropped_runner_keeps_its_memory_until_its_queued_runs_complete(stream_arg):
    # A prepared runner runs (its steady path after the first run) behind a hold, then is dropped: its work
    # table, ticket word and workspace must stay allocated until those runs have completed. A block freed
    # early returns to the pool of the stream it was allocated on; the caller's next allocations there get
    # it and are filled on another stream (the caller knows nothing of the runs still waiting), so the
    # runs would read a garbage table.
    rc, out = run_script("""
    import gc, sys
    from cake_rt.launch.compile import get_kernel
    from cake_rt.launch.grid import launch
    from cake_rt.reference.dsa import dsa_indexer_reference
    T = 1024
    q, k, w = inputs(T, T)
    cu = np.array([0, 300, 700, 1024], np.int32)
    meta = dict(cu_seqlens_q=cu, cu_seqlens_k=cu)
    split = dict(key_split=128)  # split key ranges: the runner owns a workspace and arrival words too
    s = cupy.cuda.Stream(non_blocking=True)
    s2 = cupy.cuda.Stream(non_blocking=True)
    kern = get_kernel("bench/spin.cu", "cake_bench_spin")
    words = cupy.zeros(8, dtype=cupy.uint32)
    idx = cupy.full((T, 16), 0x7F7F7F7F, dtype=cupy.int32)
    sc = cupy.full((T, 16), np.nan, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()  # inputs and poison (legacy stream) land before the runs on s
    with s:
        runner = prepare_dsa_indexer_det_topk(q, k, w, 16, indices=idx, scores=sc, stream=s, **meta, **split)
    assert runner.plan.nsplit > 0 and runner.workspace is not None
    arg = {"owned stream": s, "current stream": None, "raw handle": s.ptr}[sys.argv[1]]
    with s:
        runner(stream=arg)  # the first run on the stream makes its state
        s.synchronize()
        idx.fill(0x7F7F7F7F)
        sc.fill(np.nan)
        launch(kern, 1, 32, (words, words[4:], np.uint64(300_000_000)), shared_mem=1024, stream=s)
        for _ in range(3):
            runner(stream=arg)
    nbytes = (runner.plan.units.nbytes, runner.workspace.nbytes if runner.workspace is not None else 0)
    del runner
    gc.collect()
    junk = []
    with s:
        for _ in range(64):
            for n in nbytes:
                if n:
                    junk.append(cupy.empty(n, dtype=cupy.uint8))
    for a in junk:
        cupy.cuda.runtime.memsetAsync(a.data.ptr, 255, a.nbytes, s2.ptr)
    s2.synchronize()
    s.synchronize()
    wi, ws = dsa_indexer_reference(q.get(), k.get(), w.get(), 16, **meta)
    ok = np.array_equal(idx.get(), wi) and np.array_equal(sc.get(), np.asarray(ws, np.float32))
    print("RESULT", "OK" if ok else "WRONG")
    """, args=(stream_arg,))
    assert rc == 0 and "RESULT OK" in out, out[-3000:]


def test_graph_captured_eager_call_survives_plan_eviction():
    cupy = _cp()
    T = 128
    host, dev = exact_inputs(3, T, T)
    cu0 = layout(200, T, 5)
    want = reference(host, cu0)
    s = cupy.cuda.Stream(non_blocking=True)
    idx, sc = poisoned(T)
    with s:
        _dsa().dsa_indexer_det_topk(*dev, TOPK, cu_seqlens_q=cu0, cu_seqlens_k=cu0, indices=idx, scores=sc,
                                    stream=s)  # warm: plan, stream state
        s.synchronize()
        s.begin_capture()
        try:
            _dsa().dsa_indexer_det_topk(*dev, TOPK, cu_seqlens_q=cu0, cu_seqlens_k=cu0, indices=idx, scores=sc,
                                        stream=s)
        finally:
            graph = s.end_capture()
        for i in range(1, 81):  # evict the captured plan; new tables reuse freed memory
            cu = layout(200 + i, T, 5)
            _dsa().dsa_indexer_det_topk(*dev, TOPK, cu_seqlens_q=cu, cu_seqlens_k=cu, stream=s)
        s.synchronize()
        idx.fill(0x7F7F7F7F)
        sc.fill(np.nan)
        graph.launch(s)
    s.synchronize()
    assert_exact(idx, sc, want)


def test_graph_captured_eager_call_survives_workspace_growth():
    cupy = _cp()
    T = 64
    host, dev = exact_inputs(4, T, 4 * T)
    cu = np.array([0, T], np.int32)
    cuk = np.array([0, 4 * T], np.int32)
    from cake_rt.reference.dsa import dsa_indexer_reference

    wi, wsc = dsa_indexer_reference(*host, TOPK, cu_seqlens_q=cu, cu_seqlens_k=cuk)
    s = cupy.cuda.Stream(non_blocking=True)
    idx, sc = poisoned(T)
    kw = dict(cu_seqlens_q=cu, cu_seqlens_k=cuk, indices=idx, scores=sc, stream=s, key_split=64)
    need = _dsa().dsa_indexer_workspace_bytes(*dev, TOPK, cu_seqlens_q=cu, cu_seqlens_k=cuk, key_split=64)
    assert need > 0
    with s:
        _dsa().dsa_indexer_det_topk(*dev, TOPK, **kw)  # warm: the stream's workspace at this size
        s.synchronize()
        s.begin_capture()
        try:
            _dsa().dsa_indexer_det_topk(*dev, TOPK, **kw)
        finally:
            graph = s.end_capture()
        # A larger call on the same stream grows the library workspace (the old one is no longer needed by
        # eager calls, but the graph still points at it).
        big_host, big = exact_inputs(5, 8 * T, 8 * T)
        _dsa().dsa_indexer_det_topk(*big, TOPK, stream=s, key_split=64)
        s.synchronize()
        victims = [cupy.full(n // 4, 0x5A5A5A5A, dtype=cupy.uint32) for n in range(512, 4 * need + 512, 512)]
        idx.fill(0x7F7F7F7F)
        sc.fill(np.nan)
        graph.launch(s)
    s.synchronize()
    for v in victims:  # the replay wrote into memory it no longer owned
        assert bool((v == 0x5A5A5A5A).all())
    assert_exact(idx, sc, (np.asarray(wi, np.int32), np.asarray(wsc, np.float32)))


def test_capture_that_needs_more_workspace_is_refused():
    cupy = _cp()
    T = 64
    host, dev = exact_inputs(6, T, 4 * T)
    s = cupy.cuda.Stream(non_blocking=True)
    other = cupy.cuda.Stream(non_blocking=True)
    cu = np.array([0, T], np.int32)
    cuk = np.array([0, 4 * T], np.int32)
    kw = dict(cu_seqlens_q=cu, cu_seqlens_k=cuk, key_split=64)
    with other:
        _dsa().dsa_indexer_det_topk(*dev, TOPK, stream=other, **kw)  # the plan exists (made on another stream)
        other.synchronize()
    with s:
        # One part per query block (no split, so no workspace): stream s has state but no workspace. (A call
        # with fewer blocks than SMs and no key_split is split automatically and would allocate one.)
        _dsa().dsa_indexer_det_topk(*dev, TOPK, stream=s, cu_seqlens_q=cu, cu_seqlens_k=cuk, key_split=1 << 30)
        s.synchronize()
        s.begin_capture()
        try:
            with pytest.raises(RuntimeError, match="capture"):
                _dsa().dsa_indexer_det_topk(*dev, TOPK, stream=s, **kw)
        finally:
            try:
                s.end_capture()
            except Exception:
                pass


# ----------------------------------------------------------------------------------------------------
# arguments that used to crash the context or return wrong bits
# ----------------------------------------------------------------------------------------------------

def test_misaligned_views_are_value_errors_not_faults():
    rc, out = run_script("""
    from cake_rt.ops.ssd import ssd_combined
    T = 64
    q, k, w = inputs(T, T)
    qbig = cupy.empty(T * 32 * 128 + 1, dtype=q.dtype)
    qv = qbig[1:].reshape(T, 32, 128)
    qv[...] = q
    assert qv.flags.c_contiguous and qv.data.ptr % 16
    for name, args in (("q", (qv, k, w)), ("k", (q, cupy.empty(T * 128 + 3, k.dtype)[3:].reshape(T, 128), w))):
        try:
            dsa_indexer_det_topk(*args, 16)
            cupy.cuda.Device().synchronize()
            print("NOERROR", name)
        except ValueError as e:
            print("VALUEERROR", str(e).split(":")[0])
    L, Hh, P, N = 100, 4, 64, 64
    x = cupy.empty(L * Hh * P + 1, dtype=BF16)[1:].reshape(1, L, Hh, P)
    dt = cupy.ones((1, L, Hh), np.float32); A = -cupy.ones(Hh, np.float32)
    B = cupy.zeros((1, L, 1, N), BF16); C = cupy.zeros((1, L, 1, N), BF16)
    try:
        ssd_combined(x, dt, A, B, C, 64)
        cupy.cuda.Device().synchronize()
        print("NOERROR x")
    except ValueError as e:
        print("VALUEERROR", str(e).split(":")[0])
    """)
    assert rc == 0, out[-3000:]
    assert "VALUEERROR q" in out and "VALUEERROR k" in out and "VALUEERROR x" in out, out[-3000:]


def test_garbage_int_stream_handle_is_a_value_error_not_a_segfault():
    rc, out = run_script("""
    q, k, w = inputs(32, 64)
    for h in (0xDEADBEEF000, 12345):
        try:
            dsa_indexer_det_topk(q, k, w, 16, stream=h)
            cupy.cuda.Device().synchronize()
            print("NOERROR")
        except ValueError as e:
            print("VALUEERROR", str(e).split(":")[0])
    """)
    assert rc == 0, out[-3000:]
    assert out.count("VALUEERROR stream") == 2, out[-3000:]


def test_out_aliasing_an_input_is_refused():
    cupy = _cp()
    from cake_rt.ops.ssd import ssd_combined

    host, dev = _ssd_inputs(7)
    x = dev[0]
    keep = x.copy()
    with pytest.raises(ValueError, match="^out: its memory overlaps x"):
        ssd_combined(*dev, 64, out=x)
    cupy.cuda.Device().synchronize()
    assert bool((x == keep).all())  # nothing ran


def test_overlapping_indices_and_scores_are_refused():
    cupy = _cp()
    T = 32
    host, dev = exact_inputs(8, T, T)
    buf = cupy.zeros(T * TOPK + 4, dtype=cupy.int32)
    idx = buf[: T * TOPK].reshape(T, TOPK)
    sc = buf[4:].view(cupy.float32).reshape(T, TOPK)
    with pytest.raises(ValueError, match="overlaps"):
        _dsa().dsa_indexer_det_topk(*dev, TOPK, indices=idx, scores=sc)
    cupy.cuda.Device().synchronize()
    assert int(buf.sum()) == 0


class _ReadOnlyView:
    """A read-only CUDA array interface export over a CuPy array (what a read-only producer hands out)."""

    def __init__(self, a):
        d = dict(a.__cuda_array_interface__)
        d["data"] = (a.data.ptr, True)
        self.__cuda_array_interface__ = d


def test_read_only_output_is_refused_and_untouched():
    cupy = _cp()
    T = 32
    host, dev = exact_inputs(9, T, T)
    idx, sc = poisoned(T)
    with pytest.raises(ValueError, match="^indices: cannot be written in place"):
        _dsa().dsa_indexer_det_topk(*dev, TOPK, indices=_ReadOnlyView(idx), scores=sc)
    cupy.cuda.Device().synchronize()
    assert bool((idx == 0x7F7F7F7F).all())


def test_requires_grad_inputs_are_read_and_outputs_refused():
    torch = pytest.importorskip("torch")
    T = 32
    host, dev = exact_inputs(10, T, T)
    want = reference(host, None)
    q = torch.from_dlpack(dev[0]).requires_grad_(False)
    w = torch.from_dlpack(dev[2]).clone().requires_grad_(True)
    idx, sc = _dsa().dsa_indexer_det_topk(q, dev[1], w, TOPK)
    assert_exact(idx, sc, want)
    out_s = torch.zeros((T, TOPK), dtype=torch.float32, device="cuda", requires_grad=True)
    with pytest.raises(ValueError, match="^scores: a tensor that requires grad"):
        _dsa().dsa_indexer_det_topk(*dev, TOPK, scores=out_s)


# ----------------------------------------------------------------------------------------------------
# threads and streams
# ----------------------------------------------------------------------------------------------------

def run_threads(fn, arg_tuples):
    """Run ``fn(*args)`` on one thread per entry of ``arg_tuples``, all started, then all joined."""
    threads = [threading.Thread(target=fn, args=args) for args in arg_tuples]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_one_runner_on_two_threads_and_two_streams():
    """Two threads run one runner at the same moment on two streams (both wait on one event); each copies
    the outputs on its own stream right after its run. A run must have written every row itself when its
    stream reaches the copy, so the runs may not share a ticket word (each would do part of the units). The plan
    has more units than the grid has CTAs, so its launches draw them from the word. The first key segment is 64x
    longer than the others, so a run that skipped its unit finishes first."""
    cupy = _cp()
    T, long_k, short_k = 300, 65536, 1024
    cu_q = np.arange(T + 1, dtype=np.int32)  # one query per segment: one work unit per query
    cu_k = np.concatenate([[0], np.cumsum([long_k] + [short_k] * (T - 1))]).astype(np.int32)
    host, dev = exact_inputs(11, T, int(cu_k[-1]))
    meta = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=False, schedule="ticket", key_split=1 << 30)
    from cake_rt.reference.dsa import dsa_indexer_reference

    wi, ws = dsa_indexer_reference(*host, TOPK, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=False)
    idx, sc = poisoned(T)
    runner = _dsa().prepare_dsa_indexer_det_topk(*dev, TOPK, indices=idx, scores=sc, **meta)
    assert runner._dp.draws("ticket") and runner.tickets is not None
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
    gate_stream = cupy.cuda.Stream(non_blocking=True)
    snaps, errors = [], []

    def work(s, gate, barrier):
        try:
            barrier.wait()
            s.wait_event(gate)
            runner(stream=s)
            with s:
                snap = (idx.copy(), sc.copy())
            s.synchronize()
            snaps.append((snap[0].get(), snap[1].get()))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    for _ in range(8):
        cupy.cuda.Device().synchronize()
        idx.fill(0x7F7F7F7F)
        sc.fill(np.nan)
        cupy.cuda.Device().synchronize()
        hold(gate_stream, 50_000_000)  # both threads queue their runs behind this event
        gate = cupy.cuda.Event(disable_timing=True)
        gate.record(gate_stream)
        barrier = threading.Barrier(2)
        run_threads(work, [(s, gate, barrier) for s in streams])
    assert not errors, errors
    assert len(snaps) == 16
    for i, s in snaps:
        np.testing.assert_array_equal(i, wi)
        np.testing.assert_array_equal(s, np.asarray(ws, np.float32))
    assert np.all(runner.tickets.read() == 0)


def test_per_thread_default_streams_do_not_share_state():
    cupy = _cp()
    T, Tkv = 1024, 32768  # kernels long enough that the two threads' launches overlap
    host, dev = exact_inputs(12, T, Tkv)
    base_i, _ = _dsa().dsa_indexer_det_topk(*dev, TOPK, schedule="ticket")
    cupy.cuda.Device().synchronize()
    outs, errors = [], []
    barrier = threading.Barrier(2)

    def work():
        # Every call's output is poisoned before it and copied after it (all on this thread's stream, no host
        # wait), so a call that lost work items to the other thread's concurrent kernel (a shared ticket word)
        # leaves poison in its copy even when a later call fills the rows.
        try:
            with cupy.cuda.Stream.ptds:
                idx, sc = poisoned(T)
                snaps = []
                barrier.wait()
                for _ in range(20):
                    idx.fill(0x7F7F7F7F)
                    _dsa().dsa_indexer_det_topk(*dev, TOPK, indices=idx, scores=sc, schedule="ticket")
                    snaps.append(idx.copy())
                cupy.cuda.Stream.ptds.synchronize()
                outs.extend(a.get() for a in snaps)
        except Exception as exc:  # pragma: no cover
            errors.append(exc)

    run_threads(work, [(), ()])
    assert not errors, errors
    assert len(outs) == 40
    for o in outs:
        np.testing.assert_array_equal(o, base_i.get())


def test_wrapping_a_callers_stream_never_destroys_it_or_churns_its_state():
    import gc
    import warnings

    from cupy_backends.cuda.api import runtime

    from cake_rt.launch import streams

    T, Tkv = 64, 96
    host, dev = exact_inputs(13, T, Tkv)
    want = reference(host, None)
    raw = runtime.streamCreateWithFlags(runtime.streamNonBlocking)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)  # CuPy 14 deprecates ExternalStream
            first = None
            for _ in range(3):
                idx, sc = poisoned(T)
                _dsa().dsa_indexer_det_topk(*dev, TOPK, indices=idx, scores=sc, stream=raw)
                gc.collect()  # this call's wrapper of `raw` is gone
                state = streams.stream_states().get(streams.stream_key(0, raw))
                assert state is not None and state is (first or state)  # one state, kept across calls
                first = state
                # this call's outputs are done before the next iteration drops them: their blocks return to the
                # legacy stream's pool, whose next poison fill is not ordered after a call still queued on `raw`
                runtime.streamSynchronize(raw)
        runtime.streamSynchronize(raw)  # fails if collecting a wrapper destroyed the caller's stream
        assert_exact(idx, sc, want)
    finally:
        streams.release_stream(raw)
        runtime.streamSynchronize(raw)
        runtime.streamDestroy(raw)
