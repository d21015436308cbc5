"""A call with ``stream=None`` and PyTorch tensors, made while PyTorch's current stream is not CuPy's (CPU stand-ins).

``stream=None`` runs on CuPy's current stream (docs/index.md). A PyTorch caller on a stream of its own
(``with torch.cuda.stream(s):``, PyTorch streams are non-blocking) gets its inputs ordered before the kernel by the
DLPack export, but nothing orders its next op after the kernel: it could read a caller-owned output (``out=``,
``indices=``/``scores=``) before the kernel wrote it, or overwrite (or free, to its caching allocator) an input the
kernel still reads. So after the launches PyTorch's current stream of the inputs' device waits for the call's stream
(an event recorded there, after the kernel). Not with an explicit ``stream=`` (the caller chose that stream, maybe to
overlap), nor when the two are one stream, nor when either is capturing a CUDA graph (the wait would join a capture).
The GPU side: ``tests/test_dlpack_stream_gpu.py::test_torch_caller_on_its_own_stream_*``.
"""
import pytest

from test_host_path_cpu import TRACKED_STREAM, run_with_cpu_stubs

pytest.importorskip("cupy")

SCRIPT = TRACKED_STREAM + r'''
import sys, types
from cupy_backends.cuda.api import driver, runtime

log = []  # ("launch",), ("record", event, stream), ("wait", waiting stream, event)
runtime.eventRecord = lambda ev, handle: log.append(("record", ev, handle))
runtime.streamWaitEvent = lambda waiter, ev, flags=0: log.append(("wait", waiter, ev))
driver.launchKernel = lambda *a: log.append(("launch",))
driver.launchCooperativeKernel = lambda *a: log.append(("launch",))
capturing = set()
runtime.streamIsCapturing = lambda h: (runtime.streamCaptureStatusActive if h in capturing
                                       else runtime.streamCaptureStatusNone)

torch_owner = bytearray(64)
TORCH = id(torch_owner)  # PyTorch's current stream (a pool stream of its own): not CuPy's current one
torch_stream = [TORCH]

class Tensor:
    """A PyTorch CUDA tensor stand-in: DLPack on device type 2 (its export returns a CuPy stand-in array)."""
    __module__ = "torch"
    requires_grad = False
    is_cuda = True
    def __init__(self, host):
        self.inner = make(host)
    def __dlpack_device__(self):
        return (2, 0)
    def __dlpack__(self, stream=None, **kw):
        return self.inner

torch = types.ModuleType("torch")
torch.Tensor = Tensor
torch.cuda = types.SimpleNamespace(current_stream=lambda device=None: types.SimpleNamespace(cuda_stream=torch_stream[0]),
                                   is_current_stream_capturing=lambda: False)
sys.modules["torch"] = torch
cupy.from_dlpack = lambda x, **kw: x.__dlpack__(stream=s.ptr)

def waits_after_launch(what, waiter, call_stream):
    """The last launch is followed by a record on the call's stream and PyTorch's stream waiting for that event."""
    last = max(i for i, e in enumerate(log) if e[0] == "launch")
    waits = [e for e in log[last:] if e[0] == "wait"]
    assert len(waits) == 1 and waits[0][1] == waiter, (what, log)
    ev = waits[0][2]
    recs = [i for i, e in enumerate(log) if e[0] == "record" and e[1] == ev]
    assert recs and recs[-1] > last and log[recs[-1]][2] == call_stream, (what, log)
    log.clear()

def no_wait(what):
    """No wait after the launch (a wait before it orders the call after an upload made on another stream)."""
    last = max(i for i, e in enumerate(log) if e[0] == "launch")
    assert not [e for e in log[last:] if e[0] == "wait"], (what, log)
    log.clear()

L, H, P, N = 256, 4, 64, 64
t = lambda shape, dt: Tensor(np.empty(shape, dt))
x = t((1, L, H, P), BF16); B = t((1, L, 1, N), BF16); C = t((1, L, 1, N), BF16)
dt_ = t((1, L, H), np.float32); A = t((H,), np.float32); y = t((1, L, H, P), BF16)
for fam in ("exact", "chunkpar"):
    for out in (y, None):
        cake_rt.ssd_combined(x, dt_, A, B, C, 64, family=fam, out=out)
        waits_after_launch(f"ssd {fam} out={out is not None}", TORCH, s.ptr)
# A CuPy x, the other arrays PyTorch tensors: still PyTorch's arrays to order.
cake_rt.ssd_combined(make(np.empty((1, L, H, P), BF16)), dt_, A, B, C, 64, out=y)
waits_after_launch("ssd, x a CuPy array", TORCH, s.ptr)

T, Tkv, Hh, D, K = 64, 300, 32, 128, 16
q = t((T, Hh, D), BF16); k = t((Tkv, D), BF16); w = t((T, Hh), np.float32)
idx = t((T, K), np.int32); sc = t((T, K), np.float32)
for outs in ((idx, sc), (None, None)):
    cake_rt.dsa_indexer_det_topk(q, k, w, K, indices=outs[0], scores=outs[1])
    waits_after_launch(f"dsa outputs given={outs[0] is not None}", TORCH, s.ptr)

# An explicit stream: the caller's choice, no wait added (nor for PyTorch's own stream passed explicitly).
cake_rt.ssd_combined(x, dt_, A, B, C, 64, out=y, stream=st)
no_wait("ssd, explicit stream")
cake_rt.dsa_indexer_det_topk(q, k, w, K, indices=idx, scores=sc, stream=st)
no_wait("dsa, explicit stream")
# PyTorch's current stream is CuPy's current one: one stream, nothing to order.
torch_stream[0] = s.ptr
cake_rt.ssd_combined(x, dt_, A, B, C, 64, out=y)
no_wait("ssd, one stream")
cake_rt.dsa_indexer_det_topk(q, k, w, K, indices=idx, scores=sc)
no_wait("dsa, one stream")
torch_stream[0] = TORCH
# Every array a CuPy array: no PyTorch stream to order.
xc = make(np.empty((1, L, H, P), BF16)); Bc = make(np.empty((1, L, 1, N), BF16))
dtc = make(np.empty((1, L, H), np.float32)); Ac = make(np.empty(H, np.float32))
cake_rt.ssd_combined(xc, dtc, Ac, Bc, Bc, 64)
no_wait("ssd, CuPy arrays")
# PyTorch's stream capturing (the call's is not): a wait would join it to the capture from outside; none is made.
capturing.add(TORCH)
cake_rt.ssd_combined(make(np.empty((1, L, H, P), BF16)), dt_, A, B, C, 64, out=y)
no_wait("ssd, PyTorch's stream capturing")
capturing.clear()
print("ok")
'''


def test_torch_stream_waits_for_a_stream_none_call_on_cupys_current_stream():
    """docs/reliability.md (aud-strm): a PyTorch caller on its own stream, ``stream=None``: its next op is ordered after
    the kernel (caller-owned outputs written, inputs read) without a synchronization of its own."""
    run_with_cpu_stubs(SCRIPT)
