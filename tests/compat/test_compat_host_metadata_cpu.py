"""The mamba_ssm drop-in's host metadata on the CPU: a stand-in of PyTorch (no torch needed), and cake_rt's
``ssd_combined`` replaced by a recorder of what the drop-in passes it."""
import contextlib
import importlib.util
import pathlib
import types

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


class _Tensor:
    """Just enough of a torch tensor for the drop-in: a CUDA one (is_cuda), or a CPU one holding ``values``."""

    requires_grad = False
    device = "cuda:0"

    def __init__(self, dtype="float32", is_cuda=True, values=None):
        self.dtype, self.is_cuda, self.values = dtype, is_cuda, values

    def is_contiguous(self):
        return True

    def data_ptr(self):
        return 0

    def to(self, dtype):
        return self

    def float(self):
        return self

    def numpy(self):
        assert not self.is_cuda
        return self.values


def _torch():
    cuda = types.SimpleNamespace(current_stream=lambda device: types.SimpleNamespace(cuda_stream=0),
                                 device=lambda device: contextlib.nullcontext())
    return types.SimpleNamespace(Tensor=_Tensor, float32="float32", contiguous_format=None, cuda=cuda,
                                 is_grad_enabled=lambda: False, empty_like=lambda t: _Tensor(t.dtype),
                                 from_dlpack=lambda a: a)


@pytest.fixture
def compat(monkeypatch):
    """(the drop-in's module loaded against the stand-in, the keyword arguments each ssd_combined call got)."""
    import sys

    import cake_rt.ops.ssd as ops

    monkeypatch.setitem(sys.modules, "torch", _torch())
    spec = importlib.util.spec_from_file_location("cake_rt.compat._mamba_ssm_on_a_stand_in",
                                                  ROOT / "cake_rt/compat/mamba_ssm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    calls = []
    monkeypatch.setattr(ops, "ssd_combined", lambda *a, **kw: calls.append(kw) or kw["out"])
    return mod, calls


def _args():
    return (_Tensor("bfloat16"), _Tensor(), _Tensor(), _Tensor("bfloat16"), _Tensor("bfloat16"), 64)


@pytest.mark.parametrize("host", ["numpy", "cpu tensor"])
def test_host_seq_idx_reaches_ssd_combined_as_host_metadata(compat, host):
    # The drop-in's docstring: under torch.cuda.graph seq_idx must be a CPU tensor or a NumPy array (a CUDA one needs a
    # device-to-host copy). ssd_combined reads a host seq_idx as a NumPy array.
    mod, calls = compat
    values = np.repeat(np.arange(2, dtype=np.int32), [40, 60])[None]
    seq_idx = values if host == "numpy" else _Tensor("int32", is_cuda=False, values=values)
    mod.mamba_chunk_scan_combined(*_args(), seq_idx=seq_idx)
    got = calls[-1]["seq_idx"]
    assert type(got) is np.ndarray and np.array_equal(got, values)


def test_cuda_seq_idx_is_passed_as_is(compat):
    mod, calls = compat
    seq_idx = _Tensor("int32")
    mod.mamba_chunk_scan_combined(*_args(), seq_idx=seq_idx)
    assert calls[-1]["seq_idx"] is seq_idx


@pytest.mark.parametrize("missing", ["x", "dt", "A", "B", "C"])
def test_a_required_tensor_given_as_none_is_a_type_error_naming_it(compat, missing):
    # The tensor checks skipped None (right for D, z, dt_bias, initial_states): a None x, dt, A, B or C reached
    # attribute reads (x.dtype, A.to) and raised AttributeError naming nothing.
    mod, calls = compat
    args = list(_args())
    args[["x", "dt", "A", "B", "C"].index(missing)] = None
    with pytest.raises(TypeError, match=f"^{missing}: expected a torch.Tensor, got NoneType"):
        mod.mamba_chunk_scan_combined(*args)
    assert calls == []


@pytest.mark.parametrize("given, passed", [
    (None, (0.0, float(np.finfo(np.float32).max))),  # mamba_ssm's default: its kernel clamps dt' at 0 all the same
    ((0.0, float("inf")), (0.0, float(np.finfo(np.float32).max))),
    ((0, float("inf")), (0.0, float(np.finfo(np.float32).max))),
    ((0.001, 0.1), (0.001, 0.1)),
    ((-1.0, float("inf")), (-1.0, float("inf"))),
])
def test_dt_limit_is_a_clamp_as_in_mamba_ssm_kernel(compat, given, passed):
    # mamba_ssm's _chunk_cumsum_fwd_kernel applies min(max(dt', lo), hi) whatever the limits; ssd_combined reads
    # (0, inf) as no clamp (its contract), so the drop-in asks for the same clamp with float32's largest bound.
    mod, calls = compat
    kw = {} if given is None else {"dt_limit": given}
    mod.mamba_chunk_scan_combined(*_args(), **kw)
    assert calls[-1]["dt_limit"] == passed
