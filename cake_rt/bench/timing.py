"""Timing of one synchronized call with CUDA events; cold L2 by default.

One sample:   [flush L2]  synchronize  | record start, call, record end |  synchronize, elapsed
The flush (a memset of 2x the L2 size on the timing stream) and the synchronize after it lie outside
the span between the events, so the span holds the call's launch path and its GPU time, not the flush.
Warm-up calls first (module load, compile, autotune stay out of the numbers); the number of timed
calls adapts down for slow arms (at most ``budget_s`` per arm, never below ``min_repeats``).
"""
from __future__ import annotations

import math

import numpy as np


def summarize(samples_ms) -> dict:
    """{'median', 'p20', 'p80', 'min', 'max', 'n'} of a list of milliseconds (linear-interpolated percentiles)."""
    a = np.asarray(list(samples_ms), dtype=np.float64)
    if a.size == 0 or not np.all(np.isfinite(a)):
        raise ValueError(f"samples_ms: expected a non-empty list of finite times, got {list(a)}")
    p20, p50, p80 = np.percentile(a, [20, 50, 80])
    return {"median": float(p50), "p20": float(p20), "p80": float(p80), "min": float(a.min()),
            "max": float(a.max()), "n": int(a.size)}


def combine_processes(per_process: list) -> dict:
    """Summary over fresh processes: the median of the per-process medians, p20/p80 over all samples."""
    meds = [s["median"] for s in per_process]
    pooled = [x for s in per_process for x in s.get("samples", [])]
    out = summarize(pooled) if pooled else summarize(meds)
    out["median"] = float(np.median(meds))
    out["process_medians"] = [float(m) for m in meds]
    out["processes"] = len(meds)
    return out


def repeats_for(first_ms: float, repeats: int, *, budget_s: float, min_repeats: int) -> int:
    """Timed calls for an arm whose warm call took ``first_ms``: ``repeats`` unless that exceeds
    ``budget_s`` seconds, never fewer than ``min_repeats``."""
    if first_ms <= 0 or not math.isfinite(first_ms):
        return repeats
    fit = int(budget_s * 1e3 / first_ms)
    return max(min(repeats, min_repeats), min(repeats, fit))


class L2Flusher:
    """Writes a buffer of 2x the L2 size on a stream, evicting every input and output of the last call."""

    def __init__(self, l2_bytes: int, device=None):
        import cupy

        self.nbytes = max(2 * int(l2_bytes), 8 << 20)
        self.buf = cupy.empty(self.nbytes, dtype=cupy.uint8)
        self._value = 0

    def __call__(self, stream) -> None:
        import cupy

        self._value ^= 0x5A  # a different byte each time, so no write can be skipped
        cupy.cuda.runtime.memsetAsync(self.buf.data.ptr, self._value, self.nbytes, stream.ptr)


class Timer:
    """Times callables on one stream. ``fn()`` must enqueue its work on ``stream`` (or the current stream,
    which the runner sets to ``stream``)."""

    def __init__(self, stream, *, repeats: int = 20, warmup: int = 3, warm_l2: bool = False, l2_bytes: int = 0,
                 budget_s: float = 2.0, min_repeats: int = 5):
        import cupy

        self.stream = stream
        self.repeats, self.warmup = int(repeats), int(warmup)
        self.warm_l2 = bool(warm_l2)
        self.budget_s, self.min_repeats = float(budget_s), int(min_repeats)
        self.flush = None if warm_l2 else L2Flusher(l2_bytes)
        self._start = cupy.cuda.Event()
        self._end = cupy.cuda.Event()

    def sample(self, fn) -> float:
        """Milliseconds of one synchronized call."""
        import cupy

        if self.flush is not None:
            self.flush(self.stream)
        self.stream.synchronize()
        self._start.record(self.stream)
        fn()
        self._end.record(self.stream)
        self._end.synchronize()
        return float(cupy.cuda.get_elapsed_time(self._start, self._end))

    def time(self, fn, *, repeats: int | None = None) -> dict:
        """Warm up, then time; returns summarize(...) plus the raw 'samples'."""
        first = None
        for _ in range(max(1, self.warmup)):
            first = self.sample(fn)
        n = repeats_for(first, repeats or self.repeats, budget_s=self.budget_s, min_repeats=self.min_repeats)
        samples = [self.sample(fn) for _ in range(n)]
        out = summarize(samples)
        out["samples"] = samples
        return out
