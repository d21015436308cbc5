"""Timing of one synchronized call with CUDA events; cold L2 by default.

One sample:
    [flush L2: memset of 2x the L2]  [delay kernel, D us]  record start | call | record end  synchronize
The flush lies before the start event, outside the span. The delay kernel keeps the GPU busy while the
host enqueues the call, so the span between the events is the call's **GPU time** (from its first kernel
to its last, gaps between its kernels included only where the GPU really waited) and none of the host
time spent before its first launch. The host time of a call (Python, validation, launches) is measured
separately, in steady state: ``host`` in every figure summarizes the host clock around each of k calls
issued back to back (behind a delay kernel that covers them, so the host never waits for the GPU), four
batches (32-64 calls, so a burst of the host machine's own noise cannot move the median); the median is one
call's own host work. Beside it the figure records the interpreter's garbage collections during the batches
and ``probe_us``, a fixed pure-Python workload timed right after them (``host_probe_us``): the host machine's
Python speed at that moment, which the raw figure carries (the H200's host changes speed by 1.5x and more between
rows of one run; the same code path reads 18.8 and 28.1 us there).

A second view, **eager wall time** (``wall``): the stream is idle (synchronized) when the start event is
recorded, so the span holds the host work of the call as well (validation, planning, launches): what an
eager caller waits for one call.

Arms compared in one process (cake-rt and its peers, the prepared runner and the eager entry, the ticket and the
static schedule) are timed in interleaved rounds (``Timer.time_arms``), so each arm's samples span the same stretch
of the GPU's clock.

Where NVML can read it (``clocks.SmClock``: reads only), the GPU's SM clock and its clock-event reasons are read right
after each timed call and kept beside the samples (``clock_mhz``, ``clock_reasons``): the H200 steps its clock down
under a burst of long calls, and the readings say which level each sample ran at.

Warm-up calls first (module load, compile, autotune stay out of the numbers), without the delay; D is
then 1.5x the last warm-up's host time plus 50 us (at most 20 ms), so the host always finishes enqueuing
before the GPU reaches the start event. The number of timed calls adapts down for slow arms (at most
``budget_s`` per arm, never below ``min_repeats``).
"""
from __future__ import annotations

import math

import numpy as np

from .clocks import SmClock, clock_figures


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
    out["p20"], out["p80"] = min(out["p20"], out["median"]), max(out["p80"], out["median"])
    out["process_medians"] = [float(m) for m in meds]
    out["processes"] = len(meds)
    for view in ("host", "wall"):
        got = [s[view] for s in per_process if isinstance(s.get(view), dict)]
        if len(got) == len(per_process):
            out[view] = summarize([v["median"] for v in got])
    host = out.get("host")
    probes = [s["host"].get("probe_us") for s in per_process] if host is not None else []
    if probes and all(isinstance(v, (int, float)) for v in probes):
        # The host figure is a median over processes, so its speed reference is the median of theirs (report._host).
        host["probe_us"] = float(np.median(probes))
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


HOST_BATCH = 16  # calls per steady-state host-time batch (at most)
HOST_BATCH_MIN = 8  # and at least: the steady state is the calls after the first one of a batch
HOST_BATCHES = 4  # batches per figure: 32-64 calls, so a burst of the host machine's own noise cannot move the median


def host_probe_us(n: int = 64) -> float:
    """Median microseconds of a fixed pure-Python workload (a call signature of ten arrays' shapes, dtypes and
    devices, three small metadata arrays' keys, built, hashed and looked up in a dict: the kind of work an eager
    call's host path does). The host machine's Python speed at this moment, in this process: a row's host time
    divided by it is comparable between rows, processes and machines where the raw figure carries their speed."""
    import time

    arrays = [np.empty((4, 8 + i), np.float32) for i in range(10)]
    meta = [np.arange(17, dtype=np.int32) for _ in range(3)]
    memo = {}

    def work():
        sig = []
        for a in arrays:
            sig.append((a.shape, a.dtype, a.ndim))
        for v in meta:
            sig.extend((v.dtype, v.shape, v.tobytes()))
        key = tuple(sig)
        if memo.get(key) is None:
            memo[key] = len(memo)

    clock = time.perf_counter
    ts = []
    for _ in range(n):
        t0 = clock()
        for _ in range(4):
            work()
        ts.append(clock() - t0)
    return float(np.median(ts)) * 1e6


def _gc_collections() -> list:
    import gc

    return [g["collections"] for g in gc.get_stats()]


def delay_ms_for(host_ms: float) -> float:
    """The delay before the start event for a call whose host time is ``host_ms``."""
    return min(20.0, 1.5 * max(0.0, host_ms) + 0.05)


class _CudaPieces:
    """The GPU side of a Timer (events, the delay kernel): replaced by fakes in CPU tests."""

    def __init__(self):
        import cupy

        from cake_rt.launch.compile import get_kernel

        self._cupy = cupy
        self.delay_kernel = get_kernel("bench/spin.cu", "cake_bench_delay")
        try:
            bus_id = cupy.cuda.Device().pci_bus_id
        except cupy.cuda.runtime.CUDARuntimeError:  # (no device answers: the tests' CPU stand-ins)
            bus_id = None
        self.clock = SmClock.open(bus_id) if bus_id else None  # (None where NVML cannot read it)

    def event(self):
        return self._cupy.cuda.Event()

    def elapsed_ms(self, start, end) -> float:
        return float(self._cupy.cuda.get_elapsed_time(start, end))

    def delay(self, stream, ms: float) -> None:
        import numpy as np

        from cake_rt.launch.grid import launch

        launch(self.delay_kernel, 1, 32, (np.uint64(int(ms * 1e6)),), stream=stream, tag="bench-delay")


class Timer:
    """Times callables on one stream. ``fn()`` must enqueue its work on ``stream`` (or the current stream,
    which the runner sets to ``stream``)."""

    def __init__(self, stream, *, repeats: int = 20, warmup: int = 3, warm_l2: bool = False, l2_bytes: int = 0,
                 budget_s: float = 2.0, min_repeats: int = 5, pieces=None, flush=None):
        import time

        self.stream = stream
        self.repeats, self.warmup = int(repeats), int(warmup)
        self.warm_l2 = bool(warm_l2)
        self.budget_s, self.min_repeats = float(budget_s), int(min_repeats)
        self.gpu = pieces if pieces is not None else _CudaPieces()
        self.flush = None if warm_l2 else (flush if flush is not None else L2Flusher(l2_bytes))
        self._start = self.gpu.event()
        self._end = self.gpu.event()
        self._clock = time.perf_counter

    def sample(self, fn, *, delay_ms: float = 0.0, idle: bool = False):
        """(GPU ms, host ms) of one synchronized call; ``idle``: start from an idle stream (eager wall time)."""
        if self.flush is not None:
            self.flush(self.stream)
        if delay_ms > 0 and not idle:
            self.gpu.delay(self.stream, delay_ms)
        self._start.record(self.stream)
        if idle:  # the flush is done and the stream empty before the host starts the call
            self._start.synchronize()
        t0 = self._clock()
        fn()
        t1 = self._clock()
        self._end.record(self.stream)
        self._end.synchronize()
        return self.gpu.elapsed_ms(self._start, self._end), (t1 - t0) * 1e3

    def clock_reading(self):
        """(SM MHz, clock-event reasons) now, or None: the pieces' ``clock`` (clocks.SmClock), where they have one."""
        clock = getattr(self.gpu, "clock", None)
        return clock.read() if clock is not None else None

    def host_steady(self, fn, *, host_ms: float, gpu_ms: float, batches: int = HOST_BATCHES) -> dict:
        """summarize() of the host ms of each call in ``batches`` batches of k calls issued back to back (the
        steady state of a caller that launches call after call). Each batch is queued behind a delay kernel
        long enough for the k calls' host work, so no call waits for the GPU; HOST_BATCH_MIN <= k <= HOST_BATCH,
        fewer for slow calls (the batch's GPU work stays within about 15% of the arm's budget where it can).
        Each call is timed alone, so the median is a call's own host work: a pause of the interpreter (a cyclic
        garbage collection of a process that holds PyTorch and Triton costs milliseconds) lands in one sample
        and shows in ``max``, where a batch mean would spread it over every call of its batch."""
        k = max(HOST_BATCH_MIN, min(HOST_BATCH, int(0.15 * self.budget_s * 1e3 / max(gpu_ms, 1e-3) / batches)))
        per_call = []
        clock = self._clock
        gc0 = _gc_collections()
        for _ in range(batches):
            self.gpu.delay(self.stream, delay_ms_for(k * host_ms))
            for _ in range(k):
                t0 = clock()
                fn()
                per_call.append((clock() - t0) * 1e3)
            self._end.record(self.stream)
            self._end.synchronize()
        gc1 = _gc_collections()
        out = summarize(per_call)
        out["calls_per_batch"] = k
        out["gc_collections"] = [b - a for a, b in zip(gc0, gc1)]  # by generation, during the batches
        out["probe_us"] = host_probe_us()  # the host's Python speed right after the batches (host_probe_us)
        return out

    def time(self, fn, *, repeats: int | None = None, wall: bool = True) -> dict:
        """One arm: ``time_arms([("", fn)], ...)[""]``."""
        return self.time_arms([("", fn)], repeats=repeats, wall=wall)[""]

    def time_arms(self, arms, *, repeats: int | None = None, wall: bool = True) -> dict:
        """Warm up, then time arms compared in one process: {name: summarize(GPU ms) plus the raw 'samples' (in the
        order taken), 'host' (the steady host time), 'wall' (eager wall ms, ``wall`` True), 'delay_ms', and where the
        GPU's clock can be read (clocks.SmClock) 'clock_mhz' / 'clock_reasons', read right after each sample}.

        arms: [(name, fn)]. The timed calls are taken in rounds, each round one call of every arm that still has calls
        to make (its count from ``repeats_for`` on its own warm call), the arms in the given order in even rounds and
        reversed in odd ones; the eager wall samples likewise. So every arm samples the same stretch of the GPU's clock:
        over a few seconds of back-to-back multi-ms calls the H200's clock drifts down (C1 at H = 32 read 4.24 ms on
        its first calls and 4.46 ms on its last), which an arm timed after another would read alone."""
        arms = list(arms)
        warm = {}
        for name, fn in arms:
            gpu_ms = host_ms = 0.0
            for _ in range(max(1, self.warmup)):
                gpu_ms, host_ms = self.sample(fn)
            warm[name] = (gpu_ms, host_ms)
        delay = {name: delay_ms_for(h) for name, (_, h) in warm.items()}
        count = {name: repeats_for(g + delay[name], repeats or self.repeats, budget_s=self.budget_s,
                                   min_repeats=self.min_repeats) for name, (g, _) in warm.items()}

        def rounds(take):
            got = {name: [] for name, _ in arms}
            for r in range(max(count.values())):
                for name, fn in (arms if r % 2 == 0 else arms[::-1]):
                    if len(got[name]) < count[name]:
                        got[name].append(take(name, fn))
            return got

        pairs = rounds(lambda name, fn: (*self.sample(fn, delay_ms=delay[name]), self.clock_reading()))
        out = {}
        for name, fn in arms:
            g = [x for x, _, _ in pairs[name]]
            out[name] = summarize(g)
            out[name]["samples"] = g
            out[name].update(clock_figures([c for _, _, c in pairs[name]]))
            out[name]["host"] = self.host_steady(fn, host_ms=float(np.median([h for _, h, _ in pairs[name]])),
                                                 gpu_ms=out[name]["median"])
            out[name]["delay_ms"] = delay[name]
        if wall:
            walls = rounds(lambda name, fn: self.sample(fn, idle=True)[0])
            for name, _ in arms:
                out[name]["wall"] = summarize(walls[name])
        return out
