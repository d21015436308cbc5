"""Library objects used on many streams (a cached DSA plan, an SSD segment table, a runner's plan) keep one release
event per stream they were used on, and ``idle`` queries every one. A process that calls on a new stream per request
(a ``torch.cuda.Stream()`` each) must not make those grow without bound ("per-stream state is released when its stream
is gone, or bounded"): an object keeps the events of streams whose work on it is still queued, and drops those that
have completed once it holds many. On the CPU stand-ins (their events complete unless told otherwise)."""
from test_host_path_cpu import STUBS, run_with_cpu_stubs

# the calls' arrays (CuPy headers over addresses never touched), both scripts'
ARRAYS = r'''
T, Tkv, K = 64, 300, 16
q = make(np.empty((T, 32, 128), BF16)); k = make(np.empty((Tkv, 128), BF16)); w = make(np.empty((T, 32), np.float32))
idx = make(np.empty((T, K), np.int32)); sc = make(np.empty((T, K), np.float32))
L, H, P, Nst = 256, 4, 64, 64
x = make(np.empty((1, L, H, P), BF16)); B = make(np.empty((1, L, 1, Nst), BF16))
dt = make(np.empty((1, L, H), np.float32)); A = make(np.empty(H, np.float32)); y = make(np.empty((1, L, H, P), BF16))
cu = np.array([0, 100, L], np.int32)
'''

SCRIPT = STUBS + r'''
import cupy
import cake_rt
import cake_rt.ops.dsa as dsa
import cake_rt.ops.ssd as ssd
from cake_rt.interop import BF16
from cake_rt.launch import streams
from cake_rt.launch.streams import StreamHandle

dsa.external_stream = streams.external_stream = lambda handle: type(s).from_external(StreamHandle(handle))
Event = cupy.cuda.Event
N = 3 * streams.MAX_STREAM_STATES * 4    # more streams than any bound the library keeps per object

owners = []
def new_stream():
    owners.append(bytearray(64))
    return type(s).from_external(StreamHandle(id(owners[-1])))

''' + ARRAYS + r'''runner = cake_rt.prepare_dsa_indexer_det_topk(q, k, w, K, indices=idx, scores=sc)

def objects():
    return (dsa._plan_cache.values()[0], ssd._tables.values()[0], runner._dp)

def run_all(stream):
    cake_rt.dsa_indexer_det_topk(q, k, w, K, indices=idx, scores=sc, stream=stream)
    cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=cu, out=y, stream=stream)
    runner(stream=stream)

# Completed work (the stand-ins' events are all complete): the events of finished streams are dropped.
for _ in range(N):
    run_all(new_stream())
for o in objects():
    assert len(o._events) <= 4 * streams.MAX_STREAM_STATES, (type(o).__name__, len(o._events))

# Work still queued: no event of a stream whose work may still read the object is ever dropped.
Event.done = False
for o in objects():
    o._events.clear()
pending = [new_stream() for _ in range(N)]
for p in pending:
    run_all(p)
for o in objects():
    assert all(streams.stream_key(0, p.ptr) in o._events for p in pending), type(o).__name__
Event.done = True
print("ok")
'''


def test_release_events_of_finished_streams_are_dropped():
    run_with_cpu_stubs(SCRIPT)


def test_an_event_recorded_while_it_is_queried_is_kept():
    """``drop_completed_events`` against a call on the same stream that records the event (after the query has
    answered "complete") and then looks its entry up, as ``end_call`` does: the entry stays, so the object is not judged
    idle before that call's work has run."""
    from cake_rt.launch import streams

    evs = {}

    class Recorded:
        """Complete when queried; the query is followed at once by another call's record and lookup."""

        @property
        def done(self):
            if evs.get("s") is not self:  # end_call's lookup after its record
                evs["s"] = self
            return True

    class Pending:
        done = False

    ev, other = Recorded(), Pending()
    evs.update(s=ev, t=other)
    streams.drop_completed_events(evs)
    assert evs == {"s": ev, "t": other}

    class Done:
        done = True

    evs = {"u": Done(), "t": other}
    streams.drop_completed_events(evs)
    assert evs == {"t": other}


HANDLES_SCRIPT = STUBS + r'''
import cake_rt
import cake_rt.ops.dsa as dsa
import cake_rt.ops.ssd as ssd
from cupy_backends.cuda.api import runtime
from cake_rt.interop import BF16
from cake_rt.launch import streams
from cake_rt.launch.streams import StreamHandle

dsa.external_stream = streams.external_stream = lambda handle: type(s).from_external(StreamHandle(handle))
owners = []
def new_stream():
    owners.append(bytearray(64))
    return type(s).from_external(StreamHandle(id(owners[-1])))

waits = []
runtime.streamWaitEvent = lambda handle, event, flags: waits.append(handle)

''' + ARRAYS + r'''
def run_all(stream):
    cake_rt.dsa_indexer_det_topk(q, k, w, K, indices=idx, scores=sc, stream=stream)
    cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=cu, out=y, stream=stream)

first = new_stream()
run_all(first)
tables = (dsa._plan_cache.values()[0], ssd._tables.values()[0])
for _ in range(12 * streams.MAX_STREAM_STATES):
    run_all(new_stream())
bound = 4 * streams.MAX_STREAM_STATES
assert len(streams._validated) <= bound, len(streams._validated)
for t in tables:
    assert len(t.ordered) <= bound, (type(t).__name__, len(t.ordered))

# A stream whose entry was dropped waits for the upload again (never skips it); one still known does not.
waits.clear()
run_all(first)
assert waits.count(first.ptr) == 2, waits
last = owners[-1]
waits.clear()
run_all(type(s).from_external(StreamHandle(id(last))))
assert waits == [], waits
print("ok")
'''


def test_handle_bookkeeping_is_bounded():
    """The handles the driver check passed and the streams a cached plan or table knows to be ordered after its upload
    are bounded for a process that calls on a new stream per request; a stream dropped from them is checked or ordered
    again on its next call."""
    run_with_cpu_stubs(HANDLES_SCRIPT)
