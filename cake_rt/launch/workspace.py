"""Per-stream, grow-only workspaces with a byte cap.

A workspace belongs to one stream's state (``streams.stream_state``): two calls on different streams never
share scratch memory (they could run at the same time), and calls on one stream reuse it in stream order.
It is allocated from that stream's pool. A workspace only grows; the buffer it grows out of is retired
with an event recorded on the stream and freed only after the kernels queued with it have run and, when a call on
the stream's state was in flight at the growth (a call of another thread on the same stream may hold its address),
once that state is idle. Under
CUDA graph capture a workspace that is large enough is used (and the stream's state is pinned by the
caller's ``end``); one that would have to grow is refused with ``CaptureError``. A request above ``cap``
raises ``WorkspaceCapExceeded`` (a ``ValueError``) so an op can fall back to a path that needs less, or
report the limit to the caller.
"""
from __future__ import annotations

import threading

from .arch import device_index
from .streams import Buffer, CaptureError, external_stream, is_capturing, pool_empty, resolve, stream_state


_grow_lock = threading.Lock()


class WorkspaceCapExceeded(ValueError):
    """The requested workspace is larger than the cap in force."""


def state_workspace(state, key: str, nbytes: int, *, cap=None, handle: int, stream_obj=None,
                    capturing: bool = False, in_call: bool = False):
    """A CuPy uint8 array of at least ``nbytes`` from ``state`` (one stream's state); grows, never shrinks.
    ``in_call``: the caller is a call in flight on ``state`` (begun on it) that takes this workspace once.

    Contents are undefined (not zeroed: a zero would cost a launch on every growth and call).
    """
    import cupy

    nbytes = int(nbytes)
    if cap is not None and nbytes > int(cap):
        raise WorkspaceCapExceeded(f"workspace {key!r} needs {nbytes} bytes, over the cap of {int(cap)} bytes")
    buf = state.workspaces.get(key)
    if buf is not None and buf.nbytes >= nbytes:
        return buf
    if capturing:
        raise CaptureError(
            f"workspace {key!r}: this call needs {nbytes} bytes of library workspace on this stream, more than "
            f"it holds ({0 if buf is None else buf.nbytes}); it cannot grow during CUDA graph capture (the graph "
            f"would keep a pointer to memory that a later growth frees). Make one eager call of this size on "
            f"this stream before capturing, or pass a caller-owned workspace where the op takes one")
    # Grow by at least 1/4 so a slowly rising size does not reallocate every call.
    size = max(nbytes, (buf.nbytes * 5) // 4 if buf is not None else 0, 256)
    # From the pool of the stream that will use it (stream order), in relaxed capture mode (``pool_empty``).
    new = pool_empty(size, cupy.uint8, stream_obj if stream_obj is not None else external_stream(handle))
    with _grow_lock:
        # The buffer replaced is the one current now: another thread may have grown this workspace since the look
        # above, and a call may hold the address of what it made (replaced unguarded, it would be freed under it).
        buf = state.workspaces.get(key)
        if buf is not None and buf.nbytes >= nbytes:
            return buf  # ``new`` was seen by no one
        state.workspaces[key] = new
        state.workspace_version += 1  # before the buffer's retirement looks at the calls in flight (below)
    if buf is not None:
        # The old buffer is freed after the work queued on this stream before now (its event) and, when a call on
        # this stream's state is in flight now, once the state is idle: another thread's call may have taken its
        # address before this growth and launch after it. A call takes a workspace's address only after its begin
        # on the state (or checks the state's version after it), so it is either in flight here or sees the new
        # version. Without one in flight (the caller's own call aside: it takes the new buffer) the state is not
        # waited for: the stream's later calls (a serving loop that keeps it busy) would keep the buffer.
        old = Buffer(buf, after=state if state._inflight > in_call else None)
        if state.pinned:
            old.pin()  # a captured graph may point at it
        else:
            old.begin()
            old.end(handle, False)
            old.retire()
    return new


def get_workspace(key: str, nbytes: int, *, cap=None, device=None, stream=None):
    """A CuPy uint8 array of at least ``nbytes`` for (device, stream, key); grows, never shrinks."""
    import cupy

    dev = device_index(device)
    with cupy.cuda.Device(dev):
        s, handle = resolve(stream, dev)
        capturing = is_capturing(handle)
        state = stream_state(dev, handle, capturing, s)
        return state_workspace(state, key, nbytes, cap=cap, handle=handle, stream_obj=s, capturing=capturing)

