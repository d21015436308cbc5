"""Robustness without a GPU (issue #9): the disk cache (permissions, corrupt / truncated / planted /
unreadable files, atomic writes), argument checks that must fire before any launch (alignment, aliasing,
writability, requires_grad, stream handles), per-stream state keys, retirement of guarded memory, host
metadata overflow. Device arrays are stand-ins: CuPy arrays over unowned addresses (never dereferenced).
"""
import os
import stat
import threading
import warnings

import numpy as np
import pytest

import cake_rt.launch.compile as cc
from cake_rt.interop import BF16

SRC = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] += 2.0f; }'


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(d))
    monkeypatch.setattr(cc, "_cubin_cache", {})
    monkeypatch.setattr(cc, "_warned_dirs", set(), raising=False)
    return d


def _compile():
    return cc.compile_cubin(SRC, name="k.cu", target="sm_80")


def _only_file(d):
    files = [p for p in d.iterdir()]
    assert len(files) == 1, files
    return files[0]


# ----------------------------------------------------------------------------------------------------
# disk cache
# ----------------------------------------------------------------------------------------------------

def test_cache_dir_is_created_0700_whatever_the_umask(cache):
    old = os.umask(0)
    try:
        _compile()
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_group_or_world_writable_dir_is_bypassed_with_a_warning(cache, mode):
    cache.mkdir()
    os.chmod(cache, mode)
    with pytest.warns(cc.CacheWarning, match="writable by group or others"):
        data = _compile()
    assert data[:4] == b"\x7fELF"
    assert list(cache.iterdir()) == []  # nothing written to (or read from) an untrusted directory


def test_dir_owned_by_another_user_is_bypassed(cache, monkeypatch):
    cache.mkdir(mode=0o700)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(cache).st_uid + 1)
    with pytest.warns(cc.CacheWarning, match="owned by uid"):
        _compile()
    assert list(cache.iterdir()) == []


def _corrupt(path, how):
    blob = path.read_bytes()
    if how == "truncated":
        path.write_bytes(blob[: len(blob) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(os.urandom(len(blob)))
    elif how == "bitflip":
        b = bytearray(blob)
        b[-100] ^= 0x10
        path.write_bytes(bytes(b))
    elif how == "planted_raw_cubin":  # a cubin of another program, no header
        path.write_bytes(cc.compile_cubin('extern "C" __global__ void k(float* a) { a[0] = 1; }', name="o.cu",
                                          target="sm_80"))
    elif how == "planted_header_only":  # a valid header of other bytes
        path.write_bytes(cc._pack_file(b"\x7fELF" + b"\0" * 64)[: cc._HEADER] + blob[cc._HEADER:])


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage", "bitflip", "planted_raw_cubin",
                                 "planted_header_only"])
def test_bad_cache_file_is_discarded_named_and_recompiled(cache, monkeypatch, how):
    good = _compile()
    path = _only_file(cache)
    _corrupt(path, how)
    monkeypatch.setattr(cc, "_cubin_cache", {})
    with pytest.warns(cc.CacheWarning, match=str(path.name)):
        again = _compile()
    assert again == good  # recompiled: the same bytes, not the bad ones
    assert path.read_bytes() == cc._pack_file(good)  # the fresh program replaced the bad file
    monkeypatch.setattr(cc, "_cubin_cache", {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _compile() == good  # and it now loads silently


def test_unreadable_cache_file_is_recompiled_not_fatal(cache, monkeypatch):
    good = _compile()
    path = _only_file(cache)
    monkeypatch.setattr(cc, "_cubin_cache", {})
    real = os.open

    def deny(name, *a, **k):  # mode 000 (root would read it anyway)
        if os.fspath(name) == str(path):
            raise PermissionError(13, "Permission denied", str(name))
        return real(name, *a, **k)

    monkeypatch.setattr(cc.os, "open", deny)
    with pytest.warns(cc.CacheWarning, match="unreadable"):
        assert _compile() == good


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_cache_name_that_is_not_a_regular_file_is_recompiled_without_blocking(cache, monkeypatch, kind):
    good = _compile()
    path = _only_file(cache)
    path.unlink()
    os.mkfifo(path) if kind == "fifo" else path.mkdir()  # a FIFO's read would wait for a writer forever
    monkeypatch.setattr(cc, "_cubin_cache", {})
    got = []
    t = threading.Thread(target=lambda: got.append(_compile()), daemon=True)
    with pytest.warns(cc.CacheWarning, match=path.name):
        t.start()
        t.join(20)
        if t.is_alive():  # unblock the reader so that the test process can end
            with open(path, "wb"):
                pass
            t.join(20)
            pytest.fail(f"reading a {kind} under a cubin's name blocked")
    assert got == [good]


def test_failed_write_leaves_no_temp_file(cache, monkeypatch):
    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cc.os, "replace", boom)
    assert _compile()[:4] == b"\x7fELF"
    assert list(cache.iterdir()) == []


def test_failed_fsync_leaves_no_temp_file(cache, monkeypatch):
    def boom(fd):
        raise OSError(5, "I/O error")

    monkeypatch.setattr(cc.os, "fsync", boom)
    _compile()
    assert list(cache.iterdir()) == []


def test_cache_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", "off")
    monkeypatch.setattr(cc, "_cubin_cache", {})
    assert cc.cache_dir() is None
    assert _compile()[:4] == b"\x7fELF"


def test_forget_cubin_drops_memory_and_disk_copies(cache):
    _compile()
    cc.forget_cubin(SRC, name="k.cu", target="sm_80")
    assert list(cache.iterdir()) == [] and cc._cubin_cache == {}


def test_a_module_load_refused_by_a_capture_keeps_the_cubin_and_is_a_capture_error(cache, monkeypatch):
    """A program first needed during graph capture: the driver refuses the module load (cudaErrorStreamCaptureUnsupported).
    The cubin is good: it stays in both caches (no recompile), and the call gets a CaptureError saying what to do."""
    import contextlib
    import types

    import cupy

    from cake_rt.launch import arch, streams

    good = _compile()
    path = _only_file(cache)
    info = arch.DeviceInfo(index=0, name="stand-in", capability=(8, 0), sm_count=108, smem_per_block_optin=166912,
                           smem_per_sm=167936, regs_per_sm=65536, cooperative_launch=True, l2_bytes=40 << 20,
                           target="sm_80")
    monkeypatch.setattr(arch, "device_info", lambda device=None: info)
    monkeypatch.setattr(cupy.cuda, "Device", lambda index=None: contextlib.nullcontext())
    monkeypatch.setattr(cc, "load_source", lambda path: SRC)
    compiles = []
    monkeypatch.setattr(cc, "_run_nvrtc", lambda *a, **k: compiles.append(a) or (good, ""))

    class Refused(Exception):  # what CuPy's CUDADriverError carries
        status = 900

    class Module:
        def load(self, cubin):
            raise Refused("operation not permitted when stream is capturing")

    monkeypatch.setattr(cupy.cuda, "function", types.SimpleNamespace(Module=Module))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "did not load; recompiling" warning
        with pytest.raises(streams.CaptureError, match="before capturing"):
            cc._get_kernel_slow("k.cu", "k", defines=None, options=(), device=0)
    assert compiles == [] and path.read_bytes() == cc._pack_file(good) and good in cc._cubin_cache.values()


# ----------------------------------------------------------------------------------------------------
# argument checks before any launch (device arrays are stand-ins)
# ----------------------------------------------------------------------------------------------------

cupy = pytest.importorskip("cupy")

_BASE = 1 << 32


def fake(shape, dtype, offset=0, base=_BASE):
    """A CuPy array header over an address that is never touched (no GPU needed)."""
    mem = cupy.cuda.UnownedMemory(base, 1 << 30, None, device_id=0)
    return cupy.ndarray(shape, dtype=dtype, memptr=cupy.cuda.MemoryPointer(mem, offset))


def test_check_aligned_names_the_argument():
    from cake_rt.interop import check_aligned

    check_aligned(fake((4, 8), np.float32), "x")
    with pytest.raises(ValueError, match=r"^x: the data pointer .* not 16-byte aligned"):
        check_aligned(fake((4, 8), np.float32, offset=4), "x")
    v = fake((5, 3), np.float32)[1:]  # a C-contiguous view 12 bytes in
    assert v.flags.c_contiguous
    with pytest.raises(ValueError, match="^q:"):
        check_aligned(v, "q")


def test_check_disjoint_outputs_vs_inputs_and_each_other():
    from cake_rt.interop import check_disjoint

    x = fake((4, 8), np.float32)
    y = fake((4, 8), np.float32, offset=4 * 8 * 4)  # right after x: fine
    check_disjoint((("out", y),), (("x", x),))
    with pytest.raises(ValueError, match="^out: its memory overlaps x"):
        check_disjoint((("out", x),), (("x", x),))
    half = fake((4, 8), np.float32, offset=64)
    with pytest.raises(ValueError, match="^scores: its memory overlaps indices"):
        check_disjoint((("indices", x), ("scores", half)))
    check_disjoint((("out", x[:0]),), (("x", x),))  # empty arrays touch nothing


class _JaxLike:
    """Stands in for a jax.Array (immutable): only its module name matters to the check."""
    __module__ = "jaxlib.xla_extension"

    def __dlpack__(self, stream=None):
        raise AssertionError("must be refused before export")

    def __dlpack_device__(self):
        return (2, 0)


class _ReadOnlyCAI:
    def __init__(self):
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (_BASE, True), "version": 3}


class _GradTensor:
    requires_grad = True

    def __init__(self, inner):
        self.inner = inner
        self.detached = False

    def detach(self):
        self.detached = True
        return self.inner


def test_read_only_exports_are_refused_as_outputs():
    from cake_rt.interop import as_device_array

    with pytest.raises(ValueError, match="^indices: cannot be written in place: a JAX array is immutable"):
        as_device_array(_JaxLike(), "indices", output=True)
    with pytest.raises(ValueError, match="^out: cannot be written in place: .*read-only"):
        as_device_array(_ReadOnlyCAI(), "out", output=True)


def test_requires_grad_input_is_a_read_only_view_output_is_refused():
    from cake_rt.interop import as_device_array

    inner = fake((4,), np.float32)
    t = _GradTensor(inner)
    assert as_device_array(t, "x") is inner and t.detached
    with pytest.raises(ValueError, match="^out: a tensor that requires grad cannot be an output"):
        as_device_array(_GradTensor(inner), "out", output=True)



class _DLPackExporter:
    """A CUDA producer of DLPack capsules built with ctypes: versioned (DLPack 1.0, with ``flags``) when the consumer
    asks with ``max_version``, unversioned when ``versioned`` is False (an older producer: ``max_version`` is a
    ``TypeError``, as CuPy's fallback expects)."""

    def __init__(self, flags=0, versioned=True, shape=(32, 8)):
        self.flags, self.versioned, self.shape = flags, versioned, shape
        self.capsules, self.keep = [], []

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, *, stream=None, max_version=None, copy=None, dl_device=None):
        import ctypes

        if max_version is not None and not self.versioned:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")

        class Tensor(ctypes.Structure):  # DLTensor
            _fields_ = [("data", ctypes.c_void_p), ("device", ctypes.c_int32 * 2), ("ndim", ctypes.c_int32),
                        ("dtype", ctypes.c_uint8 * 4), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                        ("byte_offset", ctypes.c_uint64)]

        class Versioned(ctypes.Structure):  # DLManagedTensorVersioned
            _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                        ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", Tensor)]

        class Managed(ctypes.Structure):  # DLManagedTensor
            _fields_ = [("dl_tensor", Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]

        shape = (ctypes.c_int64 * len(self.shape))(*self.shape)
        t = Tensor(_BASE + (5 << 24), (ctypes.c_int32 * 2)(2, 0), len(self.shape), (ctypes.c_uint8 * 4)(0, 32, 1, 0),
                   ctypes.addressof(shape), None, 0)  # int32
        if max_version is not None:
            m, name = Versioned(1, 0, None, None, self.flags, t), b"dltensor_versioned"
        else:
            m, name = Managed(t, None, None), b"dltensor"
        new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
            ("PyCapsule_New", ctypes.pythonapi))
        self.keep += [shape, m]
        capsule = new(ctypes.addressof(m), name, None)
        self.capsules.append(capsule)
        return capsule


def _from_dlpack_as_cupy_14(obj, **kw):
    """``cupy.from_dlpack`` without a GPU: CuPy 14's calls of the producer (``__dlpack_device__``, then ``__dlpack__``
    with the stream and ``max_version``, again with the stream alone on a ``TypeError``), then a stand-in array; like
    CuPy, it reads no ``flags``."""
    assert obj.__dlpack_device__()[0] == 2
    try:
        capsule = obj.__dlpack__(stream=1, max_version=(1, 0), copy=None)
    except TypeError:
        capsule = obj.__dlpack__(stream=1)
    assert type(capsule).__name__ == "PyCapsule"
    return fake((32, 8), np.int32, offset=5 << 24)


def test_a_read_only_or_copied_dlpack_export_is_refused_as_an_output(monkeypatch):
    # cupy.from_dlpack ignores DLPack 1.0's flags: an output flagged read-only (the producer forbids writes) or
    # is-copied (the kernel would write a copy the caller never sees) must be refused by cake-rt, naming it.
    from cake_rt.interop import as_device_array

    monkeypatch.setattr(cupy, "from_dlpack", _from_dlpack_as_cupy_14)
    for flags, why in ((1, "read-only"), (2, "a copy"), (3, "read-only")):
        with pytest.raises(ValueError, match=f"^indices: cannot be written in place: its DLPack export is {why}"):
            as_device_array(_DLPackExporter(flags), "indices", output=True)
    # a writable export (versioned or not) is taken; a read-only one may be read as an input
    assert as_device_array(_DLPackExporter(0), "indices", output=True).shape == (32, 8)
    old = _DLPackExporter(0, versioned=False)
    assert as_device_array(old, "out", output=True).shape == (32, 8) and len(old.capsules) == 1
    assert as_device_array(_DLPackExporter(1), "q").shape == (32, 8)


def test_dsa_refuses_a_read_only_dlpack_output_before_any_launch(monkeypatch):
    import contextlib

    import cake_rt.ops.dsa as dsa
    from cake_rt.launch import grid

    monkeypatch.setattr(cupy, "from_dlpack", _from_dlpack_as_cupy_14)
    monkeypatch.setattr(dsa, "_intake", lambda *a, **k: contextlib.nullcontext())  # no device to make current here
    q, k, w = _dsa_inputs()
    with grid.record_launches() as launches:
        with pytest.raises(ValueError, match="^indices: cannot be written in place: its DLPack export is read-only"):
            dsa.dsa_indexer_det_topk(q, k, w, 8, indices=_DLPackExporter(1))
    assert launches == []

def _dsa_inputs(T=32, Tkv=100, H=32, D=64, q_off=0):
    q = fake((T, H, D), BF16, offset=q_off)
    k = fake((Tkv, D), BF16, offset=1 << 24)
    w = fake((T, H), np.float32, offset=2 << 24)
    return q, k, w


def test_dsa_misaligned_inputs_and_aliased_outputs_are_named_errors():
    from cake_rt.ops.dsa import dsa_indexer_det_topk

    q, k, w = _dsa_inputs()
    with pytest.raises(ValueError, match="^q: the data pointer"):
        dsa_indexer_det_topk(fake((32, 32, 64), BF16, offset=2), k, w, 8)
    with pytest.raises(ValueError, match="^k: the data pointer"):
        dsa_indexer_det_topk(q, fake((100, 64), BF16, offset=(1 << 24) + 8), w, 8)
    idx = fake((32, 8), np.int32, offset=3 << 24)
    sc = fake((32, 8), np.float32, offset=(3 << 24) + 16)  # overlaps idx
    with pytest.raises(ValueError, match="^scores: its memory overlaps indices"):
        dsa_indexer_det_topk(q, k, w, 8, indices=idx, scores=sc)
    with pytest.raises(ValueError, match="^scores: its memory overlaps weights"):
        dsa_indexer_det_topk(q, k, w, 8, indices=idx, scores=fake((32, 8), np.float32, offset=2 << 24))
    with pytest.raises(ValueError, match="^indices: cannot be written in place"):
        dsa_indexer_det_topk(q, k, w, 8, indices=_JaxLike(), scores=sc)


def _ssd_inputs(off_x=0):
    b, L, H, P, G, N = 1, 100, 4, 64, 1, 64
    x = fake((b, L, H, P), BF16, offset=off_x)
    dt = fake((b, L, H), np.float32, offset=1 << 24)
    A = fake((H,), np.float32, offset=2 << 24)
    B = fake((b, L, G, N), BF16, offset=3 << 24)
    C = fake((b, L, G, N), BF16, offset=4 << 24)
    return x, dt, A, B, C


def test_ssd_out_aliasing_x_and_misalignment_are_named_errors():
    from cake_rt.ops.ssd import ssd_combined

    x, dt, A, B, C = _ssd_inputs()
    with pytest.raises(ValueError, match="^out: its memory overlaps x"):
        ssd_combined(x, dt, A, B, C, 64, out=x)
    with pytest.raises(ValueError, match="^x: the data pointer"):
        ssd_combined(fake(x.shape, BF16, offset=2), dt, A, B, C, 64)
    with pytest.raises(ValueError, match="^C: the data pointer"):
        ssd_combined(x, dt, A, B, fake(C.shape, BF16, offset=(4 << 24) + 8), 64)
    with pytest.raises(ValueError, match="^out: cannot be written in place"):
        ssd_combined(x, dt, A, B, C, 64, out=_JaxLike())


def test_dsa_offset_out_of_range_in_second_segment_names_q_causal_offsets():
    from cake_rt.ops.dsa import _check_metadata

    cu_q = np.array([0, 4, 8], np.int32)
    cu_k = np.array([0, 10, 20], np.int32)
    with pytest.raises(ValueError, match="^q_causal_offsets: value .* of segment 1"):
        _check_metadata(cu_q, cu_k, np.array([0, 2**31 - 2], np.int32), True, 8, 20)
    with pytest.raises(ValueError, match="^q_causal_offsets: value .* of segment 1"):
        _check_metadata(cu_q, cu_k, np.array([0, -2**31], np.int32), True, 8, 20)
    _check_metadata(cu_q, cu_k, np.array([-5, 3], np.int32), True, 8, 20)


@pytest.mark.parametrize("doc_lens,cp_size,words", [
    ([2**62, 2**62], 2, "does not fit"),       # int64 sum overflow: used to segfault inside NumPy
    ([2**40], 1, "does not fit"),
    ([0, 0], 2**40, "cp_size"),
    ([2**31 - 2], 1, "does not fit"),
    (np.array([2**63 - 2, 2], np.uint64), 1, "doc_lens"),
])
def test_cp_zigzag_layout_huge_lengths_are_value_errors(doc_lens, cp_size, words):
    from cake_rt.cp import cp_zigzag_layout

    with pytest.raises(ValueError, match=words):
        cp_zigzag_layout(doc_lens, cp_size, 0)


def test_cp_zigzag_layout_many_ranks_with_empty_docs_is_fast():
    from cake_rt.cp import cp_zigzag_layout

    lay = cp_zigzag_layout([0, 0], 2**30, 5)  # used to loop over every rank
    assert lay.num_queries == 0 and lay.k_index_allgather.size == 0


# ----------------------------------------------------------------------------------------------------
# streams, per-stream state, retirement
# ----------------------------------------------------------------------------------------------------

def test_per_thread_default_stream_state_is_per_thread():
    from cake_rt.launch.streams import stream_key

    keys = []
    t = threading.Thread(target=lambda: keys.append(stream_key(0, 2)))
    t.start()
    t.join()
    assert stream_key(0, 2) != keys[0]
    assert stream_key(0, 1) == stream_key(0, 0)  # the legacy stream is one stream
    assert stream_key(0, 0x1234) == stream_key(0, 0x1234) != stream_key(1, 0x1234)


def test_bad_int_handles_are_refused_without_touching_the_driver():
    from cake_rt.launch.streams import check_handle

    for h in (-1, 1 << 64):
        with pytest.raises(ValueError, match="^stream:"):
            check_handle(h, 0)
    assert check_handle(0, 0) == 0 and check_handle(2, 0) == 2


def test_unmapped_int_handles_never_reach_the_driver(monkeypatch):
    from cake_rt.launch import streams

    calls = []
    monkeypatch.setattr(streams, "_context_of_current_device", lambda: 77)
    monkeypatch.setattr(streams.driver, "streamGetCtx", lambda h: calls.append(h) or 77, raising=False)
    for h in (0xDEADBEEF000, 12345, 1 << 63):
        with pytest.raises(ValueError, match="^stream: .* not a valid CUDA stream handle"):
            streams.check_handle(h, 0)
    assert calls == []
    mapped = id(calls)  # readable memory of this process: goes on to the driver's check
    assert streams.check_handle(mapped, 0) == mapped and calls == [mapped]
    monkeypatch.setattr(streams.driver, "streamGetCtx", lambda h: 78, raising=False)
    streams.forget_handle(mapped)
    with pytest.raises(ValueError, match="another device or context"):
        streams.check_handle(mapped, 0)


def test_resolve_refuses_other_types():
    from cake_rt.launch.streams import resolve

    with pytest.raises(TypeError, match="^stream:"):
        resolve("s", 0)
    with pytest.raises(TypeError, match="^stream:"):
        resolve(True, 0)


def test_foreign_handles_are_wrapped_without_deprecated_classes_and_never_owned(monkeypatch):
    import warnings

    import cupy

    from cake_rt.launch import streams

    mapped = id(monkeypatch)  # readable memory: passes the pointer check, then the stubbed driver check
    monkeypatch.setattr(streams, "_context_of_current_device", lambda: 77)
    monkeypatch.setattr(streams.driver, "streamGetCtx", lambda h: 77, raising=False)

    class Proto:  # a foreign library's stream: only the CUDA stream protocol
        def __cuda_stream__(self):
            return (0, mapped)

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # CuPy 14 deprecates ExternalStream
        for spelling in (mapped, Proto(), type("T", (), {"cuda_stream": mapped})()):
            obj, h = streams.resolve(spelling, 0)
            assert h == mapped and obj.ptr == mapped and isinstance(obj, cupy.cuda.Stream)
            # a wrapper: collecting it must neither destroy the caller's stream nor release its state
            assert not streams.owns_handle(obj)
    assert streams.owns_handle(cupy.cuda.Stream.null)
    assert not streams.owns_handle(streams.external_stream(mapped))
    streams.forget_handle(mapped)


def test_retired_objects_wait_for_in_flight_calls():
    from cake_rt.launch import streams

    g = streams.Guarded()
    g.begin()
    g.retire()
    assert g in streams._retired
    streams.collect()
    assert g in streams._retired  # a call still uses it
    g.abort()
    streams.collect()
    assert g not in streams._retired


def test_pinned_objects_are_never_retired():
    from cake_rt.launch import streams

    g = streams.Guarded()
    g.pin()
    g.retire()
    assert g not in streams._retired and g in streams._pinned


def test_guarded_lru_is_bounded_and_retires_evicted_values():
    from cake_rt.launch import streams

    lru = streams.GuardedLRU(3)
    vals = [streams.Guarded() for _ in range(5)]
    for i, v in enumerate(vals):
        assert lru.put(i, v) is v
    assert len(lru) == 3 and lru.get(0) is None and lru.get(4) is vals[4]
    assert lru.put(4, streams.Guarded()) is vals[4]  # first insert wins


def test_a_re_zero_captured_into_a_graph_leaves_the_ticket_words_dirty_for_eager_launches(monkeypatch):
    """After a failed launch the words are re-zeroed before the next one; under capture that memset only runs at the
    graph's replays, so the next eager launch must still re-zero them."""
    from cupy_backends.cuda.api import runtime

    from cake_rt.launch import tickets

    w = tickets.TicketWords.__new__(tickets.TicketWords)
    w.array = cupy.ndarray((4,), cupy.uint32, memptr=cupy.cuda.MemoryPointer(
        cupy.cuda.UnownedMemory(_BASE, 16, None, device_id=0), 0))
    w._dirty, w._lock = False, threading.Lock()
    memsets, capturing = [], {"on": True}
    monkeypatch.setattr(runtime, "memsetAsync", lambda ptr, v, n, h: memsets.append(h))
    monkeypatch.setattr(runtime, "streamIsCapturing", lambda h: runtime.streamCaptureStatusActive if capturing["on"]
                        else runtime.streamCaptureStatusNone)
    w.mark_dirty()
    assert w.before_launch(7) and memsets == [7]      # captured: a memset node of the graph
    assert w.dirty
    capturing["on"] = False
    assert w.before_launch(7) and memsets == [7, 7]   # the eager launch after the capture re-zeroes them itself
    assert not w.dirty and not w.before_launch(7)


OOM_SCRIPT = r'''
import cupy
import cake_rt
from cake_rt.interop import BF16
from cake_rt.launch import grid, streams, workspace

real = workspace.pool_empty
fail = []
def pool_empty(size, dtype, st):  # the workspace's growth out of memory while ``fail`` holds a token
    if fail:
        fail.pop()
        raise cupy.cuda.memory.OutOfMemoryError(size, 0, 0)
    return real(size, dtype, st)
workspace.pool_empty = pool_empty
writes = []  # device addresses the library's own copies and memsets write
streams.runtime.memsetAsync = lambda ptr, *a: writes.append(ptr)
streams.runtime.memcpyAsync = lambda dst, *a: writes.append(dst)

L, H, P, N = 256, 4, 64, 64
x = make(np.empty((1, L, H, P), BF16)); B = make(np.empty((1, L, 1, N), BF16))
dt = make(np.empty((1, L, H), np.float32)); A = make(np.empty(H, np.float32)); y = make(np.empty((1, L, H, P), BF16))
T, Tkv, Hh, D, K = 64, 300, 32, 128, 16
q = make(np.empty((T, Hh, D), BF16)); k = make(np.empty((Tkv, D), BF16)); w = make(np.empty((T, Hh), np.float32))
idx = make(np.empty((T, K), np.int32)); sc = make(np.empty((T, K), np.float32))
calls = (lambda: cake_rt.ssd_combined(x, dt, A, B, B, 64, out=y, family="chunkpar", stream=s),
         lambda: cake_rt.dsa_indexer_det_topk(q, k, w, K, indices=idx, scores=sc, key_split=64, stream=s))
for call in calls:
    fail.append(1)
    with grid.record_launches() as launches:
        try:
            call()
        except cupy.cuda.memory.OutOfMemoryError:
            pass
        else:
            raise AssertionError("the out-of-memory growth was not raised")
    assert launches == [] and not fail
    assert not {y.data.ptr, idx.data.ptr, sc.data.ptr} & set(writes)  # the caller's outputs untouched
    state = streams.stream_state(0, s.ptr, False, s)
    assert state._inflight == 0  # the call ended on its state: a later growth waits for no phantom call
    with grid.record_launches() as launches:
        call()  # memory again: the same call runs
    assert len(launches) == 1
print("ok")
'''


def test_an_out_of_memory_workspace_is_a_clear_error_before_any_launch():
    """The workspace's growth out of memory (SSD chunk-parallel, DSA with a key split): CuPy's ``OutOfMemoryError`` out
    of the call, no launch, the caller's outputs unwritten, the stream's state not left in flight, and the same call
    runs once memory is there (CPU stand-ins)."""
    from test_host_path_cpu import STUBS, run_with_cpu_stubs

    run_with_cpu_stubs(STUBS + OOM_SCRIPT)


def test_a_pytorch_stream_of_another_device_is_refused_even_its_default_stream():
    """architecture.md, Handles: a stream of another device is refused. A PyTorch stream says its device
    (``device_index``); its default stream's handle is 0, which the driver check cannot place (0 means the legacy stream
    of whatever device is current), so it ran on the inputs' device's legacy stream instead of being refused."""
    import types

    from cake_rt.launch.streams import resolve

    for handle in (0, 1, 2):
        with pytest.raises(ValueError, match="^stream: a stream of device 1, but the inputs are on device 0"):
            resolve(types.SimpleNamespace(cuda_stream=handle, device_index=1), 0)
    s, h = resolve(types.SimpleNamespace(cuda_stream=0, device_index=0), 0)  # its own device's: taken
    assert h == 0 and s.ptr == 0
