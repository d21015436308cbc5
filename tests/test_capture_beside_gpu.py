"""An eager call's own host work beside a CUDA graph capture on another stream, and a PyTorch tensor's DLPack export
inside ``torch.cuda.graph`` (GPU).

Beside a capture: the driver refuses a "potentially unsafe" call (growing the memory pool, an upload from pageable
memory, a module load, an event wait) from a thread that holds a global or thread-local capture, or from any thread
while another holds a global one, and invalidates that capture. The library makes its own such work in relaxed capture
mode (``streams.relaxed_capture_mode``): each kind alone (``test_library_work_beside_a_capture``, whose ``plain`` arm,
the same work in the thread's own mode, xfails where the driver refuses it: the premise measured), every entry's first
call (new layouts, a new stream, programs loaded again, the pool grown; ``test_first_calls_beside_a_capture``), and a
program's first load under the call's own capture (``test_program_load_under_the_calls_own_capture``).

DLPack: inside ``torch.cuda.graph``, PyTorch's export of a tensor to a stream that is not capturing makes that stream
wait for the capture and join it; the library refuses it before the export, naming the argument
(``test_torch_export_to_another_stream_inside_torch_cuda_graph``, ``plain`` arm: the check removed, xfails where the
capture breaks), and takes the tensors on the capturing stream or on one the caller joined to the capture
(``test_torch_tensors_on_a_capturing_stream_are_captured``). The CPU side: ``tests/test_capture_beside_cpu.py``.
"""
import numpy as np
import pytest

from test_capture_metadata_gpu import BESIDE, T, _assert_capture_survived, _beside_a_capture, _no_gc
from test_robustness_gpu import TOPK, _cp, _ssd_inputs, exact_inputs

pytestmark = pytest.mark.gpu

GROW = 64 << 20  # bytes: more than any block the pool holds after free_all_blocks


def _clear_program_caches():
    """Forget every loaded program (the cubins stay in memory): the next lookup loads its module again. Returns what
    held the programs, for the caller to keep until no capture is under way: a module freed is a ``cuModuleUnload``,
    which synchronizes and breaks a capture on any stream (the library never unloads one: its programs live as long as
    the process), so the clearing is done before a capture and its objects are dropped after it."""
    from cake_rt.launch import compile as cc
    from cake_rt.ops import dsa, ssd

    held = []
    with cc._kernel_lock:
        held.append(dict(cc._kernel_cache))
        cc._kernel_cache.clear()
    held.append(dict(cc._kernel_memo))
    cc.clear_kernel_memo()
    held += [dict(ssd._problems), dict(ssd._plan_memo), ssd._last_call, dict(dsa._problems)]
    ssd._problems.clear()
    ssd._plan_memo.clear()
    ssd._last_call = (None, None)
    dsa._problems.clear()
    return held


def _pool_growth(s):
    from cake_rt.launch.streams import pool_empty

    return pool_empty(GROW, np.uint8, s or _cp().cuda.Stream.null)


def _upload(s):
    from cake_rt.launch.streams import upload

    return upload(np.arange(1 << 20, dtype=np.int32), 0 if s is None else s.ptr, s or _cp().cuda.Stream.null)


def _ticket_words(s):
    from cake_rt.launch.tickets import TicketWords

    return TicketWords(8, stream=s, sync=True)  # None: the current stream (the legacy one in the legacy case)


def _program_load(s):
    """The selftest program's load (its caches cleared before the capture: ``_clear_program_caches``)."""
    from cake_rt.launch.compile import get_kernel

    return get_kernel("common/selftest.cu", "selftest_float_key")


KINDS = {
    "pool-growth": (_pool_growth, lambda r: r.size == GROW),
    "upload": (_upload, lambda r: np.array_equal(r.get(), np.arange(1 << 20, dtype=np.int32))),
    "ticket-words": (_ticket_words, lambda r: not r.array.get().any()),
    "program-load": (_program_load, lambda r: r.num_regs > 0),
}


@pytest.mark.parametrize("relaxed", [True, False], ids=["relaxed", "plain"])
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("case", BESIDE)
def test_library_work_beside_a_capture(case, kind, relaxed, monkeypatch):
    """One kind of the library's own host work on a stream that is not capturing while another stream captures (this
    thread or another, global or thread-local mode; the legacy stream beside another thread's capture). ``relaxed``:
    the work is done and the capture replays. ``plain``: the same work in the thread's own mode (relaxed mode switched
    off): xfail when the driver refused it or the capture broke (the premise: the summary counts them), a pass where it
    allows it (then relaxed mode was not needed for that kind)."""
    cupy = _cp()
    from cake_rt.launch import streams

    work, check = KINDS[kind]
    _program_load(None)  # compiled before the capture (NVRTC is no driver call, but slow)
    held = _clear_program_caches()  # the program-load kind loads it again beside the capture
    cupy.get_default_memory_pool().free_all_blocks()  # the allocation beside the capture grows the pool
    if not relaxed:
        monkeypatch.setattr(streams, "_exchange_capture_mode", False)
    got, graph, count = _beside_a_capture(case, work)
    monkeypatch.undo()
    del held  # the old modules unloaded, no capture under way
    if not relaxed and (isinstance(got, Exception) or isinstance(graph, Exception)):
        pytest.xfail(f"{case} {kind}: plain -> {got!r}; the capture -> {graph!r}")
    assert not isinstance(got, Exception), repr(got)
    cupy.cuda.Device().synchronize()
    assert check(got), kind
    _assert_capture_survived(graph, count)


def _first_call_arrays(seed):
    """Inputs and caller-owned outputs for ``_first_calls`` (made before any capture: an allocation or a copy of the
    test's own beside it would be the test's call, not the library's)."""
    cupy = _cp()
    _, ssd = _ssd_inputs(seed)
    _, dsa = exact_inputs(seed + 1, T, T)
    out = {
        "ssd exact": cupy.empty_like(ssd[0]), "ssd chunkpar": cupy.empty_like(ssd[0]),
        "dsa": (cupy.empty((T, TOPK), np.int32), cupy.empty((T, TOPK), np.float32)),
        "runner": (cupy.empty((T, TOPK), np.int32), cupy.empty((T, TOPK), np.float32)),
    }
    cupy.cuda.Device().synchronize()
    return ssd, dsa, out


def _first_calls(ssd, dsa, out, cut, s, s3):
    """Every entry's first call of a layout on stream ``s`` (None: the current, legacy, stream), each result or the
    exception it raised: SSD exact and chunk-parallel (a new segment table; a new stream's workspace and ticket words),
    the DSA eager call (a new plan with a key split: its table, workspace and ticket words), prepare and its runner on
    ``s`` and on a further stream ``s3`` (that stream's own ticket word and workspace). Programs whose caches the
    caller cleared (``_clear_program_caches``) are loaded again."""
    import cake_rt

    cu_ssd = np.array([0, cut, 200], np.int32)
    cu_dsa = np.array([0, cut % (T - 1) + 1, T], np.int32)
    res = {}

    def put(name, fn):
        try:
            res[name] = fn()
        except Exception as exc:
            res[name] = exc

    for fam in ("exact", "chunkpar"):
        put(f"ssd {fam}", lambda: cake_rt.ssd_combined(*ssd, 64, cu_seqlens=cu_ssd, family=fam, out=out[f"ssd {fam}"],
                                                       stream=s))
    put("dsa", lambda: cake_rt.dsa_indexer_det_topk(*dsa, TOPK, cu_seqlens_q=cu_dsa, cu_seqlens_k=cu_dsa, key_split=16,
                                                    indices=out["dsa"][0], scores=out["dsa"][1], stream=s))

    def runner():
        r = cake_rt.prepare_dsa_indexer_det_topk(*dsa, TOPK, cu_seqlens_q=cu_dsa, cu_seqlens_k=cu_dsa, key_split=16,
                                                 indices=out["runner"][0], scores=out["runner"][1], stream=s)
        r(stream=s)
        r(stream=s3)
        return r.indices, r.scores

    put("runner", runner)
    return res


def _host(v):
    return tuple(a.get() for a in v) if isinstance(v, tuple) else v.get()


@pytest.mark.parametrize("case", BESIDE)
def test_first_calls_beside_a_capture(case):
    """Every entry's first call on a stream that is not capturing, beside a capture (the four cases of
    ``test_library_work_beside_a_capture``), with the pool emptied and every program to be loaded again, new layouts
    and a new stream: the results equal the same calls made after the capture (eager, everything built), bit for bit,
    and the capture replays. Fails on main (predicted: the first allocation, upload or load breaks the capture)."""
    cupy = _cp()
    idx = BESIDE.index(case)
    ssd, dsa, out = _first_call_arrays(50 + 2 * idx)
    legacy = case.endswith("legacy")
    s = cupy.cuda.Stream(non_blocking=True)
    s3 = cupy.cuda.Stream(non_blocking=True)  # made before the capture: a stream's creation beside it is the test's
    cut = 31 + 7 * idx  # a layout no other test uses: a new table and plan
    _first_calls(ssd, dsa, _first_call_arrays(90)[2], 97, s3, s3)  # the programs compiled and loaded once
    cupy.cuda.Device().synchronize()
    held = _clear_program_caches()  # every program loaded again beside the capture
    cupy.get_default_memory_pool().free_all_blocks()
    got, graph, count = _beside_a_capture(case, lambda stream: _first_calls(ssd, dsa, out, cut, stream, s3), s2=s)
    del held
    assert not isinstance(got, Exception), repr(got)
    cupy.cuda.Device().synchronize()
    bad = {n: v for n, v in got.items() if isinstance(v, Exception)}
    assert not bad, bad
    got = {n: _host(v) for n, v in got.items()}
    again = _first_call_arrays(50 + 2 * idx)[2]
    with (cupy.cuda.Stream.null if legacy else s):
        want = _first_calls(ssd, dsa, again, cut, None if legacy else s, s3)
    cupy.cuda.Device().synchronize()
    for name, w in want.items():
        assert not isinstance(w, Exception), (name, w)
        g, w = got[name], _host(w)
        for a, b in zip(g if isinstance(g, tuple) else (g,), w if isinstance(w, tuple) else (w,)):
            assert a.tobytes() == b.tobytes(), name
    _assert_capture_survived(graph, count)


@pytest.mark.parametrize("relaxed", [True, False], ids=["relaxed", "plain"])
def test_program_load_under_the_calls_own_capture(relaxed, monkeypatch):
    """This thread captures on the call's own stream in global mode; the call's segment table exists (an eager call
    before) but its program must be loaded again. ``relaxed``: the load is made (no stream work; predicted from Warp's
    note that a driver of CUDA 12.3 or later loads modules during a capture), the launch is captured and the replay
    writes the eager call's bits.
    ``plain``: the load in the thread's mode; xfail where it is refused (the ``CaptureError`` of before, the capture
    invalidated): the premise."""
    cupy = _cp()
    import cake_rt
    from cake_rt.launch import streams

    _, ssd = _ssd_inputs(47)
    cu = np.array([0, 77, 200], np.int32)
    s = cupy.cuda.Stream(non_blocking=True)
    y0, y = cupy.empty_like(ssd[0]), cupy.empty_like(ssd[0])
    with s:
        cake_rt.ssd_combined(*ssd, 64, cu_seqlens=cu, family="exact", out=y0, stream=s)
    s.synchronize()
    if not relaxed:
        monkeypatch.setattr(streams, "_exchange_capture_mode", False)
    held = _clear_program_caches()
    err = graph = None
    with _no_gc(), s:
        s.begin_capture(mode=cupy.cuda.runtime.streamCaptureModeGlobal)
        try:
            cake_rt.ssd_combined(*ssd, 64, cu_seqlens=cu, family="exact", out=y, stream=s)
        except Exception as exc:
            err = exc
        finally:
            try:
                graph = s.end_capture()
            except Exception as exc:
                graph = exc
    monkeypatch.undo()
    del held  # the old modules unloaded after the capture
    if not relaxed and (err is not None or isinstance(graph, Exception)):
        pytest.xfail(f"plain: the call -> {err!r}; the capture -> {graph!r}")
    assert err is None, repr(err)
    assert not isinstance(graph, Exception), repr(graph)
    graph.launch(s)
    s.synchronize()
    assert y.get().tobytes() == y0.get().tobytes()


@pytest.mark.parametrize("check", [True, False], ids=["refused", "plain"])
@pytest.mark.parametrize("what", ["input", "metadata"])
@pytest.mark.parametrize("where", ["cupy-stream", "legacy"])
def test_torch_export_to_another_stream_inside_torch_cuda_graph(where, what, check, monkeypatch):
    """Inside ``torch.cuda.graph`` (this thread), an entry given a CUDA tensor (the DSA call's inputs, or SSD's
    ``cu_seqlens``) on a stream that is not capturing: a non-blocking CuPy stream, or the legacy stream (no
    ``stream=``). ``refused``: a ``ValueError`` naming the argument, before the export, and the torch graph replays.
    ``plain``: the check removed (as on main): xfail where the capture breaks (the export's wait joins the stream to it,
    unjoined at its end; on the legacy stream the driver refuses the wait): the premise."""
    torch = pytest.importorskip("torch")
    cupy = _cp()
    import cake_rt
    from cake_rt import interop

    _, dsa = exact_inputs(60, T, T)
    _, ssd = _ssd_inputs(61)
    dsa_t = [torch.from_dlpack(a).clone() for a in dsa]
    outs = (torch.empty((T, TOPK), dtype=torch.int32, device="cuda"),
            torch.empty((T, TOPK), dtype=torch.float32, device="cuda"))
    cu_t = torch.tensor([0, 80, 200], dtype=torch.int32, device="cuda")
    y = cupy.empty_like(ssd[0])
    legacy = where == "legacy"
    s = cupy.cuda.Stream.null if legacy else cupy.cuda.Stream(non_blocking=True)
    stream = None if legacy else s
    with s:  # the plan, the stream's state and the programs, so that a joined stream would capture the launch
        cake_rt.dsa_indexer_det_topk(*dsa, TOPK, stream=stream)
        cake_rt.ssd_combined(*ssd, 64, cu_seqlens=np.array([0, 80, 200], np.int32), out=y, stream=stream)
    if not check:
        monkeypatch.setattr(interop, "refuse_export_joining_a_capture", lambda x, name: None)
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    got = {}
    with _no_gc():
        try:
            with torch.no_grad(), torch.cuda.graph(g):
                counter.add_(1)
                try:
                    with s:
                        if what == "input":
                            cake_rt.dsa_indexer_det_topk(*dsa_t, TOPK, indices=outs[0], scores=outs[1], stream=stream)
                        else:
                            cake_rt.ssd_combined(*ssd, 64, cu_seqlens=cu_t, out=y, stream=stream)
                except Exception as exc:
                    got["call"] = exc
                counter.add_(1)
        except Exception as exc:
            got["capture"] = exc
    monkeypatch.undo()
    name = "q" if what == "input" else "cu_seqlens"
    if not check and ("capture" in got or not isinstance(got.get("call"), ValueError)):
        pytest.xfail(f"plain {where} {what}: the call -> {got.get('call')!r}; the capture -> {got.get('capture')!r}")
    assert "capture" not in got, f"the torch capture broke: {got['capture']!r}"
    assert isinstance(got.get("call"), ValueError) and str(got["call"]).startswith(f"{name}:"), got
    g.replay()
    torch.cuda.synchronize()
    assert int(counter.item()) == 2


@pytest.mark.parametrize("where", ["capture-stream", "joined-side-stream"])
def test_torch_tensors_on_a_capturing_stream_are_captured(where):
    """Inside ``torch.cuda.graph`` the DSA call with CUDA tensors on torch's capture stream, or on a side stream the
    caller joined to the capture (and joins back): the export's wait is a dependency inside the graph, nothing is
    refused, nothing runs at the capture, and the replay writes the eager call's bits (after one eager call on that
    stream that built its plan and state)."""
    torch = pytest.importorskip("torch")
    import cake_rt

    _, dsa = exact_inputs(62, T, T)
    q, k, w = [torch.from_dlpack(a).clone() for a in dsa]

    def outputs():
        return (torch.full((T, TOPK), -7, dtype=torch.int32, device="cuda"),
                torch.zeros((T, TOPK), dtype=torch.float32, device="cuda"))

    cap, side = torch.cuda.Stream(), torch.cuda.Stream()
    stream = cap if where == "capture-stream" else side
    ref = outputs()
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        cake_rt.dsa_indexer_det_topk(q, k, w, TOPK, indices=ref[0], scores=ref[1], stream=stream.cuda_stream)
    torch.cuda.synchronize()
    got = outputs()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with _no_gc(), torch.no_grad(), torch.cuda.graph(g, stream=cap):
        if stream is side:
            side.wait_stream(cap)
        cake_rt.dsa_indexer_det_topk(q, k, w, TOPK, indices=got[0], scores=got[1], stream=stream.cuda_stream)
        if stream is side:
            cap.wait_stream(side)
    torch.cuda.synchronize()
    assert bool((got[0] == -7).all()), "the call ran at the capture"
    g.replay()
    torch.cuda.synchronize()
    assert got[0].cpu().numpy().tobytes() == ref[0].cpu().numpy().tobytes()
    assert got[1].cpu().numpy().tobytes() == ref[1].cpu().numpy().tobytes()


class _Interface:
    """A CUDA array interface producer (version 3, as Numba's or RMM's) over a CuPy array, naming ``stream``."""

    def __init__(self, arr, stream):
        self.arr = arr
        d = dict(arr.__cuda_array_interface__)
        d["stream"] = stream
        self.__cuda_array_interface__ = d


@pytest.mark.parametrize("check", [True, False], ids=["refused", "plain"])
def test_an_interface_naming_the_capturing_stream_is_refused_and_the_capture_survives(check, monkeypatch):
    """An SSD call captured on a CuPy stream whose ``x`` is a ``__cuda_array_interface__`` object naming that stream:
    taking it synchronizes that stream (CuPy follows the interface's version 3), which a capture forbids.
    ``refused``: a ``ValueError`` naming ``x`` before any wait, and the capture ends and replays (a counter kernel
    captured around the call). ``plain``: the check removed (as before the fix): xfail where the capture breaks (the
    premise)."""
    cupy = _cp()
    import cake_rt
    from cake_rt import interop

    _, ssd = _ssd_inputs(63)
    y = cupy.empty_like(ssd[0])
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        cake_rt.ssd_combined(*ssd, 64, out=y, stream=s)  # plan, table, program: nothing left to make under capture
    s.synchronize()
    if not check:
        monkeypatch.setattr(interop, "_refuse_interface_sync_breaking_a_capture", lambda x, name: None)
    counter = cupy.zeros(1, cupy.int32)
    with s:
        counter += 1  # the kernel compiled and loaded before the capture
    s.synchronize()
    got = {}
    graph = None
    with _no_gc(), s:
        s.begin_capture(mode=cupy.cuda.runtime.streamCaptureModeGlobal)
        try:
            counter += 1
            try:
                cake_rt.ssd_combined(_Interface(ssd[0], s.ptr), *ssd[1:], 64, out=y, stream=s)
            except Exception as exc:
                got["call"] = exc
            try:
                counter += 1  # a capture the call broke refuses this launch
            except Exception as exc:
                got["after"] = exc
        finally:
            try:
                graph = s.end_capture()
            except Exception as exc:
                got["capture"] = exc
    monkeypatch.undo()
    if not check and ("capture" in got or "after" in got or not isinstance(got.get("call"), ValueError)):
        pytest.xfail(f"plain: the call -> {got.get('call')!r}; the launch after it -> {got.get('after')!r}; "
                     f"the capture -> {got.get('capture')!r}")
    assert "capture" not in got and "after" not in got, f"the capture broke: {got!r}"
    assert isinstance(got.get("call"), ValueError) and str(got["call"]).startswith("x:"), got
    graph.launch(s)
    s.synchronize()
    assert int(counter.get()[0]) == 3  # the eager add and the replay's two
