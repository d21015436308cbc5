"""Ticket-word buffers: small uint32 words that kernels draw work from (atomicAdd) or meet at (grid
barrier), and that every completed launch leaves at zero.

Ordering rules (the upstream review found a word zeroed on one stream and used on another, unordered):
- ``TicketWords(...)`` zeroes its words with a host-synchronous zero at construction: the zero is
  complete before the constructor returns, so it is ordered before any later use on any stream.
- A launch that raised leaves the words in an unknown state: ``guard`` marks them dirty and the next
  ``before_launch(stream)`` re-zeroes them on that call's own stream, ahead of its launch.
- ``stream_ticket_words(stream)`` gives the library-owned words of one (device, stream): calls on one
  stream are ordered by the stream, calls on different streams never share words.
Construction is refused during CUDA graph capture (the synchronous zero cannot be captured); create
runners before capturing.
"""
from __future__ import annotations

import contextlib
import threading

from .arch import device_index


def _is_capturing(stream_obj) -> bool:
    try:
        return bool(stream_obj.is_capturing())
    except Exception:
        return False


class TicketWords:
    """``nwords`` uint32 words in device memory (16-byte aligned), zeroed once, host-synchronously."""

    def __init__(self, nwords: int = 4, device=None):
        import cupy

        if nwords < 1:
            raise ValueError(f"nwords: expected >= 1, got {nwords}")
        self.device = device_index(device)
        self.nwords = int(nwords)
        with cupy.cuda.Device(self.device):
            current = cupy.cuda.get_current_stream()
            if _is_capturing(current):
                raise RuntimeError(
                    "ticket words cannot be created during CUDA graph capture: prepare the runner (or make one "
                    "eager call on this stream) before capturing"
                )
            # Round up to whole 16-byte blocks so each buffer starts aligned for vector access.
            self.array = cupy.empty(((self.nwords + 3) // 4) * 4, dtype=cupy.uint32)
            zero_stream = cupy.cuda.Stream(non_blocking=True)
            cupy.cuda.runtime.memsetAsync(self.array.data.ptr, 0, self.array.nbytes, zero_stream.ptr)
            zero_stream.synchronize()
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
        """Re-zero the words on ``stream`` if a previous launch failed; returns whether it did."""
        import cupy

        if not self._dirty:
            return False
        with self._lock:
            if not self._dirty:
                return False
            sptr = stream if isinstance(stream, int) else (stream.ptr if stream is not None
                                                            else cupy.cuda.get_current_stream().ptr)
            cupy.cuda.runtime.memsetAsync(self.array.data.ptr, 0, self.array.nbytes, sptr)
            self._dirty = False
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


_per_stream: dict = {}
_per_stream_lock = threading.Lock()


def stream_ticket_words(stream=None, device=None, nwords: int = 4) -> TicketWords:
    """Library-owned ticket words for one (device, stream, size): for eager calls and grid barriers.

    The first call for a stream creates and zeroes them (so make one call before capturing a graph on
    that stream); later calls return the same words.
    """
    import cupy

    dev = device_index(device)
    if stream is None:
        with cupy.cuda.Device(dev):
            sptr = cupy.cuda.get_current_stream().ptr
    else:
        sptr = stream if isinstance(stream, int) else int(stream.ptr)
    key = (dev, sptr, int(nwords))
    words = _per_stream.get(key)
    if words is None:
        with _per_stream_lock:
            words = _per_stream.get(key)
            if words is None:
                words = _per_stream[key] = TicketWords(nwords, device=dev)
    return words
