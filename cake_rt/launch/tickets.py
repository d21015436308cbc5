"""Ticket-word buffers: small uint32 words that kernels draw work from (atomicAdd) or meet at (grid
barrier), and that every completed launch leaves at zero.

Ordering rules (a word zeroed on one stream and used on another, unordered, loses or repeats work):
- ``TicketWords(...)`` allocates its words from the pool of the creating stream (given, else the current
  one) and zeroes them with a memset queued on that same stream, after any kernel still writing that pool
  block. With ``sync=True`` (the default: a prepared runner's words) it then waits for that memset, so the
  zero is ordered before any later use on any stream; with ``sync=False`` (a stream's own words) the words
  are only ever used on that stream, which orders them.
- A launch that raised leaves the words in an unknown state: ``guard`` marks them dirty and the next
  ``before_launch(stream)`` re-zeroes them on that call's own stream, ahead of its launch.
- ``stream_ticket_words(stream)`` gives the library-owned words of one stream's state
  (``streams.stream_state``): calls on one stream are ordered by the stream, calls on different streams
  never share words.
Construction is refused during CUDA graph capture (it allocates): create runners, and make one eager call
on a stream, before capturing on it.
"""
from __future__ import annotations

import contextlib
import threading

from .arch import device_index
from .streams import (CaptureError, current_device, is_capturing, pool_empty, relaxed_capture_mode, resolve,
                      stream_state)


def _handle(stream) -> int:
    import cupy

    if stream is None:
        return cupy.cuda.get_current_stream().ptr
    if isinstance(stream, int):
        return stream
    return int(stream.ptr)


class TicketWords:
    """``nwords`` uint32 words in device memory (16-byte aligned), zeroed once on the creating stream."""

    def __init__(self, nwords: int = 4, device=None, stream=None, sync: bool = True):
        import cupy
        from cupy_backends.cuda.api import runtime

        if nwords < 1:
            raise ValueError(f"nwords: expected >= 1, got {nwords}")
        self.device = device_index(device)
        self.nwords = int(nwords)
        with current_device(self.device):
            s, handle = resolve(stream, self.device)
            if is_capturing(handle):
                raise CaptureError(
                    "ticket words cannot be created during CUDA graph capture: prepare the runner (or make one "
                    "eager call on this stream) before capturing")
            # Made in relaxed capture mode, which a capture on another stream survives (``streams.pool_empty``): the
            # allocation, the zeroing and the wait for it.
            with relaxed_capture_mode():
                # Whole 16-byte blocks so each buffer starts aligned for vector access.
                self.array = pool_empty(((self.nwords + 3) // 4) * 4, cupy.uint32, s)
                runtime.memsetAsync(self.array.data.ptr, 0, self.array.nbytes, handle)
                if sync:
                    ev = cupy.cuda.Event(block=False, disable_timing=True)
                    ev.record(s)
                    ev.synchronize()
        self._dirty = False
        self._lock = threading.Lock()

    @property
    def ptr(self) -> int:
        return self.array.data.ptr

    @property
    def dirty(self) -> bool:
        """True after a launch that raised: the next ``before_launch`` re-zeroes the words."""
        return self._dirty

    def before_launch(self, stream) -> bool:
        """Re-zero the words on ``stream`` if a previous launch failed; returns whether it did. Under graph capture
        the memset is a node of the graph, run at its replays only: the words stay dirty for the next eager launch."""
        from cupy_backends.cuda.api import runtime

        if not self._dirty:
            return False
        with self._lock:
            if not self._dirty:
                return False
            handle = _handle(stream)
            runtime.memsetAsync(self.array.data.ptr, 0, self.array.nbytes, handle)
            self._dirty = is_capturing(handle)
            return True

    def mark_dirty(self) -> None:
        self._dirty = True

    @contextlib.contextmanager
    def guard(self, stream=None):
        """Wrap the launch that uses these words: re-zero first if needed; mark dirty if it raises."""
        self.before_launch(stream)
        try:
            yield self
        except BaseException:
            self._dirty = True
            raise

    def read(self):
        """Host copy of the words (synchronizes with the device; for tests and diagnostics)."""
        import cupy

        with cupy.cuda.Device(self.device):
            cupy.cuda.runtime.deviceSynchronize()
            return self.array.get()


def state_ticket_words(state, handle: int, device: int, nwords: int = 4, stream_obj=None,
                       capturing: bool = False) -> TicketWords:
    """The ticket words of one stream's state (created on first use, zeroed on that stream)."""
    words = state.tickets.get(nwords)
    if words is None:
        if capturing:
            raise CaptureError(
                "ticket words for this stream cannot be created during CUDA graph capture: make one eager call "
                "on this stream before capturing")
        words = TicketWords(nwords, device=device, stream=stream_obj if stream_obj is not None else handle,
                            sync=False)
        # Another thread's first call on this stream may have made and used its own words meanwhile (and a problem
        # holds their pointer): the first words kept win; these are freed after their zeroing, in stream order.
        words = state.tickets.setdefault(nwords, words)
    return words


def stream_ticket_words(stream=None, device=None, nwords: int = 4) -> TicketWords:
    """Library-owned ticket words for one (device, stream, size): for eager calls and grid barriers.

    The first call for a stream creates and zeroes them on that stream (so make one call before capturing
    a graph on it); later calls return the same words.
    """
    import cupy

    dev = device_index(device)
    with cupy.cuda.Device(dev):
        s, handle = resolve(stream, dev)
        capturing = is_capturing(handle)
        state = stream_state(dev, handle, capturing, s)
        return state_ticket_words(state, handle, dev, int(nwords), s, capturing)
