"""An eager call beside a CUDA graph capture on another stream, on the CPU stand-ins (``scripts/host_time.py``).

The driver refuses a "potentially unsafe" call (a ``cudaMalloc`` that grows the pool, a copy from pageable memory, a
module load, an event wait) from a thread that holds a global or thread-local capture, or from any thread while
another holds a global one (``torch.cuda.graph``'s default), and invalidates that capture. The library's own host work
of an eager call whose stream is not capturing (allocations of library memory, uploads, a program's first load,
prepare) is made in relaxed capture mode, the caller's mode restored after; the steady call exchanges nothing.

And a PyTorch tensor's DLPack export while PyTorch's current stream captures: refused, naming the argument, before the
export makes the call's stream join that capture. The GPU side: ``tests/test_capture_beside_gpu.py``.
"""
import pytest

from test_host_path_cpu import CAPTURE_MODE_STAND_IN, STUBS, run_with_cpu_stubs

pytest.importorskip("cupy")

# This thread's capture mode at each allocation, host-to-device copy, memset, event wait, module load and function
# attribute call, after the stand-ins (``modes``: the list, ``mode()``: the mode now, 0 global until exchanged).
RECORDING = STUBS + CAPTURE_MODE_STAND_IN + r'''
import types
import cupy
from cupy_backends.cuda.api import driver, runtime
import cake_rt
from cake_rt.interop import BF16
from cake_rt.launch import compile as cc
import cake_rt.ops.ssd as ssd
import cake_rt.ops.dsa as dsa

modes = []
def recording(name, fn=lambda *a, **k: None):
    def f(*a, **k):
        modes.append((name, mode()))
        return fn(*a, **k)
    return f
cupy.cuda.set_allocator(recording("malloc", cupy.cuda.get_allocator()))
runtime.memcpyAsync = recording("memcpy")
runtime.memsetAsync = recording("memset")
cupy.cuda.Event.synchronize = recording("wait")
driver.occupancyMaxActiveBlocksPerMultiprocessor = recording("occupancy", lambda *a: 2)

def library_work(fn, before, want):
    """``fn()`` makes the library host work ``want`` (names, in any order, each at least once), every piece in relaxed
    mode (2), and leaves this thread's mode as it found it (``before``)."""
    _modes.mode = before
    modes.clear()
    out = fn()
    names = {n for n, _ in modes}
    assert names >= set(want), (want, modes)
    assert all(m == 2 for _, m in modes), modes
    assert mode() == before, mode()
    return out
'''

LIBRARY_WORK_SCRIPT = RECORDING + r'''
from cake_rt.launch.streams import StreamHandle

L, H, P, N = 256, 4, 64, 64
x = make(np.empty((1, L, H, P), BF16)); B = make(np.empty((1, L, 1, N), BF16))
dt = make(np.empty((1, L, H), np.float32)); A = make(np.empty(H, np.float32)); y = make(np.empty((1, L, H, P), BF16))
T, Tkv, Hh, D, K = 64, 300, 32, 128, 16
q = make(np.empty((T, Hh, D), BF16)); k = make(np.empty((Tkv, D), BF16)); w = make(np.empty((T, Hh), np.float32))
idx = make(np.empty((T, K), np.int32)); sc = make(np.empty((T, K), np.float32))
meta = dict(cu_seqlens_q=np.array([0, 10, T], np.int32), cu_seqlens_k=np.array([0, 100, Tkv], np.int32))

dsa.external_stream = lambda h: type(s).from_external(StreamHandle(int(h)))  # a stand-in entered without a driver

owners = []  # every stand-in's owner lives to the end: a freed one's address (its handle) could come back


def new_stream():
    owner = bytearray(64)
    owners.append(owner)
    st = type(s).from_external(StreamHandle(id(owner)))
    st._owner = owner
    return st

for before in (0, 1):  # the caller's mode: global, thread-local
    st = new_stream()
    # SSD's first call of a layout on a new stream (caller's y, no states: every allocation is library memory): the
    # segment table's upload, the stream's workspace and ticket words; a growth of the workspace later.
    cu = np.array([0, 100 + before, L], np.int32)
    library_work(lambda: cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=cu, out=y, family="chunkpar", stream=st),
                 before, ("malloc", "memcpy", "memset"))
    # DSA's first call of a metadata on a new stream (caller's outputs; a key split, so a workspace): the plan's
    # upload and its program's occupancy, the stream's workspace and ticket words.
    st = new_stream()
    m = dict(meta, cu_seqlens_k=np.array([0, 100 + before, Tkv], np.int32))
    library_work(lambda: cake_rt.dsa_indexer_det_topk(q, k, w, K, **m, indices=idx, scores=sc, key_split=64,
                                                      stream=st), before, ("malloc", "memcpy", "memset", "occupancy"))
    # prepare: the plan's upload, its workspace, its ticket word and the wait for them; then a run on a further stream
    # than its first (its own ticket word and workspace).
    runner = library_work(lambda: cake_rt.prepare_dsa_indexer_det_topk(q, k, w, K, **meta, indices=idx, scores=sc,
                                                                       key_split=64, stream=st),
                          before, ("malloc", "memcpy", "memset", "wait", "occupancy"))
    runner(stream=st)  # the first stream takes prepare's ticket word and workspace
    library_work(lambda: runner(stream=new_stream()), before, ("malloc", "memset"))

# A program's first load (cuModuleLoadData) and its attribute calls, and a raise of its dynamic shared memory limit.
class Module:
    refuse = None
    def load(self, cubin):
        modes.append(("load", mode()))
        if Module.refuse is not None:
            raise runtime.CUDARuntimeError(Module.refuse)
    def get_function(self, name):
        return types.SimpleNamespace(ptr=0x3000)
cupy.cuda.function.Module = Module
cc.compile_cubin = lambda *a, **k: b"cubin"
driver.funcGetAttribute = recording("attribute", lambda *a: 0)
driver.funcSetAttribute = recording("attribute")
for before in (0, 1):
    cc._kernel_cache.clear()
    kern = library_work(lambda: cc._get_kernel_slow("ssd/ssd_combined.cu", "ssd_exact", defines={"X": before},
                                                    options=(), device=0), before, ("load", "attribute"))
    library_work(lambda: kern.set_max_dynamic_shared(100_000), before, ("attribute",))
# A load a capture still refuses in relaxed mode: the CaptureError, the caller's mode restored.
from cake_rt.launch.streams import CaptureError
Module.refuse = 901
cc._kernel_cache.clear()
_modes.mode = 0
try:
    cc._get_kernel_slow("ssd/ssd_combined.cu", "ssd_exact", defines={"X": 2}, options=(), device=0)
except CaptureError:
    pass
else:
    raise AssertionError("the refused load was not a CaptureError")
assert mode() == 0, mode()

# The steady calls exchange no mode: their plans, tables, stream state and programs exist (after one call of each).
from cake_rt.launch import streams
def steady():
    cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=cu, out=y, family="chunkpar", stream=st)
    cake_rt.dsa_indexer_det_topk(q, k, w, K, **m, indices=idx, scores=sc, key_split=64, stream=st)
    runner(stream=st)
steady()
exchanged = []
streams._exchange_capture_mode = lambda ptr: exchanged.append(ptr) or 0
steady()
steady()
assert exchanged == [], exchanged
print("ok")
'''


def test_library_host_work_is_made_in_relaxed_capture_mode():
    """Every piece of an eager call's own host work that a capture on another stream could refuse is made in relaxed
    mode and the caller's mode (global, thread-local) restored: SSD's and DSA's first call on a new stream (the table's
    or plan's upload, the stream's workspace and ticket words), prepare (also its wait), a runner's first run on a
    further stream, a program's first load and attribute calls (a load relaxed mode still refuses stays the
    ``CaptureError``, the mode restored); the steady calls exchange nothing. Fails on main (made in the caller's
    mode)."""
    run_with_cpu_stubs(LIBRARY_WORK_SCRIPT)


EXPORT_SCRIPT = STUBS + r'''
import sys, types
import cupy
from cupy_backends.cuda.api import runtime
import cake_rt
from cake_rt.interop import BF16, as_device_array

# A stand-in of PyTorch: its current stream (a handle) and whether that stream captures.
torch_state = {"capturing": False, "stream": 0x7000, "asked": 0}
def current_stream():
    torch_state["asked"] += 1
    return types.SimpleNamespace(cuda_stream=torch_state["stream"])
sys.modules["torch"] = types.SimpleNamespace(cuda=types.SimpleNamespace(
    is_current_stream_capturing=lambda: torch_state["capturing"], current_stream=current_stream))

class Tensor:
    """A CUDA tensor as PyTorch exports it: counts its exports."""
    __module__ = "torch"
    is_cuda = True
    def __init__(self, arr):
        self.arr, self.exports = arr, 0
    def __dlpack_device__(self):
        return (2, 0)
    def __dlpack__(self, stream=None, **kw):
        self.exports += 1
        return self.arr
cupy.from_dlpack = lambda x, **kw: x.__dlpack__()
capturing = set()
runtime.streamIsCapturing = lambda h: (runtime.streamCaptureStatusActive if h in capturing
                                       else runtime.streamCaptureStatusNone)

t = Tensor(make(np.empty(16, np.float32)))
# PyTorch's current stream not capturing: exported, its stream not even asked.
assert as_device_array(t, "x") is t.arr and t.exports == 1 and torch_state["asked"] == 0
# Capturing on another stream than CuPy's current one (the call's): refused, naming the argument, nothing exported.
torch_state["capturing"] = True
refused(lambda: as_device_array(t, "x"), "x: a PyTorch tensor cannot be taken on stream")
assert t.exports == 1
# The call on PyTorch's capturing stream itself (no cross-stream wait), or on a stream the caller joined to a capture:
# exported.
torch_state["stream"] = s.ptr
assert as_device_array(t, "x") is t.arr and t.exports == 2
torch_state["stream"] = 0x7000
capturing.add(s.ptr)
assert as_device_array(t, "x") is t.arr and t.exports == 3
capturing.clear()

# Through the entries: an input, and device metadata (refused before its export, not only before its copy).
L, H, P, N = 256, 4, 64, 64
x = make(np.empty((1, L, H, P), BF16)); B = make(np.empty((1, L, 1, N), BF16))
dt = make(np.empty((1, L, H), np.float32)); A = make(np.empty(H, np.float32))
tx = Tensor(x)
refused(lambda: cake_rt.ssd_combined(tx, dt, A, B, B, 64, stream=s), "x: a PyTorch tensor")
cu = Tensor(make(np.array([0, 100, L], np.int32)))
refused(lambda: cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=cu, stream=s), "cu_seqlens: a PyTorch tensor")
T, Tkv, Hh, D, K = 64, 300, 32, 128, 16
q = make(np.empty((T, Hh, D), BF16)); k = make(np.empty((Tkv, D), BF16)); w = make(np.empty((T, Hh), np.float32))
refused(lambda: cake_rt.dsa_indexer_det_topk(q, Tensor(k), w, K, stream=s), "k: a PyTorch tensor")
assert tx.exports == 0 and cu.exports == 0
# Not capturing: the same calls take them.
torch_state["capturing"] = False
cake_rt.ssd_combined(tx, dt, A, B, B, 64, stream=s)
assert tx.exports == 1
print("ok")
'''


def test_torch_export_joining_a_capture_is_refused():
    """A PyTorch tensor taken through DLPack on a stream that is not capturing while PyTorch's current stream captures
    (inside ``torch.cuda.graph``): its export would make that stream wait for the capture and join it (the capture then
    fails at its end, or on the legacy stream is invalidated at once), so ``as_device_array`` refuses it before the
    export with a ``ValueError`` naming the argument (an input or device metadata, through every entry); the call on
    PyTorch's capturing stream, or on a stream already joined to a capture, exports as before, and without a capture
    PyTorch's stream is not asked. Fails on main (no refusal: the export is made)."""
    run_with_cpu_stubs(EXPORT_SCRIPT)


INTERFACE_SCRIPT = STUBS + CAPTURE_MODE_STAND_IN + r'''
import cupy
from cupy_backends.cuda.api import runtime
import cake_rt
from cake_rt.interop import BF16, as_device_array

# cupy.asarray of an object with __cuda_array_interface__ as CuPy 14 takes it (its Cython calls reach no stand-in):
# the named stream synchronized (version 3's rule), then an array over the pointer.
syncs = []  # (stream, this thread's capture mode) of each synchronization
real_asarray = cupy.asarray
def asarray(obj, *a, **k):
    cai = getattr(obj, "__cuda_array_interface__", None)
    if isinstance(obj, cupy.ndarray) or cai is None:
        return real_asarray(obj, *a, **k)
    if cai.get("stream") is not None:
        syncs.append((cai["stream"], mode()))
    return obj.arr
cupy.asarray = asarray
capturing = set()
runtime.streamIsCapturing = lambda h: (runtime.streamCaptureStatusActive if h in capturing
                                       else runtime.streamCaptureStatusNone)

class Interface:
    """A producer of the CUDA array interface, version 3 (Numba, RMM, ...): its array and the stream it names."""
    def __init__(self, arr, stream):
        self.arr = arr
        self.__cuda_array_interface__ = {"shape": arr.shape, "typestr": arr.dtype.str, "version": 3,
                                         "data": (arr.data.ptr, False), "strides": None, "stream": stream}

t = Interface(make(np.empty(16, np.float32)), 0x7000)
# Its stream not capturing: taken, the synchronization made in relaxed capture mode (a capture on another stream
# survives it), the caller's mode (global) restored.
assert as_device_array(t, "x") is t.arr and syncs == [(0x7000, 2)] and mode() == 0
# Its stream capturing: refused, naming the argument, before any synchronization (the driver would refuse it and
# invalidate the capture); an interface without a stream is taken as before.
capturing.add(0x7000)
refused(lambda: as_device_array(t, "x"), "x: its __cuda_array_interface__ names stream 0x7000, which is capturing")
assert len(syncs) == 1
u = Interface(t.arr, None)
assert as_device_array(u, "x") is t.arr and len(syncs) == 1

# Through the entries: an input, an output and device metadata.
L, H, P, N = 256, 4, 64, 64
x = make(np.empty((1, L, H, P), BF16)); B = make(np.empty((1, L, 1, N), BF16))
dt = make(np.empty((1, L, H), np.float32)); A = make(np.empty(H, np.float32))
refused(lambda: cake_rt.ssd_combined(Interface(x, 0x7000), dt, A, B, B, 64, stream=s), "x: its __cuda_array_interface__")
refused(lambda: cake_rt.ssd_combined(x, dt, A, B, B, 64, out=Interface(make(np.empty(x.shape, BF16)), 0x7000),
                                     stream=s), "out: its __cuda_array_interface__")
T, Tkv, Hh, D, K = 64, 300, 32, 128, 16
q = make(np.empty((T, Hh, D), BF16)); k = make(np.empty((Tkv, D), BF16)); w = make(np.empty((T, Hh), np.float32))
refused(lambda: cake_rt.dsa_indexer_det_topk(q, Interface(k, 0x7000), w, K, stream=s), "k: its __cuda_array_interface__")
refused(lambda: cake_rt.dsa_indexer_det_topk(q, k, w, K, cu_seqlens_q=np.array([0, T], np.int32),
                                             cu_seqlens_k=Interface(make(np.array([0, Tkv], np.int32)), 0x7000),
                                             stream=s), "cu_seqlens_k: its __cuda_array_interface__")
assert len(syncs) == 1
print("ok")
'''


def test_an_interface_stream_that_captures_is_refused_and_others_are_synced_relaxed():
    """An object with ``__cuda_array_interface__`` (version 3) naming a stream: ``cupy.asarray`` synchronizes that
    stream. When it captures a CUDA graph the driver refuses the wait and invalidates the capture, so the intake refuses
    it first (``ValueError`` naming the argument, through every entry); otherwise the wait is made in relaxed capture
    mode, so that a capture on another stream survives it. Fails on main (no refusal: the wait is made, in the caller's
    mode)."""
    run_with_cpu_stubs(INTERFACE_SCRIPT)
