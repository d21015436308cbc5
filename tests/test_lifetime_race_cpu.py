"""Lifetimes against a concurrent eviction, on the CPU stand-ins (``scripts/host_time.py --cpu``): a library object a
call uses (a DSA plan, an SSD segment table) may be retired by another thread at any moment of the call, and it must
still be freed only after the work that call queued (architecture spec, "Lifetimes"). The other thread is simulated
deterministically: a hook at the racing moment evicts and collects, as that thread would."""
from test_host_path_cpu import SSD_SMALL, STUBS, run_with_cpu_stubs

COMMON = STUBS + r'''
import gc, weakref
from cupy_backends.cuda.api import runtime
import cake_rt
from cake_rt.interop import BF16
import cake_rt.ops.ssd as ssd
import cake_rt.ops.dsa as dsa
from cake_rt.launch import streams
Event = type(streams.stream_event(0, s.ptr)[1])  # the stand-in event class: done unless told otherwise

def tracked(obj):
    """Whether a retired object still waits in the retirement list (freed only once its events are done)."""
    return any(o is obj for o in streams._retired)

def waiting(array):
    """The retired buffers of ``array`` still in the retirement list."""
    return [o for o in streams._retired if isinstance(o, streams.Buffer) and o.array is array]

class Queued:  # the stream's call event of a serving loop that keeps later calls queued: never complete at a collect
    ptr = 0x2000
    done = False
'''

# A chunk-parallel call of the small SSD problem made once on stream s; its stream's state and workspace; launches'
# pointers recorded by call_spied (seen["ptrs"]: the last launch's).
# A DSA split tail (its parts merge through the stream's workspace): q, k, w, K and the caller's idx, sc.
DSA_SPLIT_TAIL = COMMON + r'''
from cake_rt.launch.workspace import state_workspace
T, Tkv, K = 4, 30466, 2048        # a split tail: its parts merge through the stream's workspace
q = make(np.empty((T, 32, 128), BF16)); k = make(np.empty((Tkv, 128), BF16)); w = make(np.empty((T, 32), np.float32))
idx = make(np.empty((T, K), np.int32)); sc = make(np.empty((T, K), np.float32))
'''

SSD_CHUNKPAR = COMMON + SSD_SMALL + r'''
from cake_rt.launch import grid
from cake_rt.launch.workspace import state_workspace
call = lambda: cake_rt.ssd_combined(x, dt, A, B, B, 64, out=y, family="chunkpar", stream=s)
call()
state = streams.stream_state(0, s.ptr, False, s)
ws1 = state.workspaces["ssd_chunkpar"]
seen = {}
inside = lambda a, q: a.data.ptr <= q < a.data.ptr + a.nbytes
def call_spied(**hooks):
    """call() with names of the ssd module replaced by ``hooks`` (another thread's moments), the pointers of its
    launch recorded in seen["ptrs"]."""
    saved, run = {k: getattr(ssd, k) for k in hooks}, grid.PackedLaunch.run
    def spy(self, handle, ptrs, *a):
        seen["ptrs"] = list(ptrs)
        return run(self, handle, ptrs, *a)
    for k, v in hooks.items():
        setattr(ssd, k, v)
    grid.PackedLaunch.run = spy
    try:
        call()
    finally:
        for k, v in saved.items():
            setattr(ssd, k, v)
        grid.PackedLaunch.run = run
def grow(st):
    """Another thread's call on this stream: in flight on ``st``, it doubles the workspace."""
    st.begin()
    ws = state_workspace(st, "ssd_chunkpar", 2 * st.workspaces["ssd_chunkpar"].nbytes, handle=s.ptr, stream_obj=s)
    st.end(s.ptr, False)
    return ws
'''

SSD_RECORD_SCRIPT = COMMON + SSD_SMALL + r'''
call = lambda: cake_rt.ssd_combined(x, dt, A, B, B, 64, out=y, family="exact", stream=s)
call()
p = ssd._last_call[1]
table = p.held_table
# Another thread evicts the table (and collects) while this call records its stream's event: the table's kernel is
# queued, so the table must wait for that event.
record = runtime.eventRecord
def racing_record(ev, handle):
    ssd._tables.clear()
    streams.collect()
    record(ev, handle)
runtime.eventRecord = racing_record
call()
runtime.eventRecord = record
assert table.retired
Event.done = False           # the launch has not run yet
streams.collect()
assert tracked(table), "a table retired while its call recorded the event was freed before that call's work ran"
Event.done = True
streams.collect()
assert not tracked(table)    # and freed once it has
print("ok")
'''

DSA_LOOKUP_SCRIPT = COMMON + r'''
T, Tkv = 64, 300
q = make(np.empty((T, 32, 128), BF16)); k = make(np.empty((Tkv, 128), BF16)); w = make(np.empty((T, 32), np.float32))
idx = make(np.empty((T, 16), np.int32)); sc = make(np.empty((T, 16), np.float32))
call = lambda: cake_rt.dsa_indexer_det_topk(q, k, w, 16, indices=idx, scores=sc, stream=s)
call()
p = next(v for v in dsa._problems.values() if v.held is not None)
dp = p.held[1]
# Another thread evicts the plan (and collects it: nothing is in flight yet) after this call took it from its problem
# and before the call began using it; the call launches with it, so it must wait for this call's event.
stream_state = dsa.stream_state
def racing_stream_state(*a, **kw):
    dsa._plan_cache.clear()
    streams.collect()
    return stream_state(*a, **kw)
dsa.stream_state = racing_stream_state
call()
dsa.stream_state = stream_state
assert dp.retired
Event.done = False
streams.collect()
assert tracked(dp), "a plan retired between its lookup and the call's begin was freed before the call's work ran"
ref = weakref.ref(dp)
del dp
call()                       # the problem looks its plan up again and drops the retired one
gc.collect()
assert ref() is not None     # still alive: its event has not completed
Event.done = True
streams.collect()
gc.collect()
assert ref() is None         # freed once it has
print("ok")
'''


def test_an_object_retired_while_its_call_records_waits_for_that_call():
    run_with_cpu_stubs(SSD_RECORD_SCRIPT)


def test_an_object_retired_between_lookup_and_begin_waits_for_the_call():
    run_with_cpu_stubs(DSA_LOOKUP_SCRIPT)


DSA_GROWTH_SCRIPT = DSA_SPLIT_TAIL + r'''
call = lambda: cake_rt.dsa_indexer_det_topk(q, k, w, K, indices=idx, scores=sc, stream=s)
call()
seen = {}
# Another thread's call on the same stream grows the workspace (and collects) after this call took the workspace's
# address and before it launches: the grown-out buffer must wait for this call's work.
launch_args = dsa._launch_args
def racing_launch_args(dp, qkw, indices, scores, ws, tickets, schedule):
    assert ws is not None, "the case must use the stream's workspace"
    state = streams.stream_state(0, s.ptr, False, s)
    state.begin()                                  # the other thread's call
    state_workspace(state, "dsa_indexer", 2 * ws.nbytes, handle=s.ptr, stream_obj=s)
    streams.collect()
    state.end(s.ptr, False)
    seen["waiting"] = len(waiting(ws)) == 1
    return launch_args(dp, qkw, indices, scores, ws, tickets, schedule)
dsa._launch_args = racing_launch_args
call()
dsa._launch_args = launch_args
assert seen["waiting"], "a workspace grown out of while a call held its address was freed before that call launched"
old = [o for o in streams._retired if isinstance(o, streams.Buffer)]
Event.done = False           # the call's launch has not run yet
streams.collect()
assert old and all(tracked(o) for o in old)
Event.done = True
streams.collect()
assert not any(tracked(o) for o in old)   # freed once the call's work has run
print("ok")
'''


def test_a_workspace_grown_out_of_during_a_call_waits_for_that_call():
    run_with_cpu_stubs(DSA_GROWTH_SCRIPT)


SSD_GROWTH_SCRIPT = SSD_CHUNKPAR + r'''
# Another thread's call on the same stream grows the workspace after this call found its held pointers current and
# before its begin: the call must launch on the new workspace, not on the one grown out of.
begin_call = ssd.begin_call
def racing_begin_call(objs):
    if "grown" not in seen:
        seen["grown"] = True
        grow(state)
        streams.collect()
    return begin_call(objs)
call_spied(begin_call=racing_begin_call)
ws2 = state.workspaces["ssd_chunkpar"]
assert ws2 is not ws1
assert not any(inside(ws1, q) for q in seen["ptrs"]), "the call launched on a workspace grown out of before its begin"
assert any(inside(ws2, q) for q in seen["ptrs"])
print("ok")
'''


def test_a_chunk_parallel_call_takes_the_workspace_another_call_grew():
    run_with_cpu_stubs(SSD_GROWTH_SCRIPT)


SSD_TORN_SCRIPT = SSD_CHUNKPAR + r'''
state_workspace(state, "other", 256, handle=s.ptr, stream_obj=s)  # the held pointers stale: the call takes them again
# Another thread's call on the same stream switches in after this call read the workspace and before it reads the
# state's version (at the weak reference made between them), grows the workspace and collects: the call must not
# launch on the buffer grown out of unless that buffer waits for it.
real_weakref = ssd.weakref
class Racing:
    @staticmethod
    def ref(obj):
        if "grown" not in seen:
            seen["grown"] = True
            grow(state)
            streams.collect()
        return real_weakref.ref(obj)
call_spied(weakref=Racing)
assert seen["grown"]
assert waiting(ws1) or not any(inside(ws1, q) for q in seen["ptrs"]), "the call launched on a released workspace"
assert any(inside(state.workspaces["ssd_chunkpar"], q) for q in seen["ptrs"])
print("ok")
'''


def test_a_growth_between_the_workspace_and_its_version_is_seen_after_the_begin():
    run_with_cpu_stubs(SSD_TORN_SCRIPT)


SSD_NEW_STATE_SCRIPT = SSD_CHUNKPAR + r'''
seen["begins"] = 0
# Other threads, at this call's begins: at the first, one grows the stream's workspace and releases the stream's state
# (the call takes a new state after its begin); at the begin on that new state, one grows its workspace and collects.
# The call must launch on a workspace that is current or waits for it.
begin_call = ssd.begin_call
def racing_begin_call(objs):
    seen["begins"] += 1
    if seen["begins"] == 1:
        grow(state)
        streams.release_stream(s)
    elif seen["begins"] == 2:
        new = objs[0]
        assert new is not state and new.key == state.key
        seen["first"] = new.workspaces["ssd_chunkpar"]
        grow(new)
        streams.collect()
    return begin_call(objs)
call_spied(begin_call=racing_begin_call)
assert seen["begins"] >= 2
first = seen["first"]
assert waiting(first) or not any(inside(first, q) for q in seen["ptrs"]), "the call launched on a released workspace"
print("ok")
'''


def test_a_state_taken_after_the_begin_is_checked_again_after_its_own_begin():
    run_with_cpu_stubs(SSD_NEW_STATE_SCRIPT)


TICKETS_SCRIPT = COMMON + SSD_SMALL + r'''
import cake_rt.launch.tickets as tickets
from cake_rt.launch import grid
x2 = make(np.empty((1, 2 * L, H, P), BF16)); B2 = make(np.empty((1, 2 * L, 1, N), BF16))
dt2 = make(np.empty((1, 2 * L, H), np.float32)); y2 = make(np.empty((1, 2 * L, H, P), BF16))
call = lambda: cake_rt.ssd_combined(x, dt, A, B, B, 64, out=y, family="chunkpar", stream=s)
call2 = lambda: cake_rt.ssd_combined(x2, dt2, A, B2, B2, 64, out=y2, family="chunkpar", stream=s)
# Two threads' first calls on one stream: the other thread's call makes the stream's ticket words and launches while
# this call makes its own (switched in at the end of this call's TicketWords). Both must end up with the words the
# stream's state keeps: a problem holding the pointer of words no state keeps launches on freed memory on every call.
real = tickets.TicketWords
class Racing(real):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        if not seen.get("raced"):
            seen["raced"] = True
            call2()
seen = {}
tickets.TicketWords = Racing
call()
tickets.TicketWords = real
assert seen["raced"]
def spy(self, handle, ptrs, *a):
    seen["ptrs"] = list(ptrs)
    return run(self, handle, ptrs, *a)
run, grid.PackedLaunch.run = grid.PackedLaunch.run, spy
state = streams.stream_state(0, s.ptr, False, s)
for c in (call, call2):
    c()
    assert seen["ptrs"][-1] == state.tickets[4].ptr, "a launch on ticket words the stream's state no longer keeps"
print("ok")
'''


def test_two_first_calls_on_a_stream_share_its_ticket_words():
    run_with_cpu_stubs(TICKETS_SCRIPT)


IDLE_GROWTH_SCRIPT = SSD_CHUNKPAR + r'''
# A growth with no call in flight (the chunk-parallel call's own, before its begin): the buffer grown out of waits for
# the work queued with it, not for the stream's later calls.
assert state._events
for key in list(state._events):
    state._events[key] = Queued()
state_workspace(state, "ssd_chunkpar", 2 * ws1.nbytes, handle=s.ptr, stream_obj=s)
streams.collect()
assert not waiting(ws1), "kept by later calls"
# A growth while a call is in flight on the state: the buffer grown out of waits for the state.
ws2 = state.workspaces["ssd_chunkpar"]
state.begin()
state_workspace(state, "ssd_chunkpar", 2 * ws2.nbytes, handle=s.ptr, stream_obj=s)
state._inflight -= 1
streams.collect()
old = waiting(ws2)
assert old and old[0].after is state
print("ok")
'''


def test_a_buffer_grown_out_of_with_no_call_in_flight_waits_for_its_own_work_only():
    run_with_cpu_stubs(IDLE_GROWTH_SCRIPT)


DSA_OWN_GROWTH_SCRIPT = DSA_SPLIT_TAIL + r'''
state = streams.stream_state(0, s.ptr, False, s)
small = state_workspace(state, "dsa_indexer", 256, handle=s.ptr, stream_obj=s)
# The call grows the workspace itself (no other call in flight): the buffer grown out of waits for the work queued
# with it, not for the stream's later calls.
cake_rt.dsa_indexer_det_topk(q, k, w, K, indices=idx, scores=sc, stream=s)
assert state.workspaces["dsa_indexer"] is not small
for key in list(state._events):
    state._events[key] = Queued()
streams.collect()
assert not waiting(small), "kept by later calls"
print("ok")
'''


def test_a_call_growing_its_own_workspace_does_not_keep_the_old_one_for_later_calls():
    run_with_cpu_stubs(DSA_OWN_GROWTH_SCRIPT)


THREADS_SCRIPT = COMMON + r'''
import threading, weakref
import cupy
from cake_rt.launch import grid
sys.setswitchinterval(1e-6)  # a thread switch at (nearly) any bytecode
# Memory that is freed when its last reference goes (addresses never reused): a launch's pointer must lie in memory
# something still holds.
class Memory(cupy.cuda.UnownedMemory):
    pass
top, spans, lock = [1 << 40], [], threading.Lock()
def allocate(nbytes):
    with lock:
        b = top[0]; top[0] += (nbytes + 511) // 256 * 256
    m = Memory(b, max(nbytes, 1), None, device_id=0)
    spans.append((b, b + max(nbytes, 1), weakref.ref(m)))
    return cupy.cuda.MemoryPointer(m, 0)
cupy.cuda.set_allocator(allocate)
def live(q):
    return all(r() is not None for b, e, r in list(spans) if b <= q < e)
H, P, N = 4, 64, 64
problems = []
for L in (256, 512, 1024, 2048, 4096, 8192):  # workspaces of growing sizes
    x = make(np.empty((1, L, H, P), BF16)); B = make(np.empty((1, L, 1, N), BF16))
    dt = make(np.empty((1, L, H), np.float32)); A = make(np.empty(H, np.float32)); y = make(np.empty((1, L, H, P), BF16))
    problems.append((x, dt, A, B, y))
bad = []
run = grid.PackedLaunch.run
def spy(self, handle, ptrs, *a):
    bad.extend(q for q in ptrs[-5:] if not live(q))  # the workspace parts and the ticket words
    return run(self, handle, ptrs, *a)
grid.PackedLaunch.run = spy
def worker(seed):
    rng = np.random.default_rng(seed)
    for _ in range(400):
        x, dt, A, B, y = problems[rng.integers(len(problems))]
        cake_rt.ssd_combined(x, dt, A, B, B, 64, out=y, family="chunkpar", stream=s)
        if rng.random() < 0.05:
            streams.release_stream(s)  # the stream's next call takes a new state (ticket words, workspace)
        if rng.random() < 0.1:
            streams.collect()
errors = []
threading.excepthook = lambda args: errors.append(args.exc_value)  # a thread's exception is otherwise printed only
threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
assert not bad, f"{len(bad)} launches on freed memory"
print("ok")
'''


def test_threads_on_one_stream_launch_on_live_workspaces_and_ticket_words():
    """Calls of four threads on one stream, of growing sizes, with the stream's state released now and then: no
    chunk-parallel launch points at memory already freed. Thread switches are not deterministic: on the code before
    the fixes above it failed on every run (the workspace) or on about half of them (the ticket words)."""
    run_with_cpu_stubs(THREADS_SCRIPT)


RACING_GROWTHS_SCRIPT = COMMON + SSD_SMALL + r'''
import threading, weakref
import cupy
from cake_rt.launch import grid
from cake_rt.launch.workspace import state_workspace
class Memory(cupy.cuda.UnownedMemory):  # freed when its last reference goes
    pass
top, spans = [1 << 40], []
def allocate(nbytes):
    b = top[0]; top[0] += (nbytes + 511) // 256 * 256
    m = Memory(b, max(nbytes, 1), None, device_id=0)
    spans.append((b, b + max(nbytes, 1), weakref.ref(m)))
    return cupy.cuda.MemoryPointer(m, 0)
cupy.cuda.set_allocator(allocate)
live = lambda q: all(r() is not None for b, e, r in spans if b <= q < e)
call = lambda: cake_rt.ssd_combined(x, dt, A, B, B, 64, out=y, family="chunkpar", stream=s)
call()
state = streams.stream_state(0, s.ptr, False, s)
X = state.workspaces["ssd_chunkpar"].nbytes
# Thread G1 grows the workspace and is switched out while it allocates; G2 grows it further; thread D's call takes
# G2's buffer and is switched out at its launch; G1 then finishes its growth. D must launch on live memory.
allocating, g1_go, at_launch, d_go = (threading.Event() for _ in range(4))
empty = cupy.empty
def slow_empty(*a, **kw):
    if threading.current_thread().name == "G1":
        allocating.set(); g1_go.wait(10)
    return empty(*a, **kw)
cupy.empty = slow_empty
run = grid.PackedLaunch.run
seen = {}
def spy(self, handle, ptrs, *a):
    if threading.current_thread().name == "D":
        at_launch.set(); d_go.wait(10)
        seen["live"] = all(live(q) for q in ptrs[-5:])
    return run(self, handle, ptrs, *a)
grid.PackedLaunch.run = spy
errors = []
threading.excepthook = lambda args: errors.append(args.exc_value)  # a thread's exception is otherwise printed only
g1 = threading.Thread(target=lambda: state_workspace(state, "ssd_chunkpar", 3 * X // 2, handle=s.ptr, stream_obj=s),
                      name="G1")
g1.start(); assert allocating.wait(10)
state_workspace(state, "ssd_chunkpar", 2 * X, handle=s.ptr, stream_obj=s)   # G2
d = threading.Thread(target=call, name="D")
d.start(); assert at_launch.wait(10)
g1_go.set(); g1.join(10)
streams.collect(); gc.collect()
d_go.set(); d.join(10)
assert not errors, errors
assert seen["live"] is True, "a call launched on a workspace another growth replaced unguarded"
print("ok")
'''


def test_two_growths_at_once_never_replace_a_buffer_unguarded():
    run_with_cpu_stubs(RACING_GROWTHS_SCRIPT)


CAPTURE_QUERY_SCRIPT = COMMON + r'''
T, Tkv = 64, 300
q = make(np.empty((T, 32, 128), BF16)); k = make(np.empty((Tkv, 128), BF16)); w = make(np.empty((T, 32), np.float32))
idx = make(np.empty((T, 16), np.int32)); sc = make(np.empty((T, 16), np.float32))
call = lambda: cake_rt.dsa_indexer_det_topk(q, k, w, 16, indices=idx, scores=sc, stream=s)
call()                                   # eager first: the captured call needs no new library memory
# A capture in global or thread-local mode (PyTorch's torch.cuda.graph by default) refuses event queries: the driver
# answers cudaErrorStreamCaptureUnsupported (and invalidates the capture), which says nothing about the work.
capture = {"on": False, "queried": 0}
def done(ev):
    if capture["on"]:
        capture["queried"] += 1
        raise runtime.CUDARuntimeError(900)
    return pending["done"]
pending = {"done": False}                # the dead stream's last work is still queued
Event.done = property(done)
# The state of a stream that was collected with work queued (a stream's weakref callback appends its key).
dead = streams.stream_state(0, 0x5000, False)
dead.begin(); dead.end(0x5000, False)
streams._dead.append(dead.key)
runtime.streamIsCapturing = lambda h: runtime.streamCaptureStatusActive if capture["on"] else runtime.streamCaptureStatusNone
capture["on"] = True
call()                                   # captured: drops the dead stream's state, must not free it
capture["on"] = False
assert capture["queried"] == 0, "a captured call queried events (refused, and it invalidates the capture)"
assert dead.retired and tracked(dead)
streams.collect()
assert tracked(dead), "a state whose work is queued was freed"
# Another thread's collect while a capture refuses the query: still not freed.
capture["on"] = True
streams.collect()
capture["on"] = False
assert tracked(dead), "an event query refused by a capture was taken for a completed event"
pending["done"] = True
streams.collect()
assert not tracked(dead)                 # freed once its work has run
print("ok")
'''


def test_a_capture_never_queries_events_nor_takes_a_refused_query_for_completion():
    run_with_cpu_stubs(CAPTURE_QUERY_SCRIPT)
