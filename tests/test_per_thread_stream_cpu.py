"""The per-thread default stream (handle 2) is another stream in every host thread: a table uploaded on one thread's
must be waited for by a call on another thread's (architecture spec, "Stream order"), and a thread started after one
exited (CPython may give it the same ``get_ident``) must not share that thread's stream state: the exited thread's
work may still be queued. On the CPU stand-ins; the threads run one after another."""
from test_host_path_cpu import STUBS, run_with_cpu_stubs

SCRIPT = STUBS + r'''
import threading
from cupy_backends.cuda.api import runtime
import cake_rt
from cake_rt.interop import BF16
import cake_rt.ops.ssd as ssd
import cake_rt.ops.dsa as dsa
from cake_rt.launch import streams
from cake_rt.launch.streams import StreamHandle

# A wrapper of handle 2 that enters as the stand-in stream does (CuPy's own would ask the driver for this thread).
streams.external_stream = lambda handle: type(s).from_external(StreamHandle(handle))

waits = []
runtime.streamWaitEvent = lambda handle, event, flags: waits.append((threading.get_ident(), handle))

errors = []
threading.excepthook = lambda args: errors.append(args.exc_value)  # a thread's exception is otherwise printed only

def in_thread(fn):
    t = threading.Thread(target=fn)
    t.start()
    t.join()
    assert not errors, errors
    return t.ident

T, Tkv = 64, 300
q = make(np.empty((T, 32, 128), BF16)); k = make(np.empty((Tkv, 128), BF16)); w = make(np.empty((T, 32), np.float32))
cq, ck = np.array([0, 20, T], np.int32), np.array([0, 100, Tkv], np.int32)
dsa_call = lambda: cake_rt.dsa_indexer_det_topk(q, k, w, 16, cu_seqlens_q=cq, cu_seqlens_k=ck, stream=2)
L, H, P, N = 256, 4, 64, 64
x = make(np.empty((1, L, H, P), BF16)); B = make(np.empty((1, L, 1, N), BF16))
dt = make(np.empty((1, L, H), np.float32)); A = make(np.empty(H, np.float32))
ssd_call = lambda: cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=np.array([0, 100, L], np.int32), stream=2)

for name, call in (("dsa", dsa_call), ("ssd", ssd_call)):
    waits.clear()
    first = in_thread(call)                 # plans and uploads on the first thread's per-thread stream
    assert waits == [], (name, waits)       # its own stream: ordered by it
    second = in_thread(call)                # the upload is another stream's work for this thread
    assert (second, 2) in waits, (name, waits, second)
    n = len(waits)
    in_thread(lambda: (call(), call()))     # a new thread's stream waits once
    assert len(waits) == n + 1, (name, waits)
keys = []
in_thread(lambda: keys.append(streams.stream_key(0, 2)))
in_thread(lambda: keys.append(streams.stream_key(0, 2)))
assert keys[0] != keys[1], keys
print("ok")
'''


def test_a_table_uploaded_on_one_threads_default_stream_is_waited_for_on_anothers():
    run_with_cpu_stubs(SCRIPT)
