"""Host metadata at the edges of the contracts (CPU only): what the library reads from a caller's cu_seqlens /
offsets is its own copy, so a caller that rewrites its array in place between calls never changes the plan of a
call it made with other values."""
import numpy as np
import pytest

from cake_rt import interop

pytest.importorskip("cupy")


def test_host_metadata_is_a_copy_of_the_callers_array():
    a = np.array([0, 20, 64], np.int32)
    out = interop.as_host_int32(a, "cu_seqlens_q")
    assert out.tolist() == [0, 20, 64] and not np.shares_memory(out, a)
    a[1] = 50
    assert out.tolist() == [0, 20, 64]


# A memoized DSA problem plans again from its metadata when its plan is evicted, under the key of the values it was
# validated with: from a view of the caller's array it would plan the values the caller wrote there since, and run
# that plan for a call with the old values (double-buffered metadata: buffer A rewritten, buffer B holding A's
# previous values).
from test_host_path_cpu import STUBS, run_with_cpu_stubs  # noqa: E402

STALE_PLAN = STUBS + r'''
import cake_rt
from cake_rt.interop import BF16
import cake_rt.ops.dsa as dsa
T, Tkv = 64, 300
q = make(np.empty((T, 32, 128), BF16)); k = make(np.empty((Tkv, 128), BF16)); w = make(np.empty((T, 32), np.float32))
idx = make(np.empty((T, 16), np.int32)); sc = make(np.empty((T, 16), np.float32))
ck = np.array([0, 100, Tkv], np.int32)
launched = []
run = dsa._run
dsa._run = lambda dp, *a: (launched.append(dp.plan), run(dp, *a))
def call(cq):
    cake_rt.dsa_indexer_det_topk(q, k, w, 16, cu_seqlens_q=cq, cu_seqlens_k=ck, indices=idx, scores=sc, stream=s)
    return launched[-1].units.copy()
buf_a = np.array([0, 20, T], np.int32)
buf_b = buf_a.copy()
want = call(buf_a)
buf_a[1] = 50
assert not np.array_equal(call(buf_a), want)
dsa._plan_cache.clear()          # as 64 other layouts would: every plan evicted
assert np.array_equal(call(buf_b), want), "the plan of [0, 20, T] was made from [0, 50, T]"
assert np.array_equal(call(np.array([0, 20, T], np.int32)), want)
print("ok")
'''


def test_a_rewritten_metadata_array_never_changes_the_plan_of_earlier_values():
    run_with_cpu_stubs(STALE_PLAN)


class _HostDLPack:
    """Stands in for a JAX array on the CPU: DLPack on device type 1 (CPU), no CUDA array interface (JAX raises
    AttributeError for it off the GPU), the module name of a JAX array."""
    __module__ = "jaxlib.xla_extension"

    def __init__(self, values, dtype=np.int32):
        self._a = np.asarray(values, dtype)

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_host_dlpack_metadata_is_read_on_the_host():
    src = _HostDLPack([0, 5, 9])
    assert not interop.is_device_metadata(src)
    out = interop.as_host_int32(src, "cu_seqlens")
    assert out.dtype == np.int32 and out.tolist() == [0, 5, 9] and not np.shares_memory(out, src._a)
    with pytest.raises(TypeError, match="^cu_seqlens: expected an integer dtype"):
        interop.as_host_int32(_HostDLPack([0.0, 1.0], np.float32), "cu_seqlens")
    with pytest.raises(TypeError, match="^q: expected a CUDA device array, got a _HostDLPack on a non-CUDA device"):
        interop.as_device_array(src, "q")  # a tensor argument on the host is still refused


class _Shape:
    def __init__(self, *shape):
        self.shape = shape


@pytest.mark.parametrize("T, Tkv, match", [(2**30, 100, "^q: T \\(queries\\)"), (100, 2**30, "^k: Tkv \\(keys\\)")])
def test_dsa_rows_past_the_int32_ids_are_refused_before_planning(monkeypatch, T, Tkv, match):
    """The sizing entry refuses what the eager call refuses, naming the argument, before anything is planned (the
    plan's host arrays hold a value per query: gigabytes for such a T)."""
    import cupy

    import cake_rt.ops.dsa as dsa
    from cake_rt.interop import BF16

    def no(*a, **k):
        raise AssertionError("planned")
    monkeypatch.setattr(dsa, "_device_facts", no)
    monkeypatch.setattr(dsa, "plan_units", no)
    with pytest.raises(ValueError, match=match):
        dsa.dsa_indexer_workspace_bytes(_Shape(T, 32, 128), _Shape(Tkv, 128), _Shape(T, 32), 2048)
    mem = cupy.cuda.UnownedMemory(1 << 32, 1 << 40, None, device_id=0)

    def header(shape, dtype, offset):  # a CuPy array header over an address never touched
        return cupy.ndarray(shape, dtype=dtype, memptr=cupy.cuda.MemoryPointer(mem, offset))
    with pytest.raises(ValueError, match=match):
        dsa.dsa_indexer_det_topk(header((T, 32, 128), BF16, 0), header((Tkv, 128), BF16, 1 << 38),
                                 header((T, 32), np.float32, 1 << 39), 2048)
