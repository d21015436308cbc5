"""Per-device, per-stream, grow-only workspaces with a byte cap.

A workspace is keyed by (device, stream, name): two calls on different streams never share scratch
memory (they could run at the same time), and calls on one stream reuse it in stream order. A workspace
only grows; a request above ``cap`` raises ``WorkspaceCapExceeded`` (a ``ValueError``) so an op can fall
back to a path that needs less, or report the limit to the caller.
"""
from __future__ import annotations

import threading

from .arch import device_index


class WorkspaceCapExceeded(ValueError):
    """The requested workspace is larger than the cap in force."""


_spaces: dict = {}
_lock = threading.Lock()


def get_workspace(key: str, nbytes: int, *, cap=None, device=None, stream=None):
    """A CuPy uint8 array of at least ``nbytes`` for (device, stream, key); grows, never shrinks.

    Contents are undefined (not zeroed: a zero would cost a launch on every growth and call).
    """
    import cupy

    nbytes = int(nbytes)
    if cap is not None and nbytes > int(cap):
        raise WorkspaceCapExceeded(
            f"workspace {key!r} needs {nbytes} bytes, over the cap of {int(cap)} bytes"
        )
    dev = device_index(device)
    with cupy.cuda.Device(dev):
        if stream is None:
            stream = cupy.cuda.get_current_stream()
        elif isinstance(stream, int):
            stream = cupy.cuda.ExternalStream(stream)
        sptr = int(stream.ptr)
        k = (dev, sptr, key)
        buf = _spaces.get(k)
        if buf is not None and buf.nbytes >= nbytes:
            return buf
        with _lock:
            buf = _spaces.get(k)
            if buf is None or buf.nbytes < nbytes:
                # Grow by at least 1/4 so a slowly rising size does not reallocate every call.
                size = max(nbytes, (buf.nbytes * 5) // 4 if buf is not None else 0, 256)
                with stream:  # allocate in the order of the stream that will use it
                    buf = cupy.empty(size, dtype=cupy.uint8)
                _spaces[k] = buf
        return buf


def workspace_bytes_held(device=None) -> int:
    """Total bytes held by cake-rt workspaces on ``device`` (all streams)."""
    dev = device_index(device)
    return sum(b.nbytes for (d, _, _), b in _spaces.items() if d == dev)
