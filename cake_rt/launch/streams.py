"""Streams and the lifetime of library-owned device memory.

The rules (``docs/design.md``, "Streams, graphs and lifetimes"):

- **Stream order.** Library buffers (plan tables, segment tables, ticket words, workspaces) are allocated
  from the memory pool of the stream that uses them and written on that stream (``upload``: an
  asynchronous copy; ``zero``: an asynchronous memset), never by a synchronous copy: a pool block may still
  be written by a kernel queued earlier on that stream.
- **Lifetimes.** A ``Guarded`` object (a cached plan, a stream's state, a grown-out workspace) records an
  event on every stream that used it, after the launch; when it is evicted or replaced it goes to a
  retirement list and is freed only when those events have completed and no call is using it.
- **Graph capture.** A call captured into a CUDA graph pins the ``Guarded`` objects it touched: they are
  never freed (the graph may replay at any time). A capture that would need new library memory (a new
  plan, a new stream's state, a larger workspace) is refused with ``CaptureError``.
- **Handles.** ``resolve`` turns any stream spelling into ``(stream object, handle)``; an integer or foreign
  handle is checked with the driver (``cuStreamGetCtx``) and must belong to the current device's context.
- **Per-stream state** is keyed by ``stream_key``: the per-thread default stream (handle 2) is a different
  stream in every host thread, so its state is kept per (device, thread); the legacy default stream
  (handles 0 and 1) is one stream. At most ``MAX_STREAM_STATES`` states are kept (LRU); an evicted state is
  retired like any ``Guarded`` object.
"""
from __future__ import annotations

import collections
import contextlib
import ctypes
import itertools
import threading

import numpy as np

try:  # bound once: the per-call paths must not pay an import statement (nor the classes' lookups) each
    import cupy
    from cupy_backends.cuda.api import driver, runtime
    _Stream = cupy.cuda.Stream
    _STREAM_CLASSES = (cupy.cuda.Stream, cupy.cuda.ExternalStream)
except ImportError:  # pragma: no cover - CuPy is a dependency; `cake-rt info` still imports without it
    cupy = driver = runtime = _Stream = None
    _STREAM_CLASSES = ()

LEGACY, PER_THREAD = 1, 2
_NULL = contextlib.nullcontext()
MAX_STREAM_STATES = 64


class CaptureError(RuntimeError):
    """A call under CUDA graph capture would need library memory the graph could outlive."""


# cudaErrorStreamCapture* and cudaErrorCapturedEvent (900-908; the driver's CUDA_ERROR_* codes are the same): what an
# event query or a module load answers while a capture forbids it.
CAPTURE_ERRORS = frozenset(range(900, 909))


# ----------------------------------------------------------------------------------------------------
# stream handles
# ----------------------------------------------------------------------------------------------------

_validated: dict = {}  # (device, handle) -> context, for handles that passed the driver check
# Handles kept in per-handle bookkeeping (``_validated``, an uploaded table's ``ordered``): past this many the set starts
# over, so a process that makes a stream per request keeps a bounded number; a handle dropped is checked (or ordered
# after the upload) again on its next use.
HANDLES_KEPT = 256


def _context_of_current_device():
    return driver.ctxGetCurrent()


_mem_fd = None


def _readable(addr: int) -> bool:
    """Whether ``addr`` points at readable memory of this process (Linux: a read of ``/proc/self/mem``,
    which fails cleanly instead of faulting). A stream handle is a pointer the driver dereferences without
    checking, so an unmapped value must never reach it. True where the check is unavailable."""
    global _mem_fd
    import os

    if _mem_fd is None:
        try:
            fd = os.open("/proc/self/mem", os.O_RDONLY)
        except OSError:
            fd = -1
        probe = bytearray(16)
        if fd >= 0:  # a sandbox that refuses even a known-good address gets no check (never a false refusal)
            try:
                ok = len(os.pread(fd, 16, id(probe))) == 16
            except (OSError, OverflowError, ValueError):
                ok = False
            if not ok:
                os.close(fd)
                fd = -1
        _mem_fd = fd
    if _mem_fd < 0:
        return True
    try:
        return len(os.pread(_mem_fd, 16, addr)) == 16
    except (OSError, OverflowError, ValueError):
        return False


def check_handle(handle: int, device: int, name: str = "stream") -> int:
    """``handle`` if it is a stream of ``device``'s context (0, 1 and 2, the default streams, always are);
    ``ValueError`` naming ``name`` otherwise. Call with ``device`` current.

    The driver dereferences a handle without validating it (a garbage value crashes the process), so a
    handle must first point at readable memory of this process; then ``cuStreamGetCtx`` must name the
    device's context. A handle that passed is remembered (``forget_handle`` drops it)."""
    handle = int(handle)
    if handle in (0, LEGACY, PER_THREAD):
        return handle
    if handle < 0 or handle >= 1 << 64:
        raise ValueError(f"{name}: {handle:#x} is not a CUDA stream handle")
    ctx = _context_of_current_device()
    if _validated.get((device, handle)) == ctx:
        return handle
    if not _readable(handle):
        raise ValueError(f"{name}: {handle:#x} is not a valid CUDA stream handle (it points at no memory of this "
                         f"process)")
    try:
        sctx = driver.streamGetCtx(handle)
    except Exception as exc:
        raise ValueError(f"{name}: {handle:#x} is not a valid CUDA stream handle ({exc})") from None
    if sctx != ctx:
        raise ValueError(f"{name}: handle {handle:#x} is a stream of another device or context, not of "
                         f"device {device} (the inputs' device)")
    if len(_validated) >= HANDLES_KEPT:
        _validated.clear()
    _validated[(device, handle)] = ctx
    return handle


def forget_handle(handle: int) -> None:
    """Drop a handle from the validated set (a stream the caller destroyed)."""
    # The keys copied first (list() of a dict runs without releasing the GIL): another thread's check_handle may add
    # one while they are compared.
    for key in [k for k in list(_validated) if k[1] == int(handle)]:
        _validated.pop(key, None)


class StreamHandle:
    """A raw stream handle in the CUDA stream protocol (what ``cupy.cuda.Stream.from_external`` takes)."""
    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr

    def __cuda_stream__(self):
        return (0, self.ptr)


def external_stream(handle: int):
    """A CuPy stream object for a stream that cake-rt does not own: CuPy never destroys a stream it got
    through ``Stream.from_external``, so dropping this object leaves the caller's stream alive."""
    return cupy.cuda.Stream.from_external(StreamHandle(int(handle)))


def owns_handle(stream_obj) -> bool:
    """Whether ``stream_obj`` is a CuPy stream that owns (and destroys when collected) its handle: a
    ``cupy.cuda.Stream()`` the caller made, not a wrapper of a foreign stream (``from_external`` marks
    those with ``_foreign_stream_ref``; the deprecated ``ExternalStream`` is another class)."""
    return type(stream_obj) is _Stream and getattr(stream_obj, "_foreign_stream_ref", None) is None


def resolve(stream, device: int):
    """``(stream object, handle)`` for ``stream`` on ``device`` (call with ``device`` current).

    None: the current stream of ``device``; a CuPy stream: as is (its device must be ``device``; a wrapper
    of a foreign stream is checked like a handle); an int, or an object with ``.cuda_stream`` (PyTorch),
    ``.ptr`` or ``__cuda_stream__``: checked with the driver, then wrapped by ``external_stream``.
    """
    if stream is None:
        s = cupy.cuda.get_current_stream(device)  # by device (current): CuPy makes no device query
        return s, s.ptr
    if isinstance(stream, _STREAM_CLASSES):
        dev = getattr(stream, "device_id", -1)
        if dev not in (-1, None) and int(dev) != device:
            raise ValueError(f"stream: a stream of device {dev}, but the inputs are on device {device}")
        ptr = stream.ptr
        if not owns_handle(stream) and ptr not in (0, LEGACY, PER_THREAD):
            check_handle(ptr, device)
        return stream, ptr
    if isinstance(stream, (int, np.integer)) and not isinstance(stream, bool):
        h = check_handle(int(stream), device)
        return external_stream(h), h
    # A PyTorch stream says its device: checked first, since its default stream's handle (0) is the legacy stream of
    # whatever device is current, which the driver check below cannot tell from the inputs' device's.
    dev = getattr(stream, "device_index", None)
    if isinstance(dev, (int, np.integer)) and not isinstance(dev, bool) and int(dev) != device:
        raise ValueError(f"stream: a stream of device {int(dev)}, but the inputs are on device {device}")
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:
        handle = getattr(stream, "ptr", None)
    if handle is None and hasattr(stream, "__cuda_stream__"):
        proto = stream.__cuda_stream__()
        if isinstance(proto, tuple) and len(proto) == 2 and proto[0] == 0:
            handle = proto[1]
    if isinstance(handle, (int, np.integer)) and not isinstance(handle, bool):
        h = check_handle(int(handle), device)
        return external_stream(h), h
    raise TypeError(f"stream: expected None, a cupy.cuda.Stream, an object with .ptr, .cuda_stream or "
                    f"__cuda_stream__, or an int handle, got {type(stream).__name__}")


def current_device(dev: int):
    """A context that makes device ``dev`` current (a no-op, and no driver call, when it already is)."""
    if runtime.getDevice() == dev:
        return _NULL
    return cupy.cuda.Device(dev)


@contextlib.contextmanager
def device_and_stream(dev: int, stream):
    """Device ``dev`` and ``stream`` (a CuPy stream) current for the block, both restored after it: what an op's
    intake runs in when a copy or a DLPack export it makes must be ordered on the call's stream."""
    with current_device(dev), stream:
        yield


_thread = threading.local()
_thread_count = itertools.count(1)


def thread_token() -> int:
    """A number of the calling host thread, never given to another thread of the process: ``threading.get_ident``
    is reused by a thread started after one exits, while the exited thread's per-thread default stream may still
    have work queued (a new thread's stream must neither share its state nor skip waiting for its uploads)."""
    t = getattr(_thread, "token", None)
    if t is None:
        t = _thread.token = next(_thread_count)
    return t


def stream_key(device: int, handle: int):
    """The key of a stream's library state: the per-thread default stream is one stream per host thread."""
    if handle == PER_THREAD:
        return (device, PER_THREAD, thread_token())
    if handle == LEGACY:
        handle = 0
    return (device, handle, 0)


def is_capturing(handle: int) -> bool:
    """Whether ``handle`` is capturing a CUDA graph (legacy default stream: never, by definition)."""
    try:
        return runtime.streamIsCapturing(handle) == runtime.streamCaptureStatusActive
    except Exception:
        return False


_CAPTURE_IMPLICIT = 906  # cudaErrorStreamCaptureImplicit


def copy_breaks_capture(handle: int) -> bool:
    """Whether a device-to-host copy on ``handle`` (and the wait for it) would join a CUDA graph capture and break it:
    ``handle`` is capturing (or its capture was invalidated), or it is the legacy default stream while a blocking
    stream of the current device is capturing (the legacy stream's implicit synchronization would join that capture;
    the driver answers cudaErrorStreamCaptureImplicit for it). A capture on an unrelated stream is not seen here: the
    copy is made in relaxed capture mode (``relaxed_capture_mode``), which that capture survives."""
    try:
        return runtime.streamIsCapturing(handle) != runtime.streamCaptureStatusNone
    except runtime.CUDARuntimeError as exc:
        return exc.status == _CAPTURE_IMPLICIT
    except Exception:
        return False


_CAPTURE_MODE_RELAXED = 2  # CU_STREAM_CAPTURE_MODE_RELAXED
_exchange_capture_mode = None  # cuThreadExchangeStreamCaptureMode (ctypes), bound on first use; False: no driver


def _capture_mode_exchange():
    global _exchange_capture_mode
    if _exchange_capture_mode is None:
        from .arch import libcuda

        try:
            f = libcuda().cuThreadExchangeStreamCaptureMode
        except (OSError, AttributeError):
            f = False
        else:
            f.argtypes = [ctypes.POINTER(ctypes.c_int)]
            f.restype = ctypes.c_int
        _exchange_capture_mode = f
    return _exchange_capture_mode


@contextlib.contextmanager
def relaxed_capture_mode():
    """This thread's stream capture mode relaxed for the block, its own mode restored after: what the library's own host
    work beside a capture runs in. A capture in global mode (``torch.cuda.graph``'s default) of any thread, or one in
    thread-local mode of this thread, on another stream makes the driver refuse this thread's "potentially unsafe"
    calls and invalidate that capture; in relaxed mode the driver refuses only what conflicts with a capture. Used for
    a device-to-host copy of metadata (once ``copy_breaks_capture`` has said its stream is neither capturing nor the
    legacy stream joined to a capture), an allocation of library memory and an upload (``pool_empty``, ``upload``:
    after the caller's ``CaptureError`` for its own capturing stream), the event queries of ``collect``, a program's
    first load, attribute calls and occupancy query (``compile.get_kernel``, ``grid.occupancy_per_sm``) and prepare's
    work (``cuThreadExchangeStreamCaptureMode``; a no-op without the driver library)."""
    exchange = _capture_mode_exchange()
    if not exchange:
        yield
        return
    mode = ctypes.c_int(_CAPTURE_MODE_RELAXED)
    if exchange(ctypes.byref(mode)):  # refused (the driver not initialized): nothing exchanged, nothing to restore
        yield
        return
    try:
        yield
    finally:
        exchange(ctypes.byref(mode))


def order_after(waiter: int, handle: int, device: int) -> None:
    """Make stream ``waiter`` wait for the work queued so far on stream ``handle`` (both of ``device``, current): an event
    of this thread's recorded on ``handle``, waited for on ``waiter`` (a per-thread event: another thread's record
    between this record and this wait could be on another stream). Nothing when they are one stream, or when either
    captures a CUDA graph (or is the legacy stream joined to one): a wait across a capture's boundary would join the
    waiting stream to it or be refused. What an op does for a PyTorch caller with ``stream=None``
    (``interop.torch_stream_to_order``)."""
    if stream_key(device, waiter) == stream_key(device, handle):
        return
    if copy_breaks_capture(handle) or copy_breaks_capture(waiter):
        return
    events = getattr(_thread, "order_events", None)
    if events is None:
        events = _thread.order_events = {}
    ev = events.get(device)
    if ev is None:
        ev = events[device] = cupy.cuda.Event(block=False, disable_timing=True)
    runtime.eventRecord(ev.ptr, handle)
    runtime.streamWaitEvent(waiter, ev.ptr, 0)


# ----------------------------------------------------------------------------------------------------
# stream-ordered writes
# ----------------------------------------------------------------------------------------------------

def pool_empty(shape, dtype, stream_obj):
    """Library memory (a table, a workspace, ticket words): an uninitialized CuPy array from the pool of stream
    ``stream_obj`` (a CuPy stream), allocated in relaxed capture mode (``relaxed_capture_mode``). Growing the pool is a
    ``cudaMalloc``, which a capture on another stream (this thread's in global or thread-local mode, any thread's in
    global mode) refuses as "potentially unsafe" and is invalidated by; every caller has refused a capture on its own
    stream first (``CaptureError``), so the allocation belongs to no graph."""
    with relaxed_capture_mode(), stream_obj:
        return cupy.empty(shape, dtype=dtype)


def upload(host: np.ndarray, handle: int, stream_obj=None):
    """A device copy of ``host`` allocated from ``handle``'s pool and written by an asynchronous copy on
    that stream (pageable host memory is staged by the driver before the call returns, so ``host`` may
    change afterwards). Made in relaxed capture mode, as ``pool_empty``: a copy from pageable memory waits for the
    staging, which a capture on another stream may refuse as "potentially unsafe"."""
    host = np.ascontiguousarray(host)
    s = stream_obj if stream_obj is not None else external_stream(handle)
    with relaxed_capture_mode():
        dev = pool_empty(host.shape, host.dtype, s)
        if host.nbytes:
            runtime.memcpyAsync(dev.data.ptr, host.ctypes.data, host.nbytes, runtime.memcpyHostToDevice, handle)
    return dev


def zeros(nbytes_or_shape, dtype, handle: int, stream_obj=None):
    """A zeroed device array allocated from ``handle``'s pool (``pool_empty``) and zeroed by a memset on that stream."""
    arr = pool_empty(nbytes_or_shape, dtype, stream_obj if stream_obj is not None else external_stream(handle))
    if arr.nbytes:
        runtime.memsetAsync(arr.data.ptr, 0, arr.nbytes, handle)
    return arr


# ----------------------------------------------------------------------------------------------------
# event-guarded lifetimes
# ----------------------------------------------------------------------------------------------------

_retired: list = []
_pinned: list = []
_life_lock = threading.Lock()


class Guarded:
    """Device memory whose release waits for the stream work that reads it.

    ``begin()`` / ``end(handle, capturing)`` bracket a call that uses the object: ``end`` records an event
    on the call's stream (or, under capture, pins the object for the life of the process). ``retire()``
    hands the object to the retirement list: it is freed once every recorded event has completed and no
    call is between ``begin`` and ``end``; ``retired`` tells a holder outside the cache that evicted it (a
    memoized problem's plan) to look it up again.
    """

    __slots__ = ("_events", "_inflight", "pinned", "retired", "__weakref__")

    def __init__(self):
        self._events = {}
        self._inflight = 0
        self.pinned = False
        self.retired = False

    def begin(self) -> None:
        with _life_lock:
            self._inflight += 1

    def end(self, handle: int, capturing: bool, pin: bool = True) -> None:
        """After the launches of a call on stream ``handle``: record the release event; under capture pin
        the object instead (``pin=False``: its owner, held by the caller, keeps it alive for the graph)."""
        try:
            if capturing:
                if pin:
                    self.pin()
                return
            ev = self._events.get(handle)
            if ev is None:
                ev = self._events[handle] = cupy.cuda.Event(block=False, disable_timing=True)
            runtime.eventRecord(ev.ptr, handle)
        finally:
            _drop_inflight((self,))  # after the record, as in end_call

    def abort(self) -> None:
        """``end`` for a call that raised before launching anything."""
        with _life_lock:
            self._inflight -= 1

    def pin(self) -> None:
        if not self.pinned:
            self.pinned = True
            with _life_lock:
                _pinned.append(self)

    def idle(self) -> bool:
        """No call in flight and every recorded event complete (an event that cannot be queried, e.g. of a
        destroyed context, counts as complete: its work can no longer run). A query refused because a graph
        capture is under way (global or thread-local capture mode: PyTorch's ``torch.cuda.graph`` by default) says
        nothing about the work: not complete."""
        if self._inflight:
            return False
        for ev in list(self._events.values()):
            try:
                if not ev.done:
                    return False
            except Exception as exc:
                if getattr(exc, "status", None) in CAPTURE_ERRORS:
                    return False
        return True

    def retire(self, collect_now: bool = True) -> None:
        """Hand the object to the retirement list; ``collect_now=False`` under capture (``collect`` queries events,
        which a capture in global or thread-local mode refuses and is invalidated by)."""
        self.retired = True
        if self.pinned:
            return  # a captured graph may still replay with it: kept for the life of the process
        with _life_lock:
            _retired.append(self)
        if collect_now:
            collect()


_call_events: dict = {}  # stream_key -> the event every call on that stream records once, after its launches


def begin_call(objs) -> None:
    """``begin`` of several ``Guarded`` objects a call uses, under one lock (acquire / release: 0.05 us less than
    a with statement, as in ``PackedLaunch.run``)."""
    _life_lock.acquire()
    try:
        for o in objs:
            o._inflight += 1
    finally:
        _life_lock.release()


def end_call(objs, device: int, handle: int, capturing: bool, pin: bool = True) -> None:
    """``end`` of every object a call on stream ``handle`` used, with one event record for all of them.

    The event is the stream's (one per ``stream_key``): each object keeps the stream's event, and a later
    record of it (by any call on that stream) only moves its completion later, so an object is never judged
    idle before its own last use has run. Under capture the objects are pinned instead (``pin=False``: their
    owner, held by the caller, keeps them alive for the graph)."""
    try:
        if capturing:
            if pin:
                for o in objs:
                    o.pin()
            return
        key = (device, handle, 0) if handle > PER_THREAD else stream_key(device, handle)  # stream_key, inlined
        ev = _call_events.get(key)
        if ev is None:
            key, ev = stream_event(device, handle)
        runtime.eventRecord(ev.ptr, handle)
        for o in objs:
            evs = o._events
            if evs.get(key) is not ev:  # after the record: see drop_completed_events
                evs[key] = ev
                n = len(evs)
                if n >= EVENTS_KEPT and not n & (n - 1):
                    drop_completed_events(evs)
    finally:
        # The counts drop after the event is recorded and kept (or the objects pinned): an object is judged idle by
        # its count first, so another thread's collect never sees it idle before the event covers this call's work.
        _drop_inflight(objs)


# An object's release events (one per stream it was used on) are pruned of completed ones each time their count reaches
# a power of two from this one on: a process that makes a stream per request keeps a bounded number per object, at
# O(1) amortized queries per new stream.
EVENTS_KEPT = 4 * MAX_STREAM_STATES


def drop_completed_events(evs: dict, keep=None) -> None:
    """Drop from ``evs`` (an object's release events by stream key) the events that have completed: the work of their
    streams on the object is done. Each entry is taken out first and queried after, and put back when not complete (or
    when the query fails): a call on that stream records the event before it looks the entry up (``end_call``), so a
    record this query misses finds the entry gone and puts it back itself. ``keep(ev)``: events never dropped. In
    relaxed capture mode, as ``collect``'s queries."""
    with relaxed_capture_mode():
        for key, ev in list(evs.items()):
            if keep is not None and keep(ev):
                continue
            if evs.pop(key, None) is not ev:
                if ev is not None:
                    evs.setdefault(key, ev)  # replaced meanwhile: the newer one stays (setdefault keeps it)
                continue
            try:
                done = ev.done
            except Exception as exc:  # a destroyed context's event: its work can no longer run
                done = getattr(exc, "status", None) not in CAPTURE_ERRORS
            if not done:
                evs.setdefault(key, ev)


def _drop_inflight(objs) -> None:
    """The end of a call that used ``objs``: each one's in-flight count drops, and a retired object that is no longer
    in the retirement list (another thread retired and collected it between the call's lookup and ``begin_call``,
    while nothing was in flight) goes back in it, so it is freed only after the call's work."""
    _life_lock.acquire()
    try:
        for o in objs:
            o._inflight -= 1
            if o.retired and not o.pinned and not any(r is o for r in _retired):
                _retired.append(o)
    finally:
        _life_lock.release()


def stream_event(device: int, handle: int):
    """``(stream_key, event)``: the event every call on stream ``handle`` records after its launches."""
    key = stream_key(device, handle)
    ev = _call_events.get(key)
    if ev is None:
        if len(_call_events) >= 4 * MAX_STREAM_STATES:
            _call_events.clear()  # bounded; objects keep the events they were given
        ev = _call_events[key] = cupy.cuda.Event(block=False, disable_timing=True)
    return key, ev


def collect() -> int:
    """Free retired objects whose work has completed; returns how many are still waiting. The event queries are made in
    relaxed capture mode (``relaxed_capture_mode``): a capture on another stream, of this thread or of another in global
    mode, would refuse them and be invalidated; the one query relaxed mode still refuses, of an event recorded into a
    capture, never happens (no call records its event under capture)."""
    with _life_lock:
        waiting = list(_retired)
    if not waiting:
        return 0
    with relaxed_capture_mode():
        gone = {id(obj) for obj in waiting if obj.idle()}
        with _life_lock:
            # Asked again under the lock (as end_call drops a count): a call that took an object after the first look
            # has it in flight, or has its event recorded, by now.
            _retired[:] = [o for o in _retired if id(o) not in gone or not o.idle()]
            return len(_retired)


def retired_count() -> int:
    with _life_lock:
        return len(_retired)


def pinned_count() -> int:
    with _life_lock:
        return len(_pinned)


class UploadedTable(Guarded):
    """Host metadata (a plan or segment table) in device memory: allocated from stream ``handle``'s pool and
    written there by an asynchronous copy (``upload``); a call on another stream first waits for that copy
    (``order_after_upload``, once per stream). As a ``Guarded`` object it is freed only after the kernels
    that read it have run (or never, once a graph captured it)."""

    def __init__(self, host: np.ndarray, handle: int, stream_obj=None):
        super().__init__()
        self._host = host
        self.array = upload(host, handle, stream_obj)
        self.ptr = self.array.data.ptr
        self.ready = cupy.cuda.Event(block=False, disable_timing=True)
        runtime.eventRecord(self.ready.ptr, handle)
        # Streams already ordered after the upload. The per-thread default stream is another stream in every thread:
        # it is entered as (PER_THREAD, thread), never as its handle, so a caller's ``handle in ordered`` test always
        # sends it here.
        self.ordered = {_ordered_key(handle)}

    def order_after_upload(self, handle: int, capturing: bool) -> None:
        """Make stream ``handle`` wait for the upload (once per stream)."""
        key = _ordered_key(handle)
        if key in self.ordered:
            return
        # Under capture the wait becomes an external-event node of the graph (cudaEventWaitExternal).
        runtime.streamWaitEvent(handle, self.ready.ptr, 1 if capturing else 0)
        if not capturing:  # a graph node orders the replays, not later eager calls on the stream
            ordered = self.ordered
            if len(ordered) >= HANDLES_KEPT:
                ordered.clear()  # a stream dropped waits again: a wait for a completed upload costs the device nothing
            ordered.add(key)


def _ordered_key(handle: int):
    return (PER_THREAD, thread_token()) if handle == PER_THREAD else handle


class GuardedLRU:
    """A bounded map of ``Guarded`` values; an evicted value is retired (freed after its work)."""

    def __init__(self, size: int):
        self.size = int(size)
        self._d = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        d = self._d
        v = d.get(key)
        if v is not None:
            try:
                d.move_to_end(key)
            except KeyError:  # evicted by another thread in between: still valid until retired
                pass
        return v

    def touch(self, key) -> None:
        """Make ``key`` the most recently used (``get`` without the value: a holder of the value keeps its place;
        no-op when it is gone)."""
        try:
            self._d.move_to_end(key)
        except KeyError:
            pass

    def put(self, key, value):
        """Insert ``value`` (or return the value another thread inserted first)."""
        evicted = []
        with self._lock:
            old = self._d.get(key)
            if old is not None:
                return old
            self._d[key] = value
            while len(self._d) > self.size:
                evicted.append(self._d.popitem(last=False)[1])
        for v in evicted:
            v.retire()
        return value

    def values(self):
        return list(self._d.values())

    def __len__(self):
        return len(self._d)

    def clear(self):
        with self._lock:
            vals = list(self._d.values())
            self._d.clear()
        for v in vals:
            v.retire()


class Buffer(Guarded):
    """One guarded device array (a grown-out workspace, an uploaded table). ``after``: a ``Guarded`` whose calls
    may hold the array's address without having begun on the buffer itself (a stream's state, for the workspace it
    grew out of): the buffer is idle only once that object is idle too."""

    __slots__ = ("array", "after")

    def __init__(self, array, after=None):
        super().__init__()
        self.array = array
        self.after = after

    def idle(self) -> bool:
        return super().idle() and (self.after is None or self.after.idle())


# ----------------------------------------------------------------------------------------------------
# per-stream state: ticket words and workspaces of one (device, stream)
# ----------------------------------------------------------------------------------------------------

class StreamState(Guarded):
    """Library memory private to one stream: ticket words (by size) and grow-only workspaces (by name).

    ``workspace_version`` counts the workspaces replaced by a growth: a holder of a workspace's pointers (a
    memoized problem) uses them while the version it took them at is current and the state is not retired."""

    __slots__ = ("key", "handle", "tickets", "workspaces", "workspace_version", "watch")

    def __init__(self, key, handle):
        super().__init__()
        self.key, self.handle = key, handle
        self.watch = None
        self.tickets = {}
        self.workspaces = {}
        self.workspace_version = 0

    def pin(self) -> None:
        super().pin()


_states = GuardedLRU(MAX_STREAM_STATES)
_dead: list = []  # keys of states whose CuPy stream object was collected (appended by a weakref callback)


def _drop_dead(capturing: bool = False) -> None:
    while True:
        try:
            key = _dead.pop()
        except IndexError:  # empty, or another thread's call took the last key after this one saw it
            return
        with _states._lock:
            st = _states._d.pop(key, None)
        if st is not None:
            st.retire(collect_now=not capturing)
        forget_handle(key[1])


def stream_state(device: int, handle: int, capturing: bool = False, stream_obj=None) -> StreamState:
    """The state of (device, stream); created on first use (refused under capture: ``CaptureError``).

    When ``stream_obj`` is a CuPy stream the state is released (after its queued work) once that object is
    collected, so a later stream that reuses the handle starts with fresh state."""
    if _dead:
        _drop_dead(capturing)
    key = (device, handle, 0) if handle > PER_THREAD else stream_key(device, handle)  # stream_key, inlined
    st = _states.get(key)
    if st is None:
        if capturing:
            raise CaptureError(
                "this stream has no cake-rt state yet and none can be created during CUDA graph capture: make "
                "one eager call with the same arguments on this stream before capturing (or capture a "
                "prepared runner)")
        st = StreamState(key, handle)
        if stream_obj is not None and handle not in (0, LEGACY, PER_THREAD):
            if owns_handle(stream_obj):
                import weakref

                st.watch = weakref.ref(stream_obj, lambda _ref, key=key: _dead.append(key))
        st = _states.put(key, st)
    return st


def stream_states():
    return _states


def release_stream(stream) -> None:
    """Forget the state of ``stream`` (a handle or stream object) on every device: its memory is freed once
    its queued work has run. Call it before destroying a stream you will not use again (optional: at most
    ``MAX_STREAM_STATES`` states are kept)."""
    handle = int(getattr(stream, "ptr", stream))
    with _states._lock:
        # The keys copied first: a lookup in another thread reorders the LRU without this lock (a mutation to an
        # iterator of it), so they are compared on a copy that list() takes without releasing the GIL.
        keys = [k for k in list(_states._d) if k[1] == handle]
        vals = [_states._d.pop(k) for k in keys]
    for v in vals:
        v.retire()
    forget_handle(handle)
