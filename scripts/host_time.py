"""Host time of one steady-state call (microseconds): SSD eager, DSA eager, DSA prepared.

The driver's launch entry points are replaced by no-ops, so what is timed is the Python path alone
(validation, planning, caches, argument packing, stream handling, event records): the quantity the
performance issues bound (SSD eager <= 25 us, DSA eager <= 30 us, DSA prepared <= 10 us). Public API only,
so the same script measures an older tree.

    python3 scripts/host_time.py [--calls N]              # on a GPU: arrays, streams, events are real
    python3 scripts/host_time.py --cpu [--calls N] [--profile NAME]

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

    def fake(shape, dtype=np.float32):
        dtype = np.dtype(dtype)
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        nbytes = math.prod(shape) * dtype.itemsize
        mem = cupy.cuda.UnownedMemory(base[0], max(nbytes, 1), None, device_id=0)
        base[0] += (nbytes + 511) // 256 * 256
        return cupy.ndarray(shape, dtype=dtype, memptr=cupy.cuda.MemoryPointer(mem, 0))

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
    cupy.empty = fake
    arch._read_device_info = functools.lru_cache(maxsize=None)(lambda index: arch.DeviceInfo(
        index=index, name="NVIDIA H200 (CPU stand-in)", capability=(9, 0), sm_count=132,
        smem_per_block_optin=232448, smem_per_sm=233472, regs_per_sm=65536, cooperative_launch=True,
        l2_bytes=60 << 20, target="sm_90a"))

    def get_kernel(path, kernel_name, *, defines=None, options=(), device=None):
        return cc.Kernel(function=types.SimpleNamespace(ptr=0x2000), name=kernel_name, device=0, module=None,
                         num_regs=128, shared_size_bytes=0, local_size_bytes=0, max_threads_per_block=1024,
                         max_dynamic_shared=1 << 20)

    cc.get_kernel = get_kernel
    from cake_rt.launch.streams import StreamHandle

    handle_owner = bytearray(64)  # the handle must point at readable memory (streams.check_handle)
    stream = Stream.from_external(StreamHandle(id(handle_owner)))
    stream._owner = handle_owner
    return (lambda host: fake(host.shape, host.dtype)), stream


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--cpu", action="store_true", help="no GPU: every CUDA entry point is a Python no-op")
    ap.add_argument("--profile", choices=("ssd eager", "dsa eager", "dsa prepared"),
                    help="print a cProfile of this call kind (steady state) instead of the table")
    ap.add_argument("--entry-costs", action="store_true",
                    help="(GPU) also time each CUDA entry point a steady call makes, alone, and the real launches")
    args = ap.parse_args()
    if args.cpu:
        make, s = install_cpu_stubs()
    else:
        make, s = _gpu_setup()
    fns = calls(make, s)
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
    print(f"{'call':<14} {'median us':>10} {'p90 us':>8}   ({mode}, {args.calls} calls)")
    for name, med, p90 in rows:
        print(f"{name:<14} {med:>10.1f} {p90:>8.1f}")
    if args.entry_costs and not args.cpu:
        entry_costs(fns, s)


def entry_costs(fns, s, n=200):
    """Median microseconds of each CUDA entry point a steady call makes, timed alone on stream ``s``, and of
    each whole call with real launches (``n`` calls queued behind a delay kernel, so none waits for the GPU)."""
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
    rows = []
    for name, fn in pieces.items():
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        rows.append((name, 1e6 * statistics.median(ts)))
    for name, fn in fns.items():  # real launches: the stream is held by a delay kernel while they queue
        ts = []
        for _ in range(4):
            gpu.delay(s, 20.0)  # ms: covers 16 calls of any of the three
            for _ in range(16):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
            s.synchronize()
        rows.append((name + " (real launch)", 1e6 * statistics.median(ts)))
    print(f"{'entry point':<30} {'median us':>10}   (alone, {n} calls)")
    for name, med in rows:
        print(f"{name:<30} {med:>10.2f}")


if __name__ == "__main__":
    main()
