"""Host time of one steady-state call (microseconds): SSD eager, DSA eager, DSA prepared.

The driver's launch entry points are replaced by no-ops, so what is timed is the Python path alone
(validation, planning, caches, argument packing, stream handling, event records): the quantity the
performance issues bound (SSD eager <= 25 us, DSA eager <= 30 us, DSA prepared <= 10 us). Public API only,
so the same script measures an older tree.

    python3 scripts/host_time.py [--calls N]              # on a GPU: arrays, streams, events are real
    python3 scripts/host_time.py --entry-costs --pieces   # + each CUDA entry point, launch API and SSD step alone
    python3 scripts/host_time.py --cpu [--calls N] [--profile NAME]
    python3 scripts/host_time.py [--cpu] --bench-rows     # the eager call of every bench suite row, its arguments
    python3 scripts/host_time.py --bench-rows --only ssd --entry-costs   # (GPU) the SSD rows with real launches

``--cpu`` runs on a machine without a GPU: every CUDA entry point the library calls (runtime, driver,
allocation, events, kernel loading) is replaced by a Python no-op and the arrays are CuPy headers over
addresses that are never touched. The no-ops are cheaper than the real calls, so a GPU measures more;
use it to find where the Python path spends its time (``--profile`` prints a cProfile of one call kind).
"""
import argparse
import functools
import math
import statistics
import time

import numpy as np


# ----------------------------------------------------------------------------------------------------
# CPU stand-ins for every CUDA entry point the library calls
def install_cpu_stubs():
    """Replace the CUDA runtime / driver calls, allocation, events, streams and kernel loading by no-ops.
    Returns ``(make_array, stream)``: a device-array factory and a stream object to pass as ``stream=``."""
    import types

    import cupy
    from cupy_backends.cuda.api import driver, runtime

    from cake_rt.launch import arch
    from cake_rt.launch import compile as cc

    base = [1 << 32]

    def allocate(nbytes):  # CuPy's allocator: every array CuPy makes (cupy.empty, ndarray) gets its memory here
        mem = cupy.cuda.UnownedMemory(base[0], max(nbytes, 1), None, device_id=0)
        base[0] += (nbytes + 511) // 256 * 256
        return cupy.cuda.MemoryPointer(mem, 0)

    def fake(shape, dtype=np.float32):
        dtype = np.dtype(dtype)
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        return cupy.ndarray(shape, dtype=dtype, memptr=allocate(math.prod(shape) * dtype.itemsize))

    class Event:
        ptr = 0x1000
        done = True

        def __init__(self, *a, **k):
            pass

        def record(self, stream=None):
            pass

        def synchronize(self):
            pass

    class NoOp:  # entering, leaving and synchronizing do nothing
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def synchronize(self):
            pass

    class Device(NoOp):
        def __init__(self, index=0):
            self.id = int(index)

    class Stream(NoOp, cupy.cuda.Stream):  # a foreign stream, as the library wraps one
        pass

    runtime.getDevice = lambda: 0
    runtime.streamIsCapturing = lambda handle: runtime.streamCaptureStatusNone
    runtime.eventRecord = lambda event, handle: None
    runtime.memcpyAsync = lambda *a: None
    runtime.memsetAsync = lambda *a: None
    runtime.streamWaitEvent = lambda *a: None
    driver.ctxGetCurrent = lambda: 1
    driver.streamGetCtx = lambda handle: 1
    driver.launchKernel = lambda *a: None
    driver.launchCooperativeKernel = lambda *a: None
    driver.occupancyMaxActiveBlocksPerMultiprocessor = lambda *a: 2
    driver.funcSetAttribute = lambda *a: None
    cupy.cuda.Event = Event
    cupy.cuda.Device = Device
    cupy.cuda.get_current_stream = lambda device=None: stream
    cupy.cuda.set_allocator(allocate)
    arch._read_device_info = functools.lru_cache(maxsize=None)(lambda index: arch.DeviceInfo(
        index=index, name="NVIDIA H200 (CPU stand-in)", capability=(9, 0), sm_count=132,
        smem_per_block_optin=232448, smem_per_sm=233472, regs_per_sm=65536, cooperative_launch=True,
        l2_bytes=60 << 20, target="sm_90a"))

    def get_kernel(path, kernel_name, *, defines=None, options=(), device=None):
        return cc.Kernel(function=types.SimpleNamespace(ptr=0x2000), name=kernel_name, device=0, module=None,
                         num_regs=128, shared_size_bytes=0, local_size_bytes=0, max_threads_per_block=1024,
                         max_dynamic_shared=1 << 20)

    cc.get_kernel = get_kernel
    try:  # the tensor-map encoder (sm_90a SSD programs; absent from older trees)
        from cake_rt.launch import tensormap
        tensormap._encode = lambda *a: 0
    except ImportError:
        pass
    from cake_rt.launch.streams import StreamHandle

    handle_owner = bytearray(64)  # the handle must point at readable memory (streams.check_handle)
    stream = Stream.from_external(StreamHandle(id(handle_owner)))
    stream._owner = handle_owner
    return (lambda host: fake(host.shape, host.dtype)), stream


class _Shape:  # what the CPU stand-ins' array factory reads of a host array
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)


def _gpu_zeros(shape, dtype):
    import cupy

    dtype = np.dtype(dtype)
    bf16 = dtype.itemsize == 2 and (dtype.kind == "V" or str(dtype) == "bfloat16")
    a = cupy.zeros(shape, np.uint16 if bf16 else dtype)
    return a.view(dtype) if bf16 else a


def _gpu_setup():
    import cupy

    def make(host):
        if host.dtype.itemsize == 2 and host.dtype.kind == "V" or str(host.dtype) == "bfloat16":
            return cupy.asarray(host.view(np.uint16)).view(host.dtype)
        return cupy.asarray(host)

    return make, cupy.cuda.Stream(non_blocking=True)


# ----------------------------------------------------------------------------------------------------
def calls(make, s):
    """The three timed calls, each a zero-argument function."""
    import cake_rt
    from cake_rt.interop import BF16

    rng = np.random.default_rng(0)

    # SSD: batch 1, 2048 tokens in 4 sequences, 8 heads x 64, dstate 64, chunk 64, D, z, dt_bias, final states
    L, Hh, P, N = 2048, 8, 64, 64
    x = make(rng.standard_normal((1, L, Hh, P)).astype(np.float32).astype(BF16))
    z = make(rng.standard_normal((1, L, Hh, P)).astype(np.float32).astype(BF16))
    B = make(rng.standard_normal((1, L, 1, N)).astype(np.float32).astype(BF16))
    C = make(rng.standard_normal((1, L, 1, N)).astype(np.float32).astype(BF16))
    dt = make(rng.standard_normal((1, L, Hh)).astype(np.float32))
    A = make(-rng.uniform(1, 8, Hh).astype(np.float32))
    Dv = make(rng.standard_normal(Hh).astype(np.float32))
    bias = make(rng.standard_normal(Hh).astype(np.float32))
    cu = np.array([0, 300, 1000, 1500, L], np.int32)
    y = make(np.empty(x.shape, BF16))

    def ssd():
        return cake_rt.ssd_combined(x, dt, A, B, C, 64, D=Dv, z=z, dt_bias=bias, cu_seqlens=cu, dt_softplus=True,
                                    return_final_states=True, out=y, stream=s)

    ssd.arrays, ssd.cu_seqlens = (x, dt, A, B, C, Dv, z, bias, None, y), cu  # for ssd_pieces

    # DSA: T = 1024 queries, 4096 keys in 2 segments, H = 32, D = 128, topk 16, caller outputs and workspace
    T, Tkv = 1024, 4096
    q = make(rng.integers(-3, 4, (T, 32, 128)).astype(BF16))
    k = make(rng.integers(-3, 4, (Tkv, 128)).astype(BF16))
    w = make(rng.standard_normal((T, 32)).astype(np.float32))
    meta = dict(cu_seqlens_q=np.array([0, 512, T], np.int32), cu_seqlens_k=np.array([0, 2048, Tkv], np.int32))
    need = int(cake_rt.dsa_indexer_workspace_bytes(q, k, w, 16, **meta))
    ws = make(np.empty(max(need, 1), np.uint8))
    ie, se = make(np.empty((T, 16), np.int32)), make(np.empty((T, 16), np.float32))
    ip, sp = make(np.empty((T, 16), np.int32)), make(np.empty((T, 16), np.float32))
    runner = cake_rt.prepare_dsa_indexer_det_topk(q, k, w, 16, **meta, indices=ip, scores=sp, workspace=ws)

    def dsa_eager():
        return cake_rt.dsa_indexer_det_topk(q, k, w, 16, **meta, indices=ie, scores=se, workspace=ws, stream=s)

    def dsa_prepared():
        return runner(stream=s)

    return {"ssd eager": ssd, "dsa eager": dsa_eager, "dsa prepared": dsa_prepared}


def bench_row_calls(make_empty, s):
    """The eager call of every row of the bench's SSD and DSA suites, with the bench's arguments (shapes, host metadata,
    caller outputs and workspace; values are zeros): the code path each row of the bench's host column times.
    ``make_empty(shape, dtype)`` makes a device array."""
    import json
    import os

    import cake_rt
    from cake_rt.bench.layouts import dsa_layout, ssd_segments
    from cake_rt.interop import BF16

    here = os.path.join(os.path.dirname(cake_rt.__file__), "bench", "suites")
    out = {}
    for r in json.load(open(os.path.join(here, "ssd.json")))["rows"]:
        b, L, H, P, N, G, Q = (r[k] for k in ("batch", "seqlen", "nheads", "headdim", "dstate", "ngroups", "chunk"))
        x, z, y = (make_empty((b, L, H, P), BF16) for _ in range(3))
        B, C = make_empty((b, L, G, N), BF16), make_empty((b, L, G, N), BF16)
        dt = make_empty((b, L, H), np.float32)
        A, D, bias = (make_empty((H,), np.float32) for _ in range(3))
        cu = np.concatenate([[0], np.cumsum(ssd_segments(r))]).astype(np.int32) if r.get("cu_seqlens_lengths") else None
        kw = dict(D=D, z=z, dt_bias=bias, cu_seqlens=cu, dt_softplus=True, return_final_states=True,
                  return_varlen_states=bool(r.get("return_varlen_states")), out=y, stream=s)
        out[f"ssd {r['name']}"] = functools.partial(cake_rt.ssd_combined, x, dt, A, B, C, Q, **kw)
    suite = json.load(open(os.path.join(here, "dsa.json")))
    for H in suite["defaults"]["heads"]:
        for r in suite["rows"]:
            lay = dsa_layout(r)
            q, k = make_empty((lay.T, H, 128), BF16), make_empty((lay.Tkv, 128), BF16)
            w = make_empty((lay.T, H), np.float32)
            meta = {} if r["layout"] == "tail" else dict(
                cu_seqlens_q=lay.cu_seqlens_q, cu_seqlens_k=lay.cu_seqlens_k, q_causal_offsets=lay.q_causal_offsets)
            topk = suite["defaults"]["topk"]
            need = int(cake_rt.dsa_indexer_workspace_bytes(q, k, w, topk, **meta))
            kw = dict(meta, indices=make_empty((lay.T, topk), np.int32), scores=make_empty((lay.T, topk), np.float32),
                      workspace=make_empty((max(need, 1),), np.uint8), stream=s)
            out[f"dsa {r['name']} H{H}"] = functools.partial(cake_rt.dsa_indexer_det_topk, q, k, w, topk, **kw)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--cpu", action="store_true", help="no GPU: every CUDA entry point is a Python no-op")
    ap.add_argument("--profile", help="print a cProfile of this call (steady state) instead of the table: ssd eager, "
                                      "dsa eager, dsa prepared, or with --bench-rows a row's name (ssd seed, dsa Z2cp H64)")
    ap.add_argument("--pieces", action="store_true", help="(GPU) also time each step of the SSD eager call alone")
    ap.add_argument("--bench-rows", action="store_true",
                    help="time the eager call of every bench suite row (the bench's arguments) instead of the three")
    ap.add_argument("--entry-costs", action="store_true",
                    help="(GPU) also time each CUDA entry point a steady call makes, alone, and the real launches")
    ap.add_argument("--only", help="time the calls whose name starts with this (e.g. 'ssd'): the others are not "
                                   "compiled either")
    args = ap.parse_args()
    if args.cpu:
        make, s = install_cpu_stubs()
    else:
        make, s = _gpu_setup()
    if args.bench_rows:
        fns = bench_row_calls((lambda shape, dtype: make(_Shape(shape, dtype))) if args.cpu else _gpu_zeros, s)
    else:
        fns = calls(make, s)
    if args.only:
        fns = {k: v for k, v in fns.items() if k.startswith(args.only)}
    if args.profile is not None and args.profile not in fns:  # before the warm-up, which compiles every program
        ap.error(f"--profile: {args.profile!r} is not one of: {', '.join(fns)}")
    for fn in fns.values():  # warm: compile, plan, caches (real launches on a GPU)
        fn()
    s.synchronize()

    from cupy_backends.cuda.api import driver

    real = (driver.launchKernel, driver.launchCooperativeKernel)
    driver.launchKernel = lambda *a: None
    driver.launchCooperativeKernel = lambda *a: None
    rows = []
    try:
        if args.profile:
            import cProfile
            import pstats

            fn = fns[args.profile]
            for _ in range(50):
                fn()
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(args.calls):
                fn()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(30)
            return
        for name, fn in fns.items():
            ts = []
            for _ in range(args.calls):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
            ts.sort()
            rows.append((name, 1e6 * statistics.median(ts), 1e6 * ts[int(0.9 * len(ts))]))
    finally:
        driver.launchKernel, driver.launchCooperativeKernel = real
    s.synchronize()
    mode = "CPU stand-ins for CUDA" if args.cpu else "launch stubbed"
    print(f"{'call':<16} {'median us':>10} {'p90 us':>8}   ({mode}, {args.calls} calls)")
    for name, med, p90 in rows:
        print(f"{name:<16} {med:>10.1f} {p90:>8.1f}")
    try:  # the bench records the same probe beside each row's host time (a tree before it has none)
        from cake_rt.bench.timing import host_probe_us
    except ImportError:
        pass
    else:
        print(f"{'python probe':<16} {host_probe_us(256):>10.1f}   (cake_rt.bench.timing.host_probe_us: this host's "
              f"Python speed; the bench prints it beside each row's host time)")
    if args.entry_costs and not args.cpu:
        entry_costs(fns, s)
    if args.pieces and not args.cpu and not args.bench_rows:
        ssd_pieces(fns, s)


def entry_costs(fns, s, n=200):
    """Median microseconds of each CUDA entry point a steady call makes, timed alone on stream ``s``, and the spread
    (min, p20, median, p80, max) of each whole call with real launches: 64 calls queued behind a delay kernel (none
    waits for the GPU, which idles in the delay: the bench's host column), then 64 with nothing ahead of them (the
    GPU runs the earlier calls' kernels while the later ones are issued)."""
    import cupy
    from cupy_backends.cuda.api import runtime

    from cake_rt.bench.timing import _CudaPieces

    gpu = _CudaPieces()
    ev = cupy.cuda.Event(block=False, disable_timing=True)
    h = s.ptr

    def alloc():
        with s:
            cupy.empty((4, 8, 64, 64), np.float32)

    pieces = {
        "getDevice": runtime.getDevice,
        "get_current_stream": cupy.cuda.get_current_stream,
        "streamIsCapturing": lambda: runtime.streamIsCapturing(h),
        "eventRecord": lambda: runtime.eventRecord(ev.ptr, h),
        "cupy.empty 512 KiB": alloc,
    }
    pool = cupy.get_default_memory_pool()

    def alloc_ndarray():
        with s:
            cupy.ndarray((4, 8, 64, 64), np.float32, memptr=cupy.cuda.alloc(4 * 8 * 64 * 64 * 4))

    pieces["cuda.alloc + ndarray 512 KiB"] = alloc_ndarray
    pieces["pool.malloc 512 KiB"] = lambda: pool.malloc(4 * 8 * 64 * 64 * 4)
    rows = []
    for name, fn in pieces.items():
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        rows.append((name, 1e6 * statistics.median(ts)))
    for name, fn in launch_variants(h).items():  # each launches a no-op kernel, queued behind a delay kernel
        ts = []
        for _ in range(8):
            gpu.delay(s, 10.0)
            for _ in range(16):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
            s.synchronize()
        rows.append((name, 1e6 * statistics.median(ts)))
    real = []
    for name, fn in fns.items():
        # Real launches, the stream held by a delay kernel while they queue (the GPU idle in it: the bench's steady
        # state), then with nothing ahead of them (each issued while the kernels of the calls before it run).
        for behind, what in ((20.0, "real launch"), (0.0, "real, kernels running")):
            ts = []
            for _ in range(4):
                if behind:
                    gpu.delay(s, behind)  # ms: covers 16 calls of any of them
                for _ in range(16):
                    t0 = time.perf_counter()
                    fn()
                    ts.append(time.perf_counter() - t0)
                s.synchronize()
            ts.sort()
            real.append((f"{name} ({what})", *(1e6 * ts[int(q * (len(ts) - 1))] for q in (0.0, 0.2, 0.5, 0.8, 1.0))))
    print(f"{'entry point':<30} {'median us':>10}   (alone, {n} calls)")
    for name, med in rows:
        print(f"{name:<30} {med:>10.2f}")
    print(f"{'call, 64 real launches':<44} {'min':>7} {'p20':>7} {'median':>7} {'p80':>7} {'max':>7}   us")
    for name, *qs in real:
        print(f"{name:<44} " + " ".join(f"{v:>7.1f}" for v in qs))


def ssd_pieces(fns, s, n=3000):
    """(GPU) Median microseconds of each step of a steady SSD eager call, timed alone with its own arguments
    (launch entry points stubbed), and of CuPy's allocation pieces; private names: the tree's own layout."""
    import cupy
    from cupy_backends.cuda.api import driver

    import cake_rt.ops.ssd as m
    from cake_rt.launch import streams

    def tm(fn):
        for _ in range(100):
            fn()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return 1e6 * statistics.median(ts)

    f = fns["ssd eager"]
    arrays, cu, y = f.arrays, f.cu_seqlens, f.arrays[9]

    def sig():
        return m._signature(arrays, [], 64, None, cu, True, (0.0, math.inf), True, False, False, None, "auto")

    def enter(st):
        with st:
            pass

    key = sig()
    p = m._problems[key]
    ptrs = [0 if a is None else a.data.ptr for a in arrays]
    cur = cupy.cuda.get_current_stream()
    shape, nbytes = (1, 8, 64, 64), 8 * 64 * 64 * 4
    mp = cupy.cuda.alloc(nbytes)
    steps = {
        "whole call": f,
        "  _signature": sig,
        "  _problems.get": lambda: m._problems.get(key),
        "  _check_memory": lambda: m._check_memory(p, arrays, ptrs),
        "  current_device": lambda: streams.current_device(0).__enter__(),
        "  resolve(stream)": lambda: streams.resolve(s, 0),
        "  is_capturing": lambda: streams.is_capturing(s.ptr),
        "  _plan": lambda: m._plan(p, "auto"),
        "  _launch (resolve, _plan, launch)": lambda: m._launch(p, "auto", s, y, list(ptrs)),
        "with stream (not current)": lambda: enter(s),
        "with stream (current)": lambda: enter(cur),
        "cupy.empty 512 KiB": lambda: cupy.empty(shape, np.float32),
        "cupy.cuda.alloc 512 KiB": lambda: cupy.cuda.alloc(nbytes),
        "ndarray(memptr) alone": lambda: cupy.ndarray(shape, np.float32, memptr=mp),
    }
    real = (driver.launchKernel, driver.launchCooperativeKernel)
    driver.launchKernel = driver.launchCooperativeKernel = lambda *a: None
    try:
        rows = [(name, tm(fn)) for name, fn in steps.items()]
    finally:
        driver.launchKernel, driver.launchCooperativeKernel = real
    s.synchronize()
    print(f"{'ssd eager step (launch stubbed)':<34} {'median us':>10}")
    for name, med in rows:
        print(f"{name:<34} {med:>10.2f}")


def launch_variants(h):
    """Ways to launch one no-op kernel (264 x 256 threads, the chunk-parallel SSD grid; 0 and 96 KiB of dynamic
    shared memory) on stream ``h``: CuPy's driver wrappers, and ``cuLaunchKernel`` /
    ``cuLaunchCooperativeKernel`` / ``cuLaunchKernelEx`` (with the cooperative attribute) through ctypes."""
    import ctypes

    import cupy
    from cupy_backends.cuda.api import driver

    noop = cupy.RawKernel(r'extern "C" __global__ void noop(unsigned long long p) {}', "noop")
    noop.max_dynamic_shared_size_bytes = 96 * 1024
    fn = noop.kernel.ptr
    arg = ctypes.c_uint64(0)
    params = (ctypes.c_void_p * 1)(ctypes.addressof(arg))
    addr = ctypes.addressof(params)
    cuda = ctypes.CDLL("libcuda.so.1")

    class Value(ctypes.Union):
        _fields_ = [("pad", ctypes.c_char * 64), ("cooperative", ctypes.c_int)]

    class Attribute(ctypes.Structure):
        _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", Value)]

    class Config(ctypes.Structure):
        _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("smem", ctypes.c_uint),
                    ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(Attribute)), ("nattrs", ctypes.c_uint)]

    attr = Attribute(id=2)  # CU_LAUNCH_ATTRIBUTE_COOPERATIVE
    attr.value.cooperative = 1
    out = {}
    for smem in (0, 96 * 1024):
        cfg = Config((264, 1, 1), (256, 1, 1), smem, h, ctypes.pointer(attr), 1)
        cfg_plain = Config((264, 1, 1), (256, 1, 1), smem, h, None, 0)
        ex, lk, lc = cuda.cuLaunchKernelEx, cuda.cuLaunchKernel, cuda.cuLaunchCooperativeKernel
        kb = f"{smem // 1024}K"
        out[f"launch ordinary (cupy) {kb}"] = (
            lambda smem=smem: driver.launchKernel(fn, 264, 1, 1, 256, 1, 1, smem, h, addr, 0))
        out[f"launch coop (cupy) {kb}"] = (
            lambda smem=smem: driver.launchCooperativeKernel(fn, 264, 1, 1, 256, 1, 1, smem, h, addr))
        out[f"cuLaunchKernel (ctypes) {kb}"] = (
            lambda smem=smem: lk(ctypes.c_void_p(fn), 264, 1, 1, 256, 1, 1, smem, ctypes.c_void_p(h), params, None))
        out[f"cuLaunchCoop (ctypes) {kb}"] = (
            lambda smem=smem: lc(ctypes.c_void_p(fn), 264, 1, 1, 256, 1, 1, smem, ctypes.c_void_p(h), params))
        out[f"cuLaunchKernelEx coop {kb}"] = (
            lambda cfg=cfg: ex(ctypes.byref(cfg), ctypes.c_void_p(fn), params, None))
        out[f"cuLaunchKernelEx plain {kb}"] = (
            lambda cfg=cfg_plain: ex(ctypes.byref(cfg), ctypes.c_void_p(fn), params, None))
    for name, f in out.items():  # each must succeed (CUDA_SUCCESS is 0; the CuPy wrappers raise)
        r = f()
        if r not in (None, 0):
            raise RuntimeError(f"{name}: CUresult {r}")
    return out


if __name__ == "__main__":
    main()
