"""The steady-state host path of both ops on the CPU (every CUDA entry point replaced by a no-op, see
``scripts/host_time.py --cpu``): a memoized call still refuses what a fresh call refuses (a host array
changed in place, a misaligned or overlapping array), records one event per call, keeps no caller array
alive, and under capture pins what it used and refuses a new layout. Runs in a subprocess: the stand-ins
replace module attributes of CuPy for good."""
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("cupy")

ROOT = pathlib.Path(__file__).resolve().parents[1]

# What every script below starts with: the CPU stand-ins of scripts/host_time.py (its path is argv[1]) installed, ``make``
# (a host array's device stand-in), ``s`` (a stream) and ``refused`` defined.
STUBS = r'''
import importlib.util, sys
import numpy as np
spec = importlib.util.spec_from_file_location("host_time", sys.argv[1])
ht = importlib.util.module_from_spec(spec); spec.loader.exec_module(ht)
make, s = ht.install_cpu_stubs()

def refused(fn, match):
    """``fn()`` raises a ValueError whose message starts with ``match``."""
    try:
        fn()
    except ValueError as exc:
        assert str(exc).startswith(match), (str(exc), match)
        return
    raise AssertionError(f"not refused: {match}")
'''

SCRIPT = STUBS + r'''
import gc, weakref
from cupy_backends.cuda.api import runtime
import cake_rt
from cake_rt.interop import BF16
import cake_rt.ops.ssd as ssd
import cake_rt.ops.dsa as dsa

records = []
runtime.eventRecord = lambda ev, handle: records.append(handle)

# ---- SSD
L, H, P, N = 256, 4, 64, 64
x = make(np.empty((1, L, H, P), BF16)); z = make(np.empty((1, L, H, P), BF16))
B = make(np.empty((1, L, 1, N), BF16)); C = make(np.empty((1, L, 1, N), BF16))
dt = make(np.empty((1, L, H), np.float32)); A = make(np.empty(H, np.float32))
y = make(np.empty((1, L, H, P), BF16))
cu = np.array([0, 100, L], np.int32)
def ssd_call(**kw):
    a = dict(z=z, cu_seqlens=cu, return_final_states=True, out=y, stream=s); a.update(kw)
    return cake_rt.ssd_combined(x, dt, A, B, C, 64, **a)
for _ in range(3):
    ssd_call()
# The return convention: y alone without states (out given or not), a tuple with them.
for kw in (dict(out=None, return_final_states=False), dict(return_final_states=False)):
    for _ in range(2):  # a fresh call, then a memo hit
        r = ssd_call(**kw)
        assert not isinstance(r, tuple) and r.shape == (1, L, H, P), type(r)
r = ssd_call(out=None)
assert isinstance(r, tuple) and len(r) == 2 and r[1].shape == (1, H, P, N), type(r)
# An empty problem (batch 2, no tokens) in each family: the launch gets the pointers its kernel takes (the
# chunk-parallel workspace offsets are all 0 there, so they cannot tell the families apart).
x0 = make(np.empty((2, 0, H, P), BF16)); B0 = make(np.empty((2, 0, 1, N), BF16))
dt0 = make(np.empty((2, 0, H), np.float32)); h0 = make(np.empty((2, H, P, N), np.float32))
for fam in ("chunkpar", "exact", "auto"):
    r = cake_rt.ssd_combined(x0, dt0, A, B0, B0, 64, initial_states=h0, return_final_states=True, family=fam,
                             stream=s)
    assert r[0].shape == (2, 0, H, P) and r[1].shape == (2, H, P, N), fam
n = len(ssd._problems)
records.clear(); ssd_call(); assert len(records) == 1, records   # one event record per call
assert len(ssd._problems) == n                                     # a memo hit
cu[1] = 300                                                        # changed in place: validated again
refused(ssd_call, "cu_seqlens: must be non-decreasing")
cu[1] = 100
refused(lambda: ssd_call(out=x), "out: its memory overlaps x")
# The pointers of the last call that passed the memory checks are kept (a call with the same ones skips them);
# a refused set never is: the same call is refused again, and a passing one after it still passes.
p_m = ssd._last_call[1]
refused(lambda: ssd_call(out=x), "out: its memory overlaps x")
assert y.data.ptr in p_m.checked and p_m.checked[9] != x.data.ptr
ssd_call()
assert p_m.checked[9] == y.data.ptr
base = make(np.empty(L * H * P * 2 + 64, np.uint8))
mis = base[2:2 + L * H * P * 2].view(BF16).reshape(1, L, H, P)
refused(lambda: ssd_call(z=mis), "z: the data pointer")
# The memoized problem holds its device table while the cache keeps it: once evicted (retired) the next call
# uploads a table of its own and launches with it.
ssd_call()
p_s = ssd._problems[ssd._signature((x, dt, A, B, C, None, z, None, None, y), [], 64, None, cu, False, (0.0, float("inf")),
                                   True, False, False, None, "auto")]
held = p_s.held_table
ssd._tables.clear()
assert held.retired
launches = []
from cupy_backends.cuda.api import driver
driver.launchCooperativeKernel = lambda *a: launches.append(a)
driver.launchKernel = lambda *a: launches.append(a)
ssd_call()
assert p_s.held_table is not held and not p_s.held_table.retired and len(launches) == 1
pk = p_s.executable[1]
assert pk._slots[pk.slot_names.index("table")] == p_s.held_table.ptr  # the launch read the new table
for v in ssd._problems.values():                                   # the memo holds no caller array
    assert not any(type(a).__module__.startswith("cupy") for a in ssd._arrays_of(v)), v
# A repeated call is compared with the last signature before any hash: a scalar of another type still fails its
# check (a value is never compared across types: an array's == is elementwise).
ssd_call()
for kw, exc, match in ((dict(return_final_states=1), TypeError, "return_final_states: expected a bool"),
                       (dict(dt_limit=(0.0, np.array([1.0, 2.0]))), TypeError, "dt_limit: expected a pair")):
    try:
        ssd_call(**kw)
    except exc as e:
        assert str(e).startswith(match), e
    else:
        raise AssertionError(f"not refused: {kw}")
# A chunk-parallel problem holds its stream's state, workspace and ticket words per stream: another stream gets
# its own, a released (retired) state or a collected stream's is replaced, a workspace grown by another problem
# on the stream is taken again; every launch reads the parts of its own stream's state.
from cake_rt.launch import streams
from cake_rt.launch.streams import StreamHandle
def chunkpar_call(stream, xx=x, bb=B, dd=dt, zz=z, yy=y):
    return cake_rt.ssd_combined(xx, dd, A, bb, bb, 64, z=zz, cu_seqlens=None, out=yy, family="chunkpar",
                                stream=stream)
def launched_parts(p):
    pk = p.executable[1]
    got = [pk._slots[pk.slot_names.index(n)] for n in ("ws_states", "tickets")]
    st = streams.stream_states().get(streams.stream_key(0, p.held_stream[0]))
    assert st is p.held_stream[1]() and not st.retired
    assert got == [st.workspaces["ssd_chunkpar"].data.ptr, st.tickets[4].ptr], (got, st)
    return st
chunkpar_call(s)
p_c = ssd._last_call[1]                                             # the problem of the last call
st_s = launched_parts(p_c)
owner2 = bytearray(64)
s2 = type(s).from_external(StreamHandle(id(owner2)))
chunkpar_call(s2)
st_s2 = launched_parts(p_c)
assert st_s2 is not st_s and p_c.held_stream[0] == s2.ptr
streams.release_stream(s2)
assert st_s2.retired
chunkpar_call(s2)
assert launched_parts(p_c) is not st_s2                             # a retired state is replaced
chunkpar_call(s)
assert launched_parts(p_c) is st_s                                  # back on s: s's own parts
chunkpar_call(s2)
streams._dead.append(streams.stream_key(0, s2.ptr))                 # s2's stream object collected (weakref callback)
st_old = p_c.held_stream[1]()
chunkpar_call(s2)
assert st_old.retired and launched_parts(p_c) is not st_old
chunkpar_call(s)
version = st_s.workspace_version
L2 = 4 * L                                                          # a larger problem grows s's workspace
x2 = make(np.empty((1, L2, H, P), BF16)); y2 = make(np.empty((1, L2, H, P), BF16))
B2 = make(np.empty((1, L2, 1, N), BF16)); dt2 = make(np.empty((1, L2, H), np.float32))
chunkpar_call(s, x2, B2, dt2, None, y2)
assert st_s.workspace_version > version
chunkpar_call(s)
assert launched_parts(p_c) is st_s                                  # the grown workspace, not the retired one

# ---- DSA
T, Tkv = 64, 300
q = make(np.empty((T, 32, 128), BF16)); k = make(np.empty((Tkv, 128), BF16)); w = make(np.empty((T, 32), np.float32))
idx = make(np.empty((T, 16), np.int32)); sc = make(np.empty((T, 16), np.float32))
cq = np.array([0, 20, T], np.int32); ck = np.array([0, 100, Tkv], np.int32)
def dsa_call(**kw):
    a = dict(cu_seqlens_q=cq, cu_seqlens_k=ck, indices=idx, scores=sc, stream=s); a.update(kw)
    return cake_rt.dsa_indexer_det_topk(q, k, w, 16, **a)
for _ in range(3):
    dsa_call()
n = len(dsa._problems)
records.clear(); dsa_call(); assert len(records) == 1, records
assert len(dsa._problems) == n
cq[-1] = T + 1
refused(dsa_call, "cu_seqlens_q: expected to end at")
cq[-1] = T
refused(lambda: dsa_call(scores=idx.view(np.float32)), "scores: its memory overlaps indices")
refused(lambda: dsa_call(scores=idx.view(np.float32)), "scores: its memory overlaps indices")  # never kept
dsa_call()
qb = make(np.empty(T * 32 * 128 * 2 + 64, np.uint8))
refused(lambda: cake_rt.dsa_indexer_det_topk(qb[8:8 + T * 32 * 128 * 2].view(BF16).reshape(T, 32, 128), k, w, 16,
                                             cu_seqlens_q=cq, cu_seqlens_k=ck, indices=idx, scores=sc, stream=s),
        "q: the data pointer")
for v in dsa._problems.values():
    assert v.q is None and v.k is None and v.w is None
# The memoized problem holds its device plan: an evicted (retired) plan is planned again, a changed switch
# (CAKE_RT_DSA_MMA picks the program) gives another plan, and setting it back the first one again.
import os
p0 = next(v for v in dsa._problems.values() if v.held is not None)
dp0 = p0.held[1]
dsa._plan_cache.clear()
assert dp0.retired
dsa_call()
assert p0.held[1] is not dp0 and not p0.held[1].retired
dp1 = p0.held[1]
os.environ["CAKE_RT_DSA_MMA"] = "sync"
dsa_call()
assert p0.held[1] is not dp1 and p0.held[0] == (False, False)
del os.environ["CAKE_RT_DSA_MMA"]
dsa_call()
assert p0.held[1] is dp1 and p0.held[0] == (True, False)
# The held plan is used while the switches' raw values are those it was held under; another value is parsed
# (and refused when it is not a switch value) before any launch.
os.environ["CAKE_RT_DSA_MMA"] = "fast"
events_before = len(records)
refused(dsa_call, "CAKE_RT_DSA_MMA")  # by a memoized call too
del os.environ["CAKE_RT_DSA_MMA"]
assert len(records) == events_before  # nothing recorded: refused before the launch
dsa_call()
assert p0.held[1] is dp1
# A held plan stays as recently used as with a lookup: called on every step, it outlives other layouts' plans.
dsa_call()
dp1 = p0.held[1]
for i in range(dsa._PLAN_CACHE_SIZE + 8):
    dsa_call(cu_seqlens_q=np.array([0, 21 + i % 40, T], np.int32), cu_seqlens_k=np.array([0, 100 + i, Tkv], np.int32))
    dsa_call()
assert p0.held[1] is dp1 and not dp1.retired
runner = cake_rt.prepare_dsa_indexer_det_topk(q, k, w, 16, cu_seqlens_q=cq, cu_seqlens_k=ck, indices=idx, scores=sc)
runner(stream=s)
records.clear(); runner(stream=s); assert len(records) == 1, records
# The runner's steady path (the current stream, known to the runner): one launch and one event record per
# run, both on the run's stream; the plan keeps that stream's event.
from cupy_backends.cuda.api import driver
launches = []
driver.launchKernel = lambda *a: launches.append(a[8])
records.clear()
for _ in range(3):
    runner()
assert len(launches) == 3 and records == launches, (records, launches)
assert any(ev is not None for ev in runner._dp._events.values())

# ---- capture: a memoized call pins what it used, a new layout is refused (nothing is allocated)
from cake_rt.launch import streams
from cake_rt.launch.streams import CaptureError
runtime.streamIsCapturing = lambda handle: runtime.streamCaptureStatusActive
pinned = streams.pinned_count()
records.clear()
ssd_call(); dsa_call()
assert records == [] and streams.pinned_count() > pinned      # pinned, no event recorded under capture
launches.clear()
runner()                                                       # a captured run: the launch, no event record
assert records == [] and len(launches) == 1, (records, launches)
for fn in (lambda: ssd_call(cu_seqlens=np.array([0, 50, L], np.int32)),
           lambda: dsa_call(cu_seqlens_q=np.array([0, 10, T], np.int32))):
    try:
        fn()
    except CaptureError:
        pass
    else:
        raise AssertionError("a new layout was accepted under capture")
print("ok")
'''


def run_with_cpu_stubs(script: str) -> None:
    """Run ``script`` in a fresh interpreter (its argv[1]: scripts/host_time.py, whose CPU stand-ins it installs);
    it must print "ok" last."""
    r = subprocess.run([sys.executable, "-c", script, str(ROOT / "scripts" / "host_time.py")], cwd=ROOT,
                       capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def test_memoized_calls_keep_every_check():
    run_with_cpu_stubs(SCRIPT)


# A small SSD problem (x, dt, A, B and the caller's y) for the scripts on the CPU stand-ins; needs BF16 imported.
SSD_SMALL = r'''
L, H, P, N = 256, 4, 64, 64
x = make(np.empty((1, L, H, P), BF16)); B = make(np.empty((1, L, 1, N), BF16))
dt = make(np.empty((1, L, H), np.float32)); A = make(np.empty(H, np.float32)); y = make(np.empty((1, L, H, P), BF16))
'''

HELD_SCRIPT = STUBS + r'''
import gc, os, weakref
import cake_rt
from cake_rt.interop import BF16
import cake_rt.ops.ssd as ssd
from cake_rt.launch import streams
from cake_rt.launch.streams import StreamHandle
''' + SSD_SMALL + r'''def call(stream):
    return cake_rt.ssd_combined(x, dt, A, B, B, 64, out=y, family="chunkpar", stream=stream)
def launched(p):
    pk = p.executable[1]
    return [pk._slots[pk.slot_names.index(n)] for n in pk.slot_names[-5:]]

# A released stream's state (its workspace: up to the cap) is freed once its work has run, whether or not a
# memoized problem ran on that stream last: the problem does not keep it alive.
owner = bytearray(64)
s2 = type(s).from_external(StreamHandle(id(owner)))
call(s2)
p = ssd._last_call[1]
ref = weakref.ref(streams.stream_states().get(streams.stream_key(0, s2.ptr)))
streams.release_stream(s2)
streams.collect()
gc.collect()
assert ref() is None, gc.get_referrers(ref())
call(s2)                                   # a later call on the handle gets a new state
assert launched(p)[0] == streams.stream_states().get(streams.stream_key(0, s2.ptr)).workspaces["ssd_chunkpar"].data.ptr

# A held table stays as recently used as with a lookup: a problem called on every step keeps its table while other
# layouts (more than the cache holds) come and go, and a graph captured later finds it.
cu = np.array([0, 100, L], np.int32)
def varlen(c):
    return cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=c, out=y, stream=s)
varlen(cu)
p_v = ssd._last_call[1]
t0 = p_v.held_table
for i in range(ssd._tables.size + 8):
    varlen(np.array([0, 101 + i, L], np.int32))
    varlen(cu)
assert p_v.held_table is t0 and not t0.retired

# The held parts belong to the executable they were made for: parts a racing call made for the previous plan (a
# switch changed in between) are not launched with the new plan's kernel and offsets.
call(s)
stale = p.held_stream
os.environ["CAKE_RT_SSD_WORKSPACE_CAP"] = str(ssd.workspace_bytes(p, 2))   # fewer units a slice: smaller offsets
call(s)
assert 0 < p.executable[0].slice_units < H, p.executable[0]
p.held_stream = stale                      # written by a call of the previous plan that finished last
call(s)
ws = streams.stream_states().get(streams.stream_key(0, s.ptr)).workspaces["ssd_chunkpar"].data.ptr
o1, o2, o3 = p.executable[3:6]
assert launched(p)[:4] == [ws, ws + o1, ws + o2, ws + o3], (launched(p), ws, p.executable[3:])
print("ok")
'''


def test_held_stream_parts_keep_nothing_alive_and_match_the_plan():
    run_with_cpu_stubs(HELD_SCRIPT)


def test_metadata_keys_tell_byte_orders_apart():
    """Host metadata of another byte order with the same bytes (and dtype char) holds other values: it must not
    find the problem validated for the first (a memo hit would run the first call's segments)."""
    import math

    import numpy as np

    from cake_rt.interop import add_host_metadata_key
    from cake_rt.ops import ssd

    a, b = np.array([0, 256, 65792], "<i4"), np.array([0, 65536, 65792], ">i4")
    assert a.tobytes() == b.tobytes() and a.dtype.char == b.dtype.char and a.tolist() != b.tolist()
    ka, kb = [], []
    assert add_host_metadata_key(ka, (None, a)) and add_host_metadata_key(kb, (None, b))
    assert ka != kb
    sig = [ssd._signature((None,) * 10, [], 64, None, cu, False, (0.0, math.inf), False, False, False, None, "auto")
           for cu in (a, b)]
    assert sig[0] is not None and sig[0] != sig[1]


def test_host_time_bench_rows_cpu():
    """``scripts/host_time.py --cpu --bench-rows`` builds every bench suite row's eager call with the bench's arguments
    (host metadata, caller outputs, workspace) and times each one."""
    import json

    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "host_time.py"), "--cpu", "--bench-rows", "--calls", "20"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stdout + r.stderr
    names = [f"ssd {row['name']}" for row in json.loads((ROOT / "cake_rt/bench/suites/ssd.json").read_text())["rows"]]
    dsa = json.loads((ROOT / "cake_rt/bench/suites/dsa.json").read_text())
    names += [f"dsa {row['name']} H{h}" for h in dsa["defaults"]["heads"] for row in dsa["rows"]]
    for name in names + ["python probe"]:
        assert any(line.startswith(name + " ") for line in r.stdout.splitlines()), (name, r.stdout)


def test_host_time_profile_names_a_call():
    """``--profile`` with a name that is not one of the calls is refused with the names, before any call is made."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "host_time.py"), "--cpu", "--bench-rows", "--profile",
                        "ssd nope"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and "'ssd nope' is not one of: ssd seed" in r.stderr, r.stdout + r.stderr


ENCODE_SCRIPT = STUBS + r'''
import cupy
from cupy_backends.cuda.api import runtime
import cake_rt
from cake_rt.interop import BF16
from cake_rt.launch import grid, tensormap

events, launches, allocs = [], [], []
runtime.eventRecord = lambda ev, handle: events.append(handle)
run = grid.PackedLaunch.run
grid.PackedLaunch.run = lambda self, *a, **k: (launches.append(self.tag), run(self, *a, **k))[1]
allocate = cupy.cuda.get_allocator()  # the stand-ins' allocator: every CuPy array's memory
cupy.cuda.set_allocator(lambda n: (allocs.append(n), allocate(n))[1])
L, H, P, N = 256, 4, 64, 64
x = make(np.empty((1, L, H, P), BF16)); z = make(np.empty((1, L, H, P), BF16))
B = make(np.empty((1, L, 1, N), BF16)); C = make(np.empty((1, L, 1, N), BF16))
dt = make(np.empty((1, L, H), np.float32)); A = make(np.empty(H, np.float32))
tensormap._encode = lambda *a: 1  # CUDA_ERROR_INVALID_VALUE from cuTensorMapEncodeTiled
for family in ("exact", "chunkpar"):
    for _ in range(2):  # a fresh call, then a memo hit: a refused map is never remembered
        try:
            cake_rt.ssd_combined(x, dt, A, B, C, 64, z=z, return_final_states=True, family=family, stream=s)
        except RuntimeError as exc:
            assert "cuTensorMapEncodeTiled" in str(exc), exc
        else:
            raise AssertionError("a refused tensor map was not reported")
assert not launches and not allocs and not events, (launches, allocs, events)
tensormap._encode = lambda *a: 0
y, st = cake_rt.ssd_combined(x, dt, A, B, C, 64, z=z, return_final_states=True, stream=s)
assert launches and allocs, (launches, allocs)
print("ok")
'''


def test_a_refused_tensor_map_raises_before_any_allocation_or_launch():
    run_with_cpu_stubs(ENCODE_SCRIPT)

# A prepared runner's call, and an eager call given its outputs and workspace (after its first call), launch the kernels
# they need and nothing else: no allocation, no memset, no copy (architecture.md, "Launching"); a fill, a re-zero or a
# pool allocation slipped into either path fails here.
QUIET_PATH_SCRIPT = STUBS + r'''
import cupy
from cupy_backends.cuda.api import driver, runtime
import cake_rt
from cake_rt.interop import BF16

seen = {"alloc": [], "memset": [], "memcpy": [], "launch": []}
allocate = cupy.cuda.get_allocator()
cupy.cuda.set_allocator(lambda n: (seen["alloc"].append(n), allocate(n))[1])
runtime.memsetAsync = lambda *a: seen["memset"].append(a)
runtime.memcpyAsync = lambda *a: seen["memcpy"].append(a)
driver.launchKernel = lambda *a: seen["launch"].append("launch")
driver.launchCooperativeKernel = lambda *a: seen["launch"].append("cooperative")

def quiet(fn, what, launches=1):
    """``fn()`` a second time after a first: only ``launches`` kernel launches, nothing else on the device."""
    fn()
    for v in seen.values():
        v.clear()
    fn()
    got = {k: len(v) for k, v in seen.items()}
    assert got == {"alloc": 0, "memset": 0, "memcpy": 0, "launch": launches}, (what, got)

T, Tkv, H, D, K = 64, 8192, 32, 64, 8
q = make(np.empty((T, H, D), BF16)); k = make(np.empty((Tkv, D), BF16)); w = make(np.empty((T, H), np.float32))
idx = make(np.empty((T, K), np.int32)); sc = make(np.empty((T, K), np.float32))
cu_q, cu_k = np.array([0, 20, T], np.int32), np.array([0, 3000, Tkv], np.int32)
for key_split in (None, 256):
    for meta in ({}, dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)):
        need = cake_rt.dsa_indexer_workspace_bytes(q, k, w, K, key_split=key_split, **meta)
        ws = make(np.empty(max(need, 16), np.uint8))
        r = cake_rt.prepare_dsa_indexer_det_topk(q, k, w, K, indices=idx, scores=sc, workspace=ws, key_split=key_split,
                                                 stream=s, **meta)
        quiet(r, ("prepared", key_split, sorted(meta)), r.launches_per_call)
        quiet(lambda: cake_rt.dsa_indexer_det_topk(q, k, w, K, indices=idx, scores=sc, workspace=ws,
                                                   key_split=key_split, stream=s, **meta),
              ("eager with workspace", key_split, sorted(meta)))
print("ok")
'''


def test_prepared_and_workspace_given_calls_only_launch():
    run_with_cpu_stubs(QUIET_PATH_SCRIPT)


# A DSA call refused for its caller-owned workspace allocates and uploads nothing (the size is checked on the host
# plan, before its work table goes to the device), eager or prepared, and under CUDA graph capture it is the same
# ``ValueError`` naming ``workspace`` (not a capture error about the upload it never needed).
WORKSPACE_SCRIPT = STUBS + r'''
import cupy
from cupy_backends.cuda.api import runtime
import cake_rt
import cake_rt.ops.dsa as dsa
from cake_rt.interop import BF16

uploads = []
runtime.memcpyAsync = lambda *a: uploads.append(a)
allocs = []
allocate = cupy.cuda.get_allocator()  # the stand-ins' allocator: every CuPy array's memory
def counting_allocate(n):
    allocs.append(n)
    return allocate(n)

T, Tkv, H, D = 64, 8192, 32, 64
q = make(np.empty((T, H, D), BF16)); k = make(np.empty((Tkv, D), BF16)); w = make(np.empty((T, H), np.float32))
need = cake_rt.dsa_indexer_workspace_bytes(q, k, w, 8, key_split=256)
assert need > 0, need
small = make(np.empty(need - 16, np.uint8))
idx = make(np.empty((T, 8), np.int32)); sc = make(np.empty((T, 8), np.float32))

def refused_before_upload(fn):
    uploads.clear(); allocs.clear()
    cupy.cuda.set_allocator(counting_allocate)
    try:
        refused(fn, "workspace: expected at least")
    finally:
        cupy.cuda.set_allocator(allocate)
    assert uploads == [] and allocs == [], (uploads, allocs)

refused_before_upload(lambda: cake_rt.dsa_indexer_det_topk(q, k, w, 8, key_split=256, workspace=small, indices=idx,
                                                           scores=sc, stream=s))
refused_before_upload(lambda: cake_rt.prepare_dsa_indexer_det_topk(q, k, w, 8, key_split=256, workspace=small,
                                                                   indices=idx, scores=sc, stream=s))
assert len(dsa._plan_cache) == 0  # nothing cached by the refused calls
runtime.streamIsCapturing = lambda handle: runtime.streamCaptureStatusActive
refused_before_upload(lambda: cake_rt.dsa_indexer_det_topk(q, k, w, 8, key_split=256, workspace=small, indices=idx,
                                                           scores=sc, stream=s))
print("ok")
'''


def test_dsa_small_workspace_is_refused_before_any_upload():
    run_with_cpu_stubs(WORKSPACE_SCRIPT)


# The call's stream as a stand-in that says whether it is the current one (entered), after the CPU stubs.
TRACKED_STREAM = STUBS + r'''import cupy
import cake_rt
from cake_rt.interop import BF16
from cake_rt.launch.streams import StreamHandle

class Tracked(type(s)):
    """The call's stream: says whether it is the current one (entered)."""
    inside = 0
    def __enter__(self):
        Tracked.inside += 1
        return self
    def __exit__(self, *exc):
        Tracked.inside -= 1
        return False
owner = bytearray(64)
st = Tracked.from_external(StreamHandle(id(owner)))
'''


# Device metadata stand-ins (``meta(values)``) whose copy to the host appends to ``reads`` whether it was made on the
# call's stream ``st``, after TRACKED_STREAM.
DEVICE_METADATA = TRACKED_STREAM + r'''assert type(st) is Tracked

reads = []
class Meta(cupy.ndarray):
    """Device metadata whose copy to the host says whether it was made on the call's stream."""
    values = {}  # data pointer -> the host values
    __module__ = "cupy.stand_in"  # a CuPy array to is_device_metadata (its interface property needs a driver)

    def get(self, stream=None, *a, **k):
        reads.append(stream is st or (stream is None and Tracked.inside > 0))
        return Meta.values[self.data.ptr].reshape(self.shape)

def meta(values):
    m = make(np.asarray(values, np.int32)).view(Meta)
    Meta.values[m.data.ptr] = np.asarray(values, np.int32)
    return m
'''

METADATA_STREAM_SCRIPT = DEVICE_METADATA + r'''
L, H, P, N = 256, 4, 64, 64
x = make(np.empty((1, L, H, P), BF16)); B = make(np.empty((1, L, 1, N), BF16))
dt = make(np.empty((1, L, H), np.float32)); A = make(np.empty(H, np.float32))
cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=meta([0, 100, L]), stream=st)
cake_rt.ssd_combined(x, dt, A, B, B, 64, seq_idx=meta(np.repeat([0, 1], [100, L - 100])[None]), stream=st)
assert reads == [True, True], reads
# A refused out with device metadata: the call's stream is not left current behind the error.
for bad_out in ([0], make(np.empty((1, L, H, P + 1), BF16))):
    try:
        cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=meta([0, 100, L]), out=bad_out, stream=st)
    except (TypeError, ValueError) as e:
        assert str(e).startswith("out"), e
    else:
        raise AssertionError("a bad out was accepted")
    assert Tracked.inside == 0

T, Tkv, Hh, D, K = 64, 300, 32, 128, 16
q = make(np.empty((T, Hh, D), BF16)); k = make(np.empty((Tkv, D), BF16)); w = make(np.empty((T, Hh), np.float32))
idx = make(np.empty((T, K), np.int32)); sc = make(np.empty((T, K), np.float32))
reads.clear()
cake_rt.dsa_indexer_det_topk(q, k, w, K, cu_seqlens_q=meta([0, 10, T]), cu_seqlens_k=meta([0, 100, Tkv]),
                             q_causal_offsets=meta([90, 200]), stream=st)
assert reads == [True] * 3, reads
reads.clear()
cake_rt.prepare_dsa_indexer_det_topk(q, k, w, K, cu_seqlens_q=meta([0, 10, T]), cu_seqlens_k=meta([0, 100, Tkv]),
                                     indices=idx, scores=sc, stream=st)
assert reads == [True] * 2, reads

# A CUDA tensor (PyTorch) too: through DLPack, on the call's stream, not through .cpu() on PyTorch's current stream.
import cake_rt.interop as interop
class CudaTensor:
    is_cuda = True
    def __init__(self, values):
        self.dev = meta(values)
    def detach(self):
        return self
    def cpu(self):
        raise AssertionError("read on PyTorch's current stream")
    def __dlpack__(self, stream=None):
        raise AssertionError("the stand-in is taken by as_device_array below")
real = interop.as_device_array
interop.as_device_array = lambda x, name, **kw: x.dev if isinstance(x, CudaTensor) else real(x, name, **kw)
reads.clear()
cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=CudaTensor([0, 100, L]), stream=st)
assert reads == [True], reads
print("ok")
'''


def test_device_metadata_is_read_on_the_call_stream():
    """Device metadata (cu_seqlens, seq_idx, q_causal_offsets) is copied to the host on the call's stream (the
    prepare stream for a runner), ordered after the caller's work there: CuPy's ``get`` copies on the current stream,
    which a non-blocking call stream does not wait for (the copy could read metadata a kernel still writes)."""
    run_with_cpu_stubs(METADATA_STREAM_SCRIPT)


DLPACK_STREAM_SCRIPT = TRACKED_STREAM + r'''
exports = []  # (argument, the consumer stream named to the producer)
class CudaTensor:
    """A PyTorch-style CUDA tensor: DLPack on device type 2, no CUDA array interface. The producer orders its pending
    work on the tensor before the stream its consumer names (PyTorch: an event on its current stream, waited for on
    the named one)."""
    def __init__(self, name, host):
        self.name, self.inner = name, make(host)
    def __dlpack_device__(self):
        return (2, 0)
    def __dlpack__(self, stream=None, **kw):
        exports.append((self.name, stream))
        return self.inner

def from_dlpack(x, **kw):  # CuPy's consumer: names its current stream of the array's device to the producer
    return x.__dlpack__(stream=st.ptr if Tracked.inside else s.ptr)
cupy.from_dlpack = from_dlpack

def check(what):
    assert exports and all(stream == st.ptr for _, stream in exports), (what, exports)
    assert Tracked.inside == 0, what  # the caller's current stream restored
    exports.clear()

L, H, P, N = 256, 4, 64, 64
t = lambda name, shape, dt: CudaTensor(name, np.empty(shape, dt))
x = t("x", (1, L, H, P), BF16); B = t("B", (1, L, 1, N), BF16); C = t("C", (1, L, 1, N), BF16)
dt_ = t("dt", (1, L, H), np.float32); A = t("A", (H,), np.float32); y = t("out", (1, L, H, P), BF16)
cake_rt.ssd_combined(x, dt_, A, B, C, 64, out=y, stream=st)
check("ssd: every tensor")
names = lambda: sorted(n for n, _ in exports)
xc = make(np.empty((1, L, H, P), BF16))  # x a CuPy array, the other arguments tensors: x gives the device
cake_rt.ssd_combined(xc, dt_, A, B, C, 64, out=y, stream=st)
assert names() == ["A", "B", "C", "dt", "out"], names()
check("ssd: x a CuPy array")
for fam in ("exact", "chunkpar"):
    cake_rt.ssd_combined(x, dt_, A, B, C, 64, family=fam, stream=st)
    check(f"ssd: {fam}")
# A refused argument leaves the caller's stream current as it was.
try:
    cake_rt.ssd_combined(x, dt_, A, B, C, 64, out=t("out", (1, L, H, P + 1), BF16), stream=st)
except ValueError as e:
    assert str(e).startswith("out:"), e
else:
    raise AssertionError("a bad out was accepted")
exports.clear()
assert Tracked.inside == 0

T, Tkv, Hh, D, K = 64, 300, 32, 128, 16
q = t("q", (T, Hh, D), BF16); k = t("k", (Tkv, D), BF16); w = t("weights", (T, Hh), np.float32)
idx = t("indices", (T, K), np.int32); sc = t("scores", (T, K), np.float32)
cake_rt.dsa_indexer_det_topk(q, k, w, K, indices=idx, scores=sc, stream=st)
assert names() == ["indices", "k", "q", "scores", "weights"], names()
check("dsa eager")
cake_rt.dsa_indexer_det_topk(make(np.empty((T, Hh, D), BF16)), k, w, K, stream=st)
check("dsa eager, q a CuPy array")
runner = cake_rt.prepare_dsa_indexer_det_topk(q, k, w, K, indices=idx, scores=sc, stream=st)
check("dsa prepare")
# Every array a CuPy array: nothing exported, no stream entered for the intake.
cake_rt.dsa_indexer_det_topk(make(np.empty((T, Hh, D), BF16)), make(np.empty((Tkv, D), BF16)),
                             make(np.empty((T, Hh), np.float32)), K, stream=st)
assert not exports
print("ok")
'''


def test_dlpack_arrays_are_exported_to_the_call_stream():
    """An array taken through DLPack (a PyTorch or JAX CUDA array) is exported naming the call's stream as the
    consumer's (the producer orders its pending work on the array before that stream), not CuPy's current one: with
    ``stream=`` a non-blocking stream, a kernel there would otherwise not wait for the producer's writes of an input
    (or its reads of an output), and under ``torch.cuda.graph`` the wait lands on the legacy default stream."""
    run_with_cpu_stubs(DLPACK_STREAM_SCRIPT)


NO_COOPERATIVE_SCRIPT = STUBS + r'''import functools, os
from cupy_backends.cuda.api import driver
from cake_rt.launch import arch
import cake_rt
from cake_rt.interop import BF16
from cake_rt.launch.grid import CooperativeLaunchError

launches = []
driver.launchCooperativeKernel = lambda *a: launches.append("cooperative")
driver.launchKernel = lambda *a: launches.append("ordinary")
# A long single sequence with few heads: the problem the cost model gives to the chunk-parallel family.
L, H, P, N = 4096, 4, 64, 128
x = make(np.empty((1, L, H, P), BF16)); B = make(np.empty((1, L, 1, N), BF16))
dt = make(np.empty((1, L, H), np.float32)); A = make(np.empty(H, np.float32)); y = make(np.empty((1, L, H, P), BF16))
assert cake_rt.ssd_plan(x, dt, A, B, B, 64).family == "chunkpar"  # the premise: chunk-parallel where it can run

real_info = arch._read_device_info
def no_cooperative(index):
    return arch.DeviceInfo(**{**real_info(index).__dict__, "cooperative_launch": False})
occupancy = driver.occupancyMaxActiveBlocksPerMultiprocessor
for why, patch in (("does not support cooperative launches",
                    lambda: setattr(arch, "_read_device_info", functools.lru_cache(maxsize=None)(no_cooperative))),
                   ("occupancy 0", lambda: setattr(driver, "occupancyMaxActiveBlocksPerMultiprocessor", lambda *a: 0))):
    arch._read_device_info = real_info
    driver.occupancyMaxActiveBlocksPerMultiprocessor = occupancy
    patch()
    # A new problem each round (another length), so no plan made before the patch is reused.
    L += 64
    x = make(np.empty((1, L, H, P), BF16)); B = make(np.empty((1, L, 1, N), BF16))
    dt = make(np.empty((1, L, H), np.float32)); y = make(np.empty((1, L, H, P), BF16))
    for mode in ("auto", "always"):
        os.environ["CAKE_RT_SSD_CHUNK_PARALLEL"] = mode
        plan = cake_rt.ssd_plan(x, dt, A, B, B, 64)
        assert plan.family == "exact" and "cooperative launch impossible" in plan.reason and why in plan.reason, plan
        launches.clear()
        assert cake_rt.ssd_combined(x, dt, A, B, B, 64, out=y, stream=s) is y
        assert launches == ["ordinary"], (why, mode, launches)
    os.environ.pop("CAKE_RT_SSD_CHUNK_PARALLEL")
    launches.clear()
    try:
        cake_rt.ssd_combined(x, dt, A, B, B, 64, family="chunkpar", out=y, stream=s)
    except CooperativeLaunchError as e:
        assert str(e).startswith("family='chunkpar': a cooperative launch is impossible here") and why in str(e), e
    else:
        raise AssertionError(f"family='chunkpar' ran without a cooperative launch ({why})")
    assert launches == [], launches  # refused before any launch: the caller's out untouched
print("ok")
'''


def test_no_cooperative_launch_falls_back_to_the_exact_scan_or_refuses_chunkpar():
    """ssd_combined.md, the chunk-parallel launch: where a cooperative launch is impossible (a device without it,
    occupancy 0), ``auto`` (and CAKE_RT_SSD_CHUNK_PARALLEL=always) runs the exact scan and the plan says why; an
    explicit ``family='chunkpar'`` raises before anything is launched. End to end on the CPU stand-ins
    (``select_family``'s own test covers the rule alone)."""
    run_with_cpu_stubs(NO_COOPERATIVE_SCRIPT)


CAPTURE_METADATA_SCRIPT = DEVICE_METADATA + r'''
from cupy_backends.cuda.api import runtime
import cake_rt.cp as cp
from cake_rt.launch.streams import CaptureError
from cake_rt.ops.dsa import visible_pairs

capturing = set()  # the handles whose stream is capturing
def is_capturing(handle):
    if handle in capturing:
        return runtime.streamCaptureStatusActive
    if handle == 0 and "blocking" in capturing:  # a blocking stream's capture, which the legacy stream would join
        raise runtime.CUDARuntimeError(906)
    return runtime.streamCaptureStatusNone
runtime.streamIsCapturing = is_capturing

def refused_unread(fn, name):
    """``fn()`` is the capture's ValueError naming ``name``, and nothing was copied to the host."""
    reads.clear()
    refused(fn, f"{name}: device")
    assert reads == [], (name, reads)

Meta.device = property(lambda self: cupy.cuda.Device(0))  # the stand-in device: entering it needs no driver
# Device data that is CUDA through DLPack alone (cp.py asks a CuPy array's interface property, which needs a driver).
class DlpackMeta:
    def __init__(self, values):
        self.dev = meta(values)
    def __dlpack_device__(self):
        return (2, 0)
    def __dlpack__(self, stream=None, **kw):
        return self.dev
cupy.from_dlpack = lambda x, **kw: x.__dlpack__()

L, H, P, N = 256, 4, 64, 64
x = make(np.empty((1, L, H, P), BF16)); B = make(np.empty((1, L, 1, N), BF16))
dt = make(np.empty((1, L, H), np.float32)); A = make(np.empty(H, np.float32))
sidx = np.repeat([0, 1], [100, L - 100])[None].astype(np.int32)
T, Tkv, Hh, D, K = 64, 300, 32, 128, 16
q = make(np.empty((T, Hh, D), BF16)); k = make(np.empty((Tkv, D), BF16)); w = make(np.empty((T, Hh), np.float32))
idx = make(np.empty((T, K), np.int32)); sc = make(np.empty((T, K), np.float32))
cu_q, cu_k, off = [0, 10, T], [0, 100, Tkv], [90, 200]
dsa_meta = lambda on_device: {n: meta(v) if n in on_device else np.array(v, np.int32) for n, v in
                              (("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k), ("q_causal_offsets", off))}
lay = cp.cp_zigzag_layout([8, 16], 2, 0)

# ssd_plan reads device metadata on its stream= (it read on CuPy's current stream and ignored stream=).
reads.clear()
plan = cake_rt.ssd_plan(x, dt, A, B, B, 64, cu_seqlens=meta([0, 100, L]), stream=st)
cake_rt.ssd_plan(x, dt, A, B, B, 64, seq_idx=meta(sidx), stream=st)
assert reads == [True, True], reads
assert Tracked.inside == 0

# The call's stream capturing: each entry that reads device metadata refuses it before any copy, naming it; host
# metadata plans and runs as before.
capturing.add(st.ptr)
refused_unread(lambda: cake_rt.ssd_plan(x, dt, A, B, B, 64, cu_seqlens=meta([0, 100, L]), stream=st), "cu_seqlens")
refused_unread(lambda: cake_rt.ssd_plan(x, dt, A, B, B, 64, seq_idx=meta(sidx), stream=st), "seq_idx")
assert cake_rt.ssd_plan(x, dt, A, B, B, 64, cu_seqlens=np.array([0, 100, L], np.int32), stream=st).family == plan.family
refused_unread(lambda: cake_rt.ssd_combined(x, dt, A, B, B, 64, seq_idx=meta(sidx), stream=st), "seq_idx")
for name in ("cu_seqlens_k", "q_causal_offsets"):
    refused_unread(lambda: cake_rt.dsa_indexer_det_topk(q, k, w, K, **dsa_meta({name}), stream=st), name)
assert Tracked.inside == 0
# The entries without stream= read on CuPy's current stream (``s`` here): the call stream's capture is not theirs.
assert cake_rt.dsa_indexer_workspace_bytes(q, k, w, K, **dsa_meta({"cu_seqlens_q", "cu_seqlens_k"})) >= 0
assert visible_pairs(meta(cu_q), meta(cu_k), meta(off)) > 0
assert cp.cp_zigzag_layout(DlpackMeta([8, 16]), 2, 0).cu_seqlens_q.tolist() == lay.cu_seqlens_q.tolist()
capturing.add(s.ptr)
refused_unread(lambda: cake_rt.dsa_indexer_workspace_bytes(q, k, w, K, **dsa_meta({"cu_seqlens_k"})), "cu_seqlens_k")
assert cake_rt.dsa_indexer_workspace_bytes(q, k, w, K, **dsa_meta(())) >= 0
refused_unread(lambda: visible_pairs(cu_q, cu_k, meta(off)), "q_causal_offsets")
assert visible_pairs(cu_q, cu_k, off) > 0
refused_unread(lambda: cp.cp_zigzag_layout(DlpackMeta([8, 16]), 2, 0), "doc_lens")
refused(lambda: lay.to_global_keys(DlpackMeta(np.zeros(4))), "indices: device ids cannot be range-checked")
assert lay.to_global_keys(np.zeros((4, 2), np.int32)).shape == (4, 2)

# The legacy default stream while a blocking stream captures (the driver answers cudaErrorStreamCaptureImplicit): a
# copy there would join that capture; prepare, which writes and waits on its stream, is refused too.
capturing.clear(); capturing.add("blocking")
legacy = type(s).from_external(StreamHandle(0))  # the legacy default stream (a stand-in: entering it is a no-op)
refused_unread(lambda: cake_rt.ssd_plan(x, dt, A, B, B, 64, cu_seqlens=meta([0, 100, L]), stream=legacy), "cu_seqlens")
refused_unread(lambda: cake_rt.dsa_indexer_det_topk(q, k, w, K, **dsa_meta({"cu_seqlens_q"}), stream=legacy),
               "cu_seqlens_q")
try:
    cake_rt.prepare_dsa_indexer_det_topk(q, k, w, K, **dsa_meta(()), indices=idx, scores=sc, stream=legacy)
except CaptureError:
    pass
else:
    raise AssertionError("prepare ran on the legacy stream joined to a capture")
capturing.clear()
assert cake_rt.ssd_plan(x, dt, A, B, B, 64, cu_seqlens=meta([0, 100, L]), stream=legacy).family == plan.family

# Metadata that is CUDA through DLPack alone (no CUDA array interface, no is_cuda: DlpackMeta) is device metadata:
# refused under capture (it was taken for host metadata and exported on CuPy's current stream, then copied there).
from cake_rt.interop import is_device_metadata
assert is_device_metadata(DlpackMeta([0, 100, L]))
capturing.add(st.ptr)
refused_unread(lambda: cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=DlpackMeta([0, 100, L]), stream=st),
               "cu_seqlens")
capturing.clear()
reads.clear()
cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=DlpackMeta([0, 100, L]), stream=st)
assert reads == [True], reads
print("ok")
'''


# cuThreadExchangeStreamCaptureMode's stand-in: this thread's capture mode, 0 (global) until exchanged.
CAPTURE_MODE_STAND_IN = r"""
import ctypes, threading
from cake_rt.launch import streams
_modes = threading.local()
def mode():
    return getattr(_modes, "mode", 0)
def exchange(ptr):
    cell = ctypes.cast(ptr, ctypes.POINTER(ctypes.c_int)).contents
    _modes.mode, cell.value = cell.value, mode()
    return 0
streams._exchange_capture_mode = exchange
"""

RELAXED_COPY_SCRIPT = DEVICE_METADATA + CAPTURE_MODE_STAND_IN + r'''
import cake_rt.cp as cp
from cake_rt.ops.dsa import visible_pairs

copy_modes = []  # this thread's capture mode at each device-to-host copy of metadata
real_get = Meta.get
def get(self, *a, **k):
    copy_modes.append(mode())
    return real_get(self, *a, **k)
Meta.get = get
Meta.device = property(lambda self: cupy.cuda.Device(0))
class DlpackMeta:  # device data that is CUDA through DLPack alone (cp.py asks a CuPy array's interface property)
    def __init__(self, values):
        self.dev = meta(values)
    def __dlpack_device__(self):
        return (2, 0)
    def __dlpack__(self, stream=None, **kw):
        return self.dev
cupy.from_dlpack = lambda x, **kw: x.__dlpack__()

def copies(fn, n, before=0):
    """``fn()`` copies ``n`` device arrays to the host, each in relaxed mode (2), and leaves this thread's mode as it
    found it (``before``)."""
    _modes.mode = before
    copy_modes.clear()
    out = fn()
    assert copy_modes == [2] * n, copy_modes
    assert mode() == before, mode()
    return out

L, H, P, N = 256, 4, 64, 64
x = make(np.empty((1, L, H, P), BF16)); B = make(np.empty((1, L, 1, N), BF16))
dt = make(np.empty((1, L, H), np.float32)); A = make(np.empty(H, np.float32))
sidx = np.repeat([0, 1], [100, L - 100])[None].astype(np.int32)
T, Tkv, Hh, D, K = 64, 300, 32, 128, 16
q = make(np.empty((T, Hh, D), BF16)); k = make(np.empty((Tkv, D), BF16)); w = make(np.empty((T, Hh), np.float32))
idx = make(np.empty((T, K), np.int32)); sc = make(np.empty((T, K), np.float32))
cu_q, cu_k, off = [0, 10, T], [0, 100, Tkv], [90, 200]
dm = lambda: dict(cu_seqlens_q=meta(cu_q), cu_seqlens_k=meta(cu_k), q_causal_offsets=meta(off))

# Every entry's metadata copy, the mode restored after (global, and thread-local where the caller had set it).
for before in (0, 1):
    copies(lambda: cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=meta([0, 100, L]), stream=st), 1, before)
    copies(lambda: cake_rt.ssd_combined(x, dt, A, B, B, 64, seq_idx=meta(sidx), stream=st), 1, before)
    copies(lambda: cake_rt.ssd_plan(x, dt, A, B, B, 64, cu_seqlens=meta([0, 100, L]), stream=st), 1, before)
    copies(lambda: cake_rt.dsa_indexer_det_topk(q, k, w, K, **dm(), stream=st), 3, before)
    copies(lambda: cake_rt.prepare_dsa_indexer_det_topk(q, k, w, K, **dm(), indices=idx, scores=sc, stream=st), 3,
           before)
    copies(lambda: cake_rt.dsa_indexer_workspace_bytes(q, k, w, K, **dm()), 3, before)
    copies(lambda: visible_pairs(meta(cu_q), meta(cu_k), meta(off)), 3, before)
    lay = copies(lambda: cp.cp_zigzag_layout(DlpackMeta([8, 16]), 2, 0), 1, before)
    assert lay.cu_seqlens_q.tolist() == cp.cp_zigzag_layout([8, 16], 2, 0).cu_seqlens_q.tolist()

# A copy that fails (a device fault surfacing at the copy's wait) restores the mode behind the error.
class Broken(Exception):
    pass
def broken_get(self, *a, **k):
    copy_modes.append(mode())
    raise Broken
Meta.get = broken_get
_modes.mode = 0
copy_modes.clear()
try:
    cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=meta([0, 100, L]), stream=st)
except Broken:
    pass
else:
    raise AssertionError("the copy's error was lost")
assert copy_modes == [2] and mode() == 0, (copy_modes, mode())
Meta.get = get

# to_global_keys: its range check (a reduction and a copy on the current stream) in relaxed mode, restored after.
seen = []
def check_local_ids(arr, num_keys, minmax):
    seen.append(mode())
    raise Broken
cp._check_local_ids = check_local_ids
_modes.mode = 0
try:
    lay.to_global_keys(DlpackMeta(np.zeros((4, 2), np.int32)))
except Broken:
    pass
assert seen == [2] and mode() == 0, (seen, mode())

# collect's event queries too: a capture on another stream would refuse them and be invalidated.
class QueriedEvent:
    @property
    def done(self):
        seen.append(mode())
        return True
g = streams.Guarded()
g._events[1] = QueriedEvent()
seen.clear()
_modes.mode = 0
g.retire()  # collects at once
assert seen == [2, 2] and mode() == 0 and streams.retired_count() == 0, (seen, mode())  # asked twice: as collect does

# Host metadata copies nothing and exchanges no mode (once a first call has built the plan, whose upload and program's
# occupancy are made in relaxed mode: tests/test_capture_beside_cpu.py).
def host_metadata_calls():
    cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=np.array([0, 100, L], np.int32), stream=st)
    cake_rt.dsa_indexer_det_topk(q, k, w, K, cu_seqlens_q=np.array(cu_q, np.int32), cu_seqlens_k=cu_k, stream=st)
host_metadata_calls()
calls = []
streams._exchange_capture_mode = lambda ptr: calls.append(ptr) or 0
host_metadata_calls()
assert calls == [], calls

# Without the driver library the mode is not exchanged and the copy is made as before.
streams._exchange_capture_mode = False
copy_modes.clear()
cake_rt.ssd_combined(x, dt, A, B, B, 64, cu_seqlens=meta([0, 100, L]), stream=st)
assert copy_modes == [0], copy_modes
print("ok")
'''


def test_device_metadata_is_copied_in_relaxed_capture_mode():
    """A device-to-host copy of metadata on a stream that is not capturing, while this thread holds a global or
    thread-local capture on another stream, or another thread a global one (``torch.cuda.graph``'s default): the driver
    refuses it as "potentially unsafe" in this thread's default mode and invalidates that capture. Every entry makes its
    copies in relaxed mode (``streams.relaxed_capture_mode``, through ``interop.copy_to_host``) and restores the
    thread's own mode after, also when the copy raises; ``collect``'s event queries likewise; host metadata exchanges
    nothing. Fails on main (the copies are made in the thread's mode). The GPU side: ``tests/test_capture_metadata_gpu.py`` (``test_*_beside_*``)."""
    run_with_cpu_stubs(RELAXED_COPY_SCRIPT)


def test_device_metadata_under_capture_is_refused_by_every_entry():
    """architecture.md (streams, graphs): a clear error, never a broken capture. Every public entry that copies device
    metadata to the host (``ssd_combined``, ``ssd_plan``, the DSA eager call, ``dsa_indexer_workspace_bytes``,
    ``visible_pairs``, ``cp_zigzag_layout``'s ``doc_lens``, ``CPZigzagLayout.to_global_keys``'s range check) raises a
    ``ValueError`` naming the argument, before any copy, when the stream it copies on is capturing a CUDA graph (the
    call's ``stream=``, else CuPy's current stream), or is the legacy default stream that a blocking stream's capture
    would join; host metadata works under capture. ``ssd_plan`` reads on its ``stream=``."""
    run_with_cpu_stubs(CAPTURE_METADATA_SCRIPT)
