"""Launching compiled kernels: explicit grids, occupancy-capped cooperative launches, launch records.

Arguments are passed exactly as the kernel declares them: CuPy arrays (or ``None`` for a null pointer)
become pointers, NumPy scalars keep their width (``np.int32`` -> int, ``np.float32`` -> float, ...), a ctypes
array is passed by value (its bytes: a ``__grid_constant__`` struct such as a tensor map).
Python ``int``/``float`` are refused because CuPy would pass them as 64-bit values, which silently
breaks a kernel that takes ``int``/``float``.

A cooperative launch (``cuLaunchCooperativeKernel``) makes the driver guarantee that every CTA is
co-resident, which a grid barrier needs. The grid is computed by the caller from the kernel's real
occupancy (``cooperative_grid_size``); ``launch_cooperative`` refuses a grid that cannot be
co-resident instead of shrinking it (CuPy's own cooperative path silently shrinks an oversized 1-D grid,
which would turn a barrier kernel into a wrong or hanging one).
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import threading

import numpy as np

try:  # bound once: the per-call paths must not pay an import statement each
    import cupy
    from cupy_backends.cuda.api import driver, runtime
except ImportError:  # pragma: no cover - CuPy is a dependency; `cake-rt info` still imports without it
    cupy = driver = runtime = None

from .arch import device_info
from .streams import relaxed_capture_mode

_SCALAR_CTYPES = {
    np.dtype(np.int8): ctypes.c_int8,
    np.dtype(np.uint8): ctypes.c_uint8,
    np.dtype(np.int16): ctypes.c_int16,
    np.dtype(np.uint16): ctypes.c_uint16,
    np.dtype(np.int32): ctypes.c_int32,
    np.dtype(np.uint32): ctypes.c_uint32,
    np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
}


class CooperativeLaunchError(RuntimeError):
    """A cooperative launch is impossible here or the grid cannot be co-resident."""


@dataclasses.dataclass(frozen=True)
class LaunchRecord:
    """One kernel launch as the launch layer made it (tests read these)."""

    name: str
    grid: tuple
    block: tuple
    shared_mem: int
    cooperative: bool
    stream_ptr: int
    tag: str
    device: int


_local = threading.local()
# Open record_launches blocks in all threads: a launch reads its thread's stack only while one is (a missing
# attribute of a threading.local costs 0.28 us, a launch's whole Python path is ~1 us).
_recording = 0
_recording_lock = threading.Lock()


@contextlib.contextmanager
def record_launches():
    """Collect a ``LaunchRecord`` for every launch this thread makes inside the ``with`` block."""
    global _recording
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    records: list = []
    stack.append(records)
    with _recording_lock:
        _recording += 1
    try:
        yield records
    finally:
        stack.remove(records)
        with _recording_lock:
            _recording -= 1


def _dim3(v, what):
    if isinstance(v, (int, np.integer)):
        t = (int(v), 1, 1)
    else:
        t = tuple(int(x) for x in v) + (1,) * (3 - len(v))
    if len(t) != 3 or min(t) < 1:
        raise ValueError(f"{what}: expected a positive int or up to 3 positive ints, got {v!r}")
    return t


def _pack_args(args):
    holders = []
    for i, a in enumerate(args):
        if a is None:
            holders.append(ctypes.c_void_p(0))
        elif isinstance(a, cupy.ndarray):
            holders.append(ctypes.c_void_p(a.data.ptr))
        elif isinstance(a, cupy.cuda.MemoryPointer):
            holders.append(ctypes.c_void_p(a.ptr))
        elif isinstance(a, np.generic) and a.dtype in _SCALAR_CTYPES:
            holders.append(_SCALAR_CTYPES[a.dtype](a.item()))
        elif isinstance(a, ctypes.Array):  # by value: a bound __grid_constant__ struct (tensormap.bound_copy)
            holders.append(a)
        else:
            raise TypeError(
                f"kernel argument {i}: expected a CuPy array, None, a NumPy scalar of the parameter's "
                f"type (np.int32, np.float32, ...) or a ctypes array (by value), got {type(a).__name__} {a!r:.40}"
            )
    params = (ctypes.c_void_p * max(1, len(holders)))(*[ctypes.addressof(h) for h in holders])
    return params, holders


def _stream_ptr(stream):
    """The handle of ``stream``: None -> the current stream; a CuPy stream -> its handle; an int is taken as
    a handle the op already checked (``streams.resolve`` / ``interop.resolve_stream`` check user input)."""
    if stream is None:
        return cupy.cuda.get_current_stream().ptr
    if isinstance(stream, int):
        return stream
    ptr = getattr(stream, "ptr", None)
    if ptr is None:
        raise TypeError(f"stream: expected a CuPy stream, an object with .ptr, or an int handle, got {stream!r}")
    return int(ptr)


def occupancy_per_sm(kernel, block_threads: int, dyn_smem_bytes: int = 0) -> int:
    """Resident CTAs per SM for this kernel, block size and dynamic shared memory (from the driver; asked when a program
    or a plan is first used, in relaxed capture mode as the program's load, ``compile.get_kernel``)."""
    if dyn_smem_bytes > 48 * 1024:
        kernel.set_max_dynamic_shared(dyn_smem_bytes)
    with relaxed_capture_mode():
        return int(driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.function.ptr, int(block_threads),
                                                                     int(dyn_smem_bytes)))


_capacity_memo: dict = {}  # (id(kernel), block, shared memory) -> (kernel, capacity): a loaded kernel's occupancy is fixed


def cooperative_capacity(kernel, block_threads: int, dyn_smem_bytes: int = 0) -> int:
    """Largest grid a cooperative launch of this kernel can hold co-resident: occupancy x SMs (memoized
    per kernel and launch shape).

    Raises ``CooperativeLaunchError`` when the device cannot launch cooperatively or the occupancy is 0.
    """
    key = (id(kernel), int(block_threads), int(dyn_smem_bytes))
    hit = _capacity_memo.get(key)
    if hit is None or hit[0] is not kernel:  # the entry holds its kernel, so an id is never reused under it
        hit = _capacity_memo[key] = (kernel, _cooperative_capacity(kernel, block_threads, dyn_smem_bytes))
    return hit[1]


def _cooperative_capacity(kernel, block_threads: int, dyn_smem_bytes: int) -> int:
    info = device_info(kernel.device)
    if not info.cooperative_launch:
        raise CooperativeLaunchError(f"device {info.index} ({info.name}) does not support cooperative launches")
    occ = occupancy_per_sm(kernel, block_threads, dyn_smem_bytes)
    if occ < 1:
        raise CooperativeLaunchError(
            f"kernel {kernel.name} cannot be resident with {block_threads} threads and {dyn_smem_bytes} B of "
            f"dynamic shared memory (occupancy 0)"
        )
    return occ * info.sm_count


def cooperative_grid_size(kernel, work_items: int, block_threads: int, dyn_smem_bytes: int = 0) -> int:
    """Grid for a cooperative kernel: min(work_items, occupancy-per-SM x SM count), at least 1."""
    return max(1, min(int(work_items), cooperative_capacity(kernel, block_threads, dyn_smem_bytes)))


def _record(kernel, grid, block, shared_mem, cooperative, sptr, tag):
    if not _recording:
        return
    stack = getattr(_local, "stack", None)
    if stack:
        rec = LaunchRecord(kernel.name, grid, block, int(shared_mem), cooperative, sptr, tag, kernel.device)
        for records in stack:
            records.append(rec)


def _prepare(kernel, shared_mem):
    if cupy.cuda.runtime.getDevice() != kernel.device:
        raise RuntimeError(
            f"kernel {kernel.name} belongs to device {kernel.device} but device "
            f"{cupy.cuda.runtime.getDevice()} is current; launch inside `with cupy.cuda.Device({kernel.device})`"
        )
    if shared_mem > 48 * 1024:
        kernel.set_max_dynamic_shared(shared_mem)


def launch(kernel, grid, block, args, *, shared_mem: int = 0, stream=None, tag: str = "") -> None:
    """Ordinary launch of ``kernel`` with an explicit grid and block on ``stream`` (None: current)."""
    g, b = _dim3(grid, "grid"), _dim3(block, "block")
    _prepare(kernel, shared_mem)
    sptr = _stream_ptr(stream)
    params, holders = _pack_args(args)
    driver.launchKernel(kernel.function.ptr, g[0], g[1], g[2], b[0], b[1], b[2], int(shared_mem), sptr,
                        ctypes.addressof(params), 0)
    del holders
    _record(kernel, g, b, shared_mem, False, sptr, tag)


def launch_cooperative(kernel, grid, block, args, *, shared_mem: int = 0, stream=None, tag: str = "") -> None:
    """Cooperative launch: every CTA co-resident, or ``CooperativeLaunchError`` — never a shrunk grid."""
    g, b = _dim3(grid, "grid"), _dim3(block, "block")
    _prepare(kernel, shared_mem)
    capacity = cooperative_capacity(kernel, b[0] * b[1] * b[2], shared_mem)
    total = g[0] * g[1] * g[2]
    if total > capacity:
        raise CooperativeLaunchError(
            f"cooperative grid of {total} CTAs for {kernel.name} exceeds the co-resident capacity {capacity} "
            f"(occupancy x SMs); refusing rather than shrinking it"
        )
    sptr = _stream_ptr(stream)
    params, holders = _pack_args(args)
    driver.launchCooperativeKernel(kernel.function.ptr, g[0], g[1], g[2], b[0], b[1], b[2], int(shared_mem),
                                   sptr, ctypes.addressof(params))
    del holders
    _record(kernel, g, b, shared_mem, True, sptr, tag)


class Slot:
    """A placeholder in a ``PackedLaunch`` argument list: a pointer given per call (``run``)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"Slot({self.name!r})"


class Blob:
    """A placeholder in a ``PackedLaunch`` argument list: a parameter passed by value from host memory whose address is
    given per call (``run``'s ``blobs``), e.g. a ``__grid_constant__`` tensor map (``tensormap.TileMaps``). The blobs
    of a launch are its last parameters."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"Blob({self.name!r})"


class PackedLaunch:
    """One kernel launch with its grid, block, shared memory and argument buffer packed once.

    ``args`` as for ``launch``, where a ``Slot`` marks a pointer that changes per call and a ``Blob`` (the last
    arguments) a by-value parameter whose host address changes per call; ``run(handle, pointers, blobs)`` fills the
    slots and points the blobs' parameters at ``blobs`` (in order) and launches on stream ``handle`` with no other
    host work. A
    cooperative launch is checked against the co-resident capacity once, here. The caller makes the
    kernel's device current. Thread-safe: the fill and the launch happen under one lock (the driver copies
    the arguments at launch).
    """

    __slots__ = ("kernel", "grid", "block", "shared_mem", "cooperative", "tag", "_fn", "_holders", "_params",
                 "_addr", "_slots", "_nslots", "_lock", "slot_names", "_blob0", "_nblobs")

    def __init__(self, kernel, grid, block, args, *, shared_mem: int = 0, cooperative: bool = False,
                 tag: str = ""):
        g, b = _dim3(grid, "grid"), _dim3(block, "block")
        if shared_mem > 48 * 1024:
            kernel.set_max_dynamic_shared(shared_mem)
        if cooperative:
            capacity = cooperative_capacity(kernel, b[0] * b[1] * b[2], shared_mem)
            if g[0] * g[1] * g[2] > capacity:
                raise CooperativeLaunchError(
                    f"cooperative grid of {g[0] * g[1] * g[2]} CTAs for {kernel.name} exceeds the co-resident "
                    f"capacity {capacity} (occupancy x SMs); refusing rather than shrinking it")
        blobs = [i for i, a in enumerate(args) if isinstance(a, Blob)]
        if blobs and blobs != list(range(len(args) - len(blobs), len(args))):
            raise TypeError(f"{kernel.name}: the Blob arguments must be the last ones")
        self._blob0, self._nblobs = len(args) - len(blobs), len(blobs)  # the first blob's parameter, the count
        args = args[:self._blob0]
        slots = [i for i, a in enumerate(args) if isinstance(a, Slot)]
        self.slot_names = tuple(args[i].name for i in slots)
        params, holders = _pack_args([None if isinstance(a, Slot) else a for a in args] + [None] * len(blobs))
        # The slots' values live in one array (filled by one slice assignment per call); the parameter
        # pointers of the slot arguments point into it.
        self._slots = (ctypes.c_uint64 * max(1, len(slots)))()
        for j, i in enumerate(slots):
            params[i] = ctypes.addressof(self._slots) + 8 * j
        self._nslots = len(slots)
        self.kernel, self.grid, self.block = kernel, g, b
        self.shared_mem, self.cooperative, self.tag = int(shared_mem), bool(cooperative), tag
        self._fn = kernel.function.ptr
        self._holders, self._params = holders, params
        self._addr = ctypes.addressof(params)
        self._lock = threading.Lock()

    def run(self, handle: int, pointers, blobs=()) -> None:
        """Fill every slot (``pointers``: a sequence of one int per slot, in order; 0 is a null pointer), point the
        blob parameters at ``blobs`` (host addresses, one per blob, in order; the memory stays valid until this
        returns) and launch."""
        g, b = self.grid, self.block
        if len(pointers) != self._nslots or len(blobs) != self._nblobs:
            raise TypeError(f"{self.kernel.name}: expected {self._nslots} pointers ({', '.join(self.slot_names)}) "
                            f"and {self._nblobs} blobs, got {len(pointers)} and {len(blobs)}")
        lock = self._lock
        lock.acquire()  # acquire / release: 0.05 us less than a with statement
        try:
            self._slots[:self._nslots] = pointers
            if blobs:
                self._params[self._blob0:self._blob0 + self._nblobs] = blobs
            if self.cooperative:
                driver.launchCooperativeKernel(self._fn, g[0], g[1], g[2], b[0], b[1], b[2], self.shared_mem,
                                               handle, self._addr)
            else:
                driver.launchKernel(self._fn, g[0], g[1], g[2], b[0], b[1], b[2], self.shared_mem, handle,
                                    self._addr, 0)
        finally:
            lock.release()
        if _recording and getattr(_local, "stack", None):
            _record(self.kernel, g, b, self.shared_mem, self.cooperative, handle, self.tag)

    def run_bound(self, handle: int) -> None:
        """Launch on stream ``handle`` a launch packed without slots (its argument buffer never changes, so
        no lock). ``run`` with no pointers would work too; this path exists because the lock and the empty
        fill cost a prepared run ~0.5 us of its ~1.3 us of Python (CPU stand-in, scripts/host_time.py)."""
        g, b = self.grid, self.block
        if self._nslots or self._nblobs:
            raise TypeError(f"{self.kernel.name}: run_bound on a launch with slots or blobs")
        if self.cooperative:
            driver.launchCooperativeKernel(self._fn, g[0], g[1], g[2], b[0], b[1], b[2], self.shared_mem, handle,
                                           self._addr)
        else:
            driver.launchKernel(self._fn, g[0], g[1], g[2], b[0], b[1], b[2], self.shared_mem, handle, self._addr, 0)
        if _recording and getattr(_local, "stack", None):
            _record(self.kernel, g, b, self.shared_mem, self.cooperative, handle, self.tag)
