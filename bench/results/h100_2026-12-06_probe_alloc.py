"""Where the returned state array's ~3-5 us go on a real device: each way to make a (4, 8, 64, 64) fp32 array, timed
alone (median of 2000, us), with the pool warm. Also a timed ssd eager call (launch stubbed) with and without states."""
import statistics, time, sys
import cupy, numpy as np
from cupy.cuda import memory

shape, dt = (4, 8, 64, 64), np.dtype(np.float32)
n = int(np.prod(shape)) * 4
pool = cupy.get_default_memory_pool()
s = cupy.cuda.Stream(non_blocking=True)
keep = []

def tm(name, fn, k=2000):
    ts = []
    for _ in range(50):
        fn()
    for _ in range(k):
        t0 = time.perf_counter(); r = fn(); ts.append(time.perf_counter() - t0)
        keep.append(r)
        if len(keep) > 64: keep.clear()
    print(f"{name:<48} {1e6*statistics.median(ts):7.2f} us  (p10 {1e6*sorted(ts)[k//10]:.2f})", flush=True)

mp0 = pool.malloc(n)
with s:
    tm("cupy.empty", lambda: cupy.empty(shape, dt))
    tm("cupy.ndarray(shape, dt)", lambda: cupy.ndarray(shape, dt))
    tm("pool.malloc", lambda: pool.malloc(n))
    tm("cupy.cuda.alloc", lambda: cupy.cuda.alloc(n))
    tm("ndarray(memptr=existing)", lambda: cupy.ndarray(shape, dt, memptr=mp0))
    tm("ndarray(memptr=pool.malloc)", lambda: cupy.ndarray(shape, dt, memptr=pool.malloc(n)))
    tm("MemoryPointer(mp0.mem, 0)", lambda: memory.MemoryPointer(mp0.mem, 0))
    tm("ndarray(memptr=MemoryPointer(mp0.mem,0))", lambda: cupy.ndarray(shape, dt, memptr=memory.MemoryPointer(mp0.mem, 0)))
    big = pool.malloc(64 * n)
    tm("ndarray(memptr=big + off)", lambda: cupy.ndarray(shape, dt, memptr=big + n))
    tm("runtime.getDevice", lambda: cupy.cuda.runtime.getDevice())
    tm("get_current_stream", lambda: cupy.cuda.get_current_stream())
    tm("Device()", lambda: cupy.cuda.Device())
s2 = cupy.cuda.Stream(non_blocking=True)
tm("cupy.empty (default stream)", lambda: cupy.empty(shape, dt))
with s2:
    tm("cupy.empty (stream 2)", lambda: cupy.empty(shape, dt))
print("pool used / total MiB", pool.used_bytes() / 2**20, pool.total_bytes() / 2**20)
