"""A prepared DSA runner's memory of each further stream (its own ticket word and, without a caller's workspace, its
own library workspace) follows the architecture rule for per-stream state: "released when its stream is gone, or
bounded". A runner run on many streams keeps the memory of at most ``MAX_STREAM_STATES`` further streams (the oldest
released first), a collected CuPy stream's memory is released, a released stream's memory is freed only after the
runs that may hold it, and one a graph captured is kept while the runner lives. On the CPU stand-ins."""
from test_host_path_cpu import STUBS, run_with_cpu_stubs

SCRIPT = STUBS + r'''
import gc, weakref
from cupy_backends.cuda.api import runtime
import cake_rt
import cake_rt.ops.dsa as dsa
from cake_rt.interop import BF16
from cake_rt.launch import streams
from cake_rt.launch.streams import StreamHandle

# A wrapper of a handle that enters as the stand-in stream does (CuPy's own would make the current device's stream).
dsa.external_stream = streams.external_stream = lambda handle: type(s).from_external(StreamHandle(handle))

T, Tkv, H, D, K = 64, 8192, 32, 64, 8
q = make(np.empty((T, H, D), BF16)); k = make(np.empty((Tkv, D), BF16)); w = make(np.empty((T, H), np.float32))
idx = make(np.empty((T, K), np.int32)); sc = make(np.empty((T, K), np.float32))
runner = cake_rt.prepare_dsa_indexer_det_topk(q, k, w, K, indices=idx, scores=sc, key_split=256, stream=s)
assert runner.workspace is not None and runner.tickets is not None  # a split plan: library workspace, ticket words
runner(stream=s)                                   # the prepare stream takes the prepare-time memory

owners = []
def new_stream():
    owners.append(bytearray(64))                   # a handle must point at readable memory (streams.check_handle)
    return type(s).from_external(StreamHandle(id(owners[-1])))

def memory_of(stream):
    return runner._per_stream.get(stream.ptr)

# More further streams than MAX_STREAM_STATES: the runner keeps that many (and the prepare stream's), the oldest
# released and freed once its run's event has completed.
first = new_stream()
runner(stream=first)
refs = [weakref.ref(m) for m in memory_of(first)[1:4:2]]   # its ticket words and its workspace
others = [new_stream() for _ in range(2 * streams.MAX_STREAM_STATES)]
for o in others:
    runner(stream=o)
assert len(runner._per_stream) <= streams.MAX_STREAM_STATES + 1, len(runner._per_stream)
assert memory_of(s) is not None and memory_of(s)[1] is runner.tickets   # the prepare-time memory stays
streams.collect()
gc.collect()
assert all(r() is None for r in refs), "a released stream's ticket words and workspace are still referenced"
runner(stream=first)                               # a released stream runs again on memory made anew
assert memory_of(first) is not None

# A run between its lookup and its event record holds the memory it looked up: a release meanwhile frees it only
# once that run is over.
held = new_stream()
runner(stream=held)
ref = weakref.ref(memory_of(held)[3])
runner._busy.append(None)                          # another thread's run of the runner, in flight
for o in [new_stream() for _ in range(streams.MAX_STREAM_STATES + 1)]:
    runner(stream=o)
assert memory_of(held) is None
streams.collect(); gc.collect()
assert ref() is not None, "freed under a run in flight"
runner._busy.pop()
streams.collect(); gc.collect()
assert ref() is None

# A graph captured on a further stream points at its memory: released from the table, it is kept with the runner.
cap = new_stream()
runner(stream=cap)
capturing = runtime.streamIsCapturing
runtime.streamIsCapturing = lambda h: runtime.streamCaptureStatusActive if h == cap.ptr else capturing(h)
runner(stream=cap)
runtime.streamIsCapturing = capturing
ref = weakref.ref(memory_of(cap)[3])
for o in [new_stream() for _ in range(streams.MAX_STREAM_STATES + 1)]:
    runner(stream=o)
assert memory_of(cap) is None
streams.collect(); gc.collect()
assert ref() is not None, "a captured stream's workspace was freed while the runner lives"

# A collected CuPy stream that owned its handle (which a later stream may take again): its memory is released at the
# runner's next new stream, and freed after its run.
dsa.owns_handle = lambda obj: True                 # the stand-in stream plays a cupy.cuda.Stream() the caller made
gone = new_stream()
runner(stream=gone)
key = gone.ptr
ref = weakref.ref(runner._per_stream[key][3])
del gone
gc.collect()
runner(stream=new_stream())
assert key not in runner._per_stream
streams.collect(); gc.collect()
assert ref() is None, "a collected stream's workspace is still referenced"
print("ok")
'''


def test_a_runners_further_streams_are_released_or_bounded():
    run_with_cpu_stubs(SCRIPT)
