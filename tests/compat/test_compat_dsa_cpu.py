"""compat.dsa.indexer_topk on the CPU: a stand-in of PyTorch (no torch needed), and cake_rt's ``dsa_indexer_det_topk``
replaced by a recorder of what the drop-in passes it."""
import contextlib
import importlib.util
import pathlib
import types

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


class _Device:
    type, index = "cuda", 0

    def __repr__(self):
        return "cuda:0"


class _Tensor:
    """Just enough of a torch tensor for the drop-in: shape, dtype, is_cuda, requires_grad."""

    def __init__(self, shape=(), dtype="float32", is_cuda=True, requires_grad=False, values=None):
        self.shape, self.dtype, self.is_cuda, self.requires_grad, self.values = (
            tuple(shape), dtype, is_cuda, requires_grad, values)
        self.device = _Device() if is_cuda else "cpu"

    def dim(self):
        return len(self.shape)


def _torch(grad_enabled):
    cuda = types.SimpleNamespace(current_stream=lambda device: types.SimpleNamespace(cuda_stream=0x5150),
                                 device=lambda device: contextlib.nullcontext())
    return types.SimpleNamespace(
        Tensor=_Tensor, int32="int32", float32="float32", cuda=cuda, is_grad_enabled=lambda: grad_enabled[0],
        empty=lambda shape, dtype, device: _Tensor(shape, dtype))


@pytest.fixture
def compat(monkeypatch):
    """(the drop-in's module loaded against the stand-in, the calls dsa_indexer_det_topk got, a grad-mode switch)."""
    import sys

    import cake_rt.launch.arch as arch
    import cake_rt.ops.dsa as ops

    grad = [True]
    monkeypatch.setitem(sys.modules, "torch", _torch(grad))
    spec = importlib.util.spec_from_file_location("cake_rt.compat._dsa_on_a_stand_in", ROOT / "cake_rt/compat/dsa.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    calls = []
    monkeypatch.setattr(ops, "dsa_indexer_det_topk",
                        lambda *a, **kw: calls.append((a, kw)) or (kw["indices"], kw["scores"]))
    monkeypatch.setattr(arch, "device_info", lambda index: types.SimpleNamespace(smem_per_block_optin=232448,
                                                                                 target="sm_90a"))
    return mod, calls, grad


def _args(T=5, Tkv=9, H=32, D=128, **kw):
    return (_Tensor((T, H, D), "bfloat16", **kw), _Tensor((Tkv, D), "bfloat16"), _Tensor((T, H)))


def test_outputs_are_int32_and_float32_on_torchs_current_stream(compat):
    mod, calls, _ = compat
    idx = mod.indexer_topk(*_args(), 4)
    assert isinstance(idx, _Tensor) and idx.dtype == "int32" and idx.shape == (5, 4)
    idx, sc = mod.indexer_topk(*_args(), 4, return_scores=True)
    assert (idx.dtype, sc.dtype, sc.shape) == ("int32", "float32", (5, 4))
    kw = calls[-1][1]
    assert kw["stream"] == 0x5150 and kw["indices"] is idx and kw["scores"] is sc and kw["causal"] is True


@pytest.mark.parametrize("host", ["numpy", "list", "cpu tensor"])
def test_host_metadata_reaches_the_op_unchanged(compat, host):
    # The op reads host metadata itself (NumPy, lists, CPU tensors: interop.as_host_int32) with no device copy
    mod, calls, _ = compat
    cu_q, cu_k, off = np.array([0, 2, 5], np.int32), np.array([0, 4, 9], np.int32), np.array([2, 2], np.int32)
    conv = {"numpy": lambda a: a, "list": lambda a: a.tolist(),
            "cpu tensor": lambda a: _Tensor(a.shape, "int32", is_cuda=False, values=a)}[host]
    mod.indexer_topk(*_args(), 4, cu_seqlens_q=conv(cu_q), cu_seqlens_k=conv(cu_k), q_causal_offsets=conv(off))
    kw = calls[-1][1]
    for name, want in (("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k), ("q_causal_offsets", off)):
        got = kw[name]
        got = got.values if isinstance(got, _Tensor) else np.asarray(got)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [(), (7,)])
def test_q_of_the_wrong_rank_is_refused_naming_q_before_any_allocation(compat, shape):
    # A 0-d q raised IndexError from q.shape[0] (naming nothing), before the op could name it
    mod, calls, _ = compat
    q = _Tensor(shape, "bfloat16")
    with pytest.raises(ValueError, match=r"^q: expected 3 dimensions \[T, H, D\], got shape"):
        mod.indexer_topk(q, *_args()[1:], 4)
    assert calls == []


def test_requires_grad_indices_are_given_and_scores_are_refused_while_grad_is_on(compat):
    # Indices are integers (no gradient in torch either: torch.topk's indices have none): a training forward pass may
    # ask for them. Scores returned detached would cut a loss on them off from q / weights without a word: refused
    # while grad mode is on, as compat.mamba_ssm refuses a call that needs autograd.
    mod, calls, grad = compat
    q, k, w = _args(requires_grad=True)
    assert mod.indexer_topk(q, k, w, 4).dtype == "int32"
    with pytest.raises(RuntimeError, match="forward only.*q.*requires grad"):
        mod.indexer_topk(q, k, w, 4, return_scores=True)
    assert len(calls) == 1
    grad[0] = False  # under torch.no_grad() / inference_mode: nothing to cut off
    idx, sc = mod.indexer_topk(q, k, w, 4, return_scores=True)
    assert sc.dtype == "float32" and len(calls) == 2


def test_topk_is_taken_as_the_op_takes_it(compat):
    # a NumPy integer (a topk read from a config array) as the op takes one, an int to the op and the outputs' shape
    import numpy as np

    mod, calls, _ = compat
    idx = mod.indexer_topk(*_args(), np.int64(4))
    assert idx.shape == (5, 4) and type(calls[-1][0][3]) is int
    for bad in (True, 4.0, "4"):
        with pytest.raises(TypeError, match="^topk"):
            mod.indexer_topk(*_args(), bad)
