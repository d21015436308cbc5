"""Argument checks of the public entries that an independent test written from the specs would try (CPU only,
device arrays are headers over addresses never touched): each a ``TypeError`` / ``ValueError`` that names the
argument, raised before anything is launched."""
import math
import warnings

import numpy as np
import pytest

from cake_rt.interop import BF16, dtype_name

cupy = pytest.importorskip("cupy")

_BASE = 1 << 32


def fake(shape, dtype, offset=0):
    mem = cupy.cuda.UnownedMemory(_BASE, 1 << 30, None, device_id=0)
    return cupy.ndarray(shape, dtype=dtype, memptr=cupy.cuda.MemoryPointer(mem, offset))


def _ssd_inputs():
    b, L, H, P, G, N = 1, 100, 4, 64, 1, 64
    return (fake((b, L, H, P), BF16), fake((b, L, H), np.float32, 1 << 24), fake((H,), np.float32, 2 << 24),
            fake((b, L, G, N), BF16, 3 << 24), fake((b, L, G, N), BF16, 4 << 24))


@pytest.mark.parametrize("limit", [(False, True), "01", (0.0, "1"), (None, 1.0), (0.0, 1j), (0.0,), (0.0, 1.0, 2.0)])
def test_ssd_dt_limit_must_be_a_pair_of_real_numbers(limit):
    from cake_rt.ops.ssd import ssd_plan

    with pytest.raises(TypeError, match="^dt_limit: expected a pair"):
        ssd_plan(*_ssd_inputs(), 64, dt_limit=limit)


def test_ssd_dt_limit_beyond_float32_is_an_error_not_a_cast_warning():
    from cake_rt.ops.ssd import ssd_plan

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from a float32 cast that overflows
        for limit in ((0.0, 1e300), (-1e300, 1.0)):
            with pytest.raises(ValueError, match="^dt_limit: .*float32"):
                ssd_plan(*_ssd_inputs(), 64, dt_limit=limit)
    for limit in ((0.0, math.inf), (-math.inf, math.inf), (np.float32(0.5), np.float64(2.0)), (0, 3),
                  (np.array(0.5), np.array(1.0)), [0.0, 1.0]):
        # Past the dt_limit check: on the CPU the stand-ins stop at the device facts, on a GPU the plan is made.
        try:
            ssd_plan(*_ssd_inputs(), 64, dt_limit=limit)
        except Exception as error:
            assert not str(error).startswith("dt_limit"), (limit, error)


def test_dtype_names_say_the_byte_order():
    assert dtype_name(np.dtype(">i4")) == "int32 (big-endian)"
    assert dtype_name(np.dtype("<i4")) == "int32"
    assert dtype_name(np.dtype(">f4")) == "float32 (big-endian)"


def test_ssd_big_endian_seq_idx_message_says_why():
    from cake_rt.ops.ssd import ssd_plan

    with pytest.raises(TypeError, match=r"^seq_idx: expected dtype int32, got int32 \(big-endian\)"):
        ssd_plan(*_ssd_inputs(), 64, seq_idx=np.zeros((1, 100), ">i4"))


def _dsa_inputs(T=32, Tkv=100, H=32, D=64):
    return fake((T, H, D), BF16), fake((Tkv, D), BF16, 1 << 24), fake((T, H), np.float32, 2 << 24)


@pytest.mark.parametrize("which, bad, name, error", [
    ("weights", None, "weights", TypeError), ("weights", 3, "weights", TypeError), ("k", None, "k", TypeError),
    ("q", None, "q", TypeError), ("q", np.empty((0, 32, 64))[:, :, :, None], "q", ValueError),
    ("weights", np.empty((32, 32, 1)), "weights", ValueError)])
def test_dsa_workspace_bytes_names_a_bad_array(which, bad, name, error):
    """No shape at all is the wrong kind (TypeError, as the op itself says); a wrong shape is a ValueError."""
    from cake_rt.ops.dsa import dsa_indexer_workspace_bytes

    q, k, w = _dsa_inputs()
    args = dict(q=q, k=k, weights=w)
    args[which] = bad
    with pytest.raises(error, match=f"^{name}: "):
        dsa_indexer_workspace_bytes(args["q"], args["k"], args["weights"], 8)


def test_dsa_workspace_bytes_negative_sizes_are_named():
    from cake_rt.ops.dsa import dsa_indexer_workspace_bytes

    class Shaped:
        def __init__(self, *shape):
            self.shape = shape

    with pytest.raises(ValueError, match="^q: "):
        dsa_indexer_workspace_bytes(Shaped(-4, 32, 64), Shaped(100, 64), Shaped(-4, 32), 8)
    with pytest.raises(ValueError, match="^k: "):
        dsa_indexer_workspace_bytes(Shaped(4, 32, 64), Shaped(-1, 64), Shaped(4, 32), 8)


def test_dsa_workspace_overlapping_an_output_is_named_as_an_output():
    from cake_rt.ops.dsa import _check_workspace, _Problem

    q, k, w = _dsa_inputs()
    p = _Problem(q, k, w, 32, 100, 32, 64, 8, None, None, None, True, 0)
    idx = fake((32, 8), np.int32, 3 << 24)
    ws = fake((4096,), np.uint8, 3 << 24)
    with pytest.raises(ValueError, match=r"^workspace: its memory overlaps indices \(another output\)"):
        _check_workspace(ws, 4096, 0, p, idx, None)
    with pytest.raises(ValueError, match=r"^workspace: its memory overlaps q \(an input\)"):
        _check_workspace(fake((4096,), np.uint8), 4096, 0, p, None, None)


def _saved_fit(d, **over):
    import dataclasses
    import json

    from cake_rt.ops import ssd

    vals = dict(dataclasses.asdict(ssd.COST_MODELS[(9, 0)]), source="planted", **over)
    path = ssd.cost_model_path("NVIDIA Test GPU")
    assert path.parent.parent == d
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema": ssd.COST_MODEL_SCHEMA, "gpu": "NVIDIA Test GPU",
                                "kernels": ssd.kernels_fingerprint(), "model": vals}))


@pytest.fixture
def cost_cache(tmp_path, monkeypatch):
    import cake_rt.launch.compile as cc
    from cake_rt.ops import ssd

    d = tmp_path / "cache"
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(d))
    monkeypatch.setattr(cc, "_warned_dirs", set())
    ssd.forget_cost_models()
    yield d
    ssd.forget_cost_models()


def test_saved_cost_model_is_read_from_a_private_cache(cost_cache):
    from cake_rt.ops import ssd

    cost_cache.mkdir(mode=0o700)
    _saved_fit(cost_cache)
    assert ssd.cost_model_for("NVIDIA Test GPU", (9, 0))[0].source == "planted"


def test_saved_cost_model_in_an_untrusted_cache_is_ignored(cost_cache):
    import os

    import cake_rt.launch.compile as cc
    from cake_rt.ops import ssd

    cost_cache.mkdir(mode=0o700)
    _saved_fit(cost_cache)
    os.chmod(cost_cache, 0o777)
    with pytest.warns(cc.CacheWarning, match="writable by group or others"):
        model, _ = ssd.cost_model_for("NVIDIA Test GPU", (9, 0))
    assert model == ssd.COST_MODELS[(9, 0)]


def test_a_cache_directory_that_cannot_be_searched_gives_the_built_in_cost_model(cost_cache, monkeypatch):
    import pathlib

    from cake_rt.ops import ssd

    cost_cache.mkdir(mode=0o700)
    _saved_fit(cost_cache)
    stat = pathlib.Path.stat

    def denied(self, *a, **k):  # a private cache directory made mode 0600 (no search bit); root would pass it
        if cost_cache in self.parents:
            raise PermissionError(13, "Permission denied", str(self))
        return stat(self, *a, **k)

    monkeypatch.setattr(pathlib.Path, "stat", denied)
    model, _ = ssd.cost_model_for("NVIDIA Test GPU", (9, 0))
    assert model == ssd.COST_MODELS[(9, 0)]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0])
def test_saved_cost_model_with_a_non_finite_or_negative_constant_is_ignored(cost_cache, value):
    from cake_rt.ops import ssd

    cost_cache.mkdir(mode=0o700)
    _saved_fit(cost_cache, e_step=value)
    with pytest.warns(UserWarning, match="ignoring the SSD cost model .*e_step"):
        model, _ = ssd.cost_model_for("NVIDIA Test GPU", (9, 0))
    assert model == ssd.COST_MODELS[(9, 0)]


def test_saved_cost_model_with_a_zero_bandwidth_is_ignored(cost_cache):
    # predict_us divides by the workspace bandwidth: a saved 0 must not fail the plan of every SSD call
    from cake_rt.ops import ssd

    cost_cache.mkdir(mode=0o700)
    _saved_fit(cost_cache, bw_bytes_per_us=0.0)
    with pytest.warns(UserWarning, match="ignoring the SSD cost model .*bw_bytes_per_us"):
        model, _ = ssd.cost_model_for("NVIDIA Test GPU", (9, 0))
    assert model == ssd.COST_MODELS[(9, 0)]
    q = dict(nseg=1, nheads=8, headdim=64, dstate=128, chunk=256, max_chunks=8, total_chunks=8, sm_count=132,
             ws_bytes=1 << 20)
    assert all(math.isfinite(v) for v in ssd.predict_us(model, **q).values())


def _fit_doc():
    import dataclasses

    from cake_rt.ops import ssd

    vals = dict(dataclasses.asdict(ssd.COST_MODELS[(9, 0)]), source="saved by the test")
    return {"schema": ssd.COST_MODEL_SCHEMA, "gpu": "NVIDIA Test GPU", "kernels": ssd.kernels_fingerprint(),
            "model": vals}


def test_calibrate_save_makes_a_private_cache_and_writes_atomically(cost_cache):
    import os
    import stat

    from cake_rt.bench.calibrate import save_fit
    from cake_rt.ops import ssd

    old = os.umask(0o002)  # a common user umask: a directory made with it is group-writable
    try:
        save_fit(_fit_doc(), ssd.cost_model_path("NVIDIA Test GPU"), in_cache=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(cost_cache).st_mode) == 0o700
    assert [p.name for p in (cost_cache / "cost-models").iterdir()] == ["ssd-nvidia-test-gpu.json"]
    assert ssd.cost_model_for("NVIDIA Test GPU", (9, 0))[0].source == "saved by the test"


def test_calibrate_save_failure_leaves_no_temp_file(cost_cache, monkeypatch):
    import os

    from cake_rt.bench.calibrate import save_fit
    from cake_rt.ops import ssd

    def boom(fd):
        raise OSError("disk full (test)")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        save_fit(_fit_doc(), ssd.cost_model_path("NVIDIA Test GPU"), in_cache=True)
    assert list((cost_cache / "cost-models").iterdir()) == []


def test_calibrate_save_refuses_an_untrusted_cache(cost_cache):
    import os

    import cake_rt.launch.compile as cc
    from cake_rt.bench.calibrate import save_fit
    from cake_rt.ops import ssd

    cost_cache.mkdir(mode=0o700)
    os.chmod(cost_cache, 0o777)
    with pytest.warns(cc.CacheWarning), pytest.raises(ValueError, match="not trusted"):
        save_fit(_fit_doc(), ssd.cost_model_path("NVIDIA Test GPU"), in_cache=True)
    assert not (cost_cache / "cost-models").exists()


class _CpuTensor:
    """Stands in for a PyTorch CPU tensor of metadata: host data, read through ``__array__``."""
    is_cuda = False

    def __init__(self, values):
        self.values = np.asarray(values, np.int32)

    def __array__(self, dtype=None, copy=None):
        return self.values

    def __dlpack__(self, stream=None):
        raise AssertionError("host metadata is read through __array__")


def test_host_tensor_metadata_is_host_metadata_under_capture(monkeypatch):
    from cake_rt.interop import is_device_metadata
    from cake_rt.ops import ssd

    assert not is_device_metadata(_CpuTensor([0, 100]))
    assert is_device_metadata(fake((2,), np.int32))
    import contextlib

    from cake_rt.launch import streams

    monkeypatch.setattr(streams, "current_device", lambda dev: contextlib.nullcontext())
    monkeypatch.setattr(streams, "resolve", lambda stream, dev: (None, 7))
    monkeypatch.setattr(streams, "copy_breaks_capture", lambda handle: True)
    x = _ssd_inputs()[0]
    ssd._intake(x, None, (("cu_seqlens", _CpuTensor([0, 100])),), ())  # host: passes
    with pytest.raises(ValueError, match="^cu_seqlens: device metadata cannot be read during CUDA graph capture"):
        ssd._intake(x, None, (("cu_seqlens", fake((2,), np.int32)),), ())


def test_dsa_workspace_bytes_names_an_argument_without_a_shape():
    from cake_rt.ops.dsa import dsa_indexer_workspace_bytes

    q = fake((64, 32, 128), BF16)
    k = fake((256, 128), BF16, 1 << 24)
    w = fake((64, 32), np.float32, 2 << 24)
    with pytest.raises(TypeError, match=r"^q: expected an array or an object with \.shape .*got tuple"):
        dsa_indexer_workspace_bytes((64, 32, 128), k, w, 16)
    with pytest.raises(TypeError, match=r"^k: expected an array or an object with \.shape .*got tuple"):
        dsa_indexer_workspace_bytes(q, (256, 128), w, 16)


def test_ragged_metadata_list_is_named_by_the_entries():
    from cake_rt.ops.dsa import dsa_indexer_workspace_bytes
    from cake_rt.ops.ssd import ssd_plan

    with pytest.raises(ValueError, match="^cu_seqlens: expected a 1-D array"):
        ssd_plan(*_ssd_inputs(), 64, cu_seqlens=[0, [50, 100]])
    q, k, w = _dsa_inputs()
    with pytest.raises(ValueError, match="^cu_seqlens_k: expected a 1-D array"):
        dsa_indexer_workspace_bytes(q, k, w, 8, cu_seqlens_q=[0, 32], cu_seqlens_k=[0, [100]])


@pytest.mark.parametrize("device, error", [(5, ValueError), (-1, ValueError), ("cuda:0", TypeError),
                                           (True, TypeError)])
def test_dsa_workspace_bytes_names_a_device_that_is_not_there(monkeypatch, device, error):
    """A device index the process has not got is the caller's error, not the driver's ``cudaErrorInvalidDevice``."""
    from cupy_backends.cuda.api import runtime

    from cake_rt.ops.dsa import dsa_indexer_workspace_bytes

    monkeypatch.setattr(runtime, "getDeviceCount", lambda: 2)
    with pytest.raises(error, match="^device: "):
        dsa_indexer_workspace_bytes(*_dsa_inputs(), 8, device=device)
