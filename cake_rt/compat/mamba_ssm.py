"""``mamba_chunk_scan_combined`` with mamba_ssm's exact signature and return convention, run by cake-rt.

    from cake_rt.compat.mamba_ssm import mamba_chunk_scan_combined   # instead of
    from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined

Same math (``cake_rt.ssd_combined``: h_t = exp(dt'_t A) h_{t-1} + dt'_t x_t B_t^T, y_t = C_t h_t + D x_t, times
z_t sigmoid(z_t) with z), torch tensors in and out, launched on torch's current stream of the inputs'
device. As in mamba_ssm: ``D``, ``z`` and ``dt_bias`` may be positional; ``D``/``dt_bias``/``A`` may be
bf16 or fp32 (read as float32); ``dt`` of another dtype than x is read as float32; non-contiguous inputs
are copied to contiguous ones first; ``cu_seqlens`` is used only with ``return_varlen_states``; final
states are float32 and varlen states have C's dtype, as mamba_ssm returns them.

Differences: forward only (a call that needs autograd raises); chunk_size 64, 128 or 256, headdim 64 or
128, dstate 64, 128 or 256 (ValueError otherwise); with ``cu_seqlens`` the sequences are independent, as
mamba_ssm computes them when given the matching ``seq_idx``; ``seq_idx`` / ``cu_seqlens`` are read on the host (a
device-to-host copy on torch's current stream for CUDA tensors), so under ``torch.cuda.graph`` they must be CPU tensors
or NumPy arrays (a CUDA one is a ``ValueError`` naming it: the copy would break the capture).
``dt_limit`` is applied as mamba_ssm's kernel applies it, ``min(max(dt', lo), hi)`` whatever the limits, so the default
``(0, inf)`` maps a negative dt' (``dt_softplus=False``) to 0, where ``cake_rt.ssd_combined`` reads that default as no clamp
(its contract); only a dt' of +inf differs (float32's largest value here, inf in mamba_ssm).
``initial_states`` together with ``return_varlen_states`` is a ``ValueError`` (cake-rt takes one initial state per
sequence: call ``cake_rt.ssd_combined`` with ``cu_seqlens`` and ``initial_states`` of shape ``[nseq, ...]``).
"""
from __future__ import annotations

import math

import torch

__all__ = ["mamba_chunk_scan_combined"]


_REQUIRED = ("x", "dt", "A", "B", "C")  # None is refused for these (the others are optional)
_F32_MAX = 3.4028234663852886e38  # the largest float32: ssd_combined's bounds are float32


def _contig(t):
    # mamba_ssm takes any strided tensor; the kernels read 16-byte vectors from contiguous, 16-byte aligned rows.
    if t is None or (t.is_contiguous() and t.data_ptr() % 16 == 0):
        return t
    return t.clone(memory_format=torch.contiguous_format)


def mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                              seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                              return_final_states=False, return_varlen_states=False):
    """
    x: (batch, seqlen, nheads, headdim); dt: (batch, seqlen, nheads); A: (nheads,);
    B, C: (batch, seqlen, ngroups, dstate); chunk_size: int; D: (nheads, headdim) or (nheads,);
    z: (batch, seqlen, nheads, headdim); dt_bias: (nheads,); initial_states: (batch, nheads, headdim, dstate);
    seq_idx: (batch, seqlen) int32; cu_seqlens: (num_sequences + 1,), only with return_varlen_states.

    Returns out (batch, seqlen, nheads, headdim), or (out, final_states), (out, varlen_states) or
    (out, final_states, varlen_states), exactly as mamba_ssm does.
    """
    from ..ops.ssd import ssd_combined

    tensors = {"x": x, "dt": dt, "A": A, "B": B, "C": C, "D": D, "z": z, "dt_bias": dt_bias,
               "initial_states": initial_states}
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors.values()):
        raise RuntimeError("cake_rt.compat.mamba_ssm.mamba_chunk_scan_combined is forward only: an input requires "
                           "grad; call it under torch.no_grad() / torch.inference_mode(), or use mamba_ssm to train")
    for name, t in tensors.items():
        if (t is not None or name in _REQUIRED) and not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t is not None and not t.is_cuda:
            raise ValueError(f"{name}: expected a CUDA tensor, got one on {t.device}")
    if return_varlen_states and cu_seqlens is None:
        raise ValueError("cu_seqlens: must be provided if return_varlen_states is True")
    if not return_varlen_states:
        cu_seqlens = None  # mamba_ssm uses cu_seqlens only for the varlen states
    elif initial_states is not None:
        raise ValueError("initial_states: not supported together with return_varlen_states here (cake-rt takes one "
                         "initial state per sequence: use cake_rt.ssd_combined with initial_states [nseq, ...])")
    f32 = torch.float32
    if dt.dtype not in (f32, x.dtype):
        dt = dt.float()
    A = A.to(f32)
    D = None if D is None else D.to(f32)
    dt_bias = None if dt_bias is None else dt_bias.to(f32)
    if initial_states is not None and initial_states.dtype != f32:
        initial_states = initial_states.to(f32)
    x, dt, A, B, C, D, z, dt_bias, initial_states = (_contig(t) for t in (x, dt, A, B, C, D, z, dt_bias,
                                                                         initial_states))
    if isinstance(seq_idx, torch.Tensor):
        # ssd_combined takes host metadata as NumPy: a CPU tensor's values, read without a copy
        seq_idx = _contig(seq_idx) if seq_idx.is_cuda else seq_idx.numpy()
    limit = tuple(dt_limit)
    if limit == (0.0, math.inf):
        # mamba_ssm's kernel applies min(max(dt', lo), hi) whatever the limits, its default included (dt' < 0, and a NaN
        # dt', become 0); ssd_combined reads (0, inf) as no clamp, so the same clamp is asked for with a finite bound
        limit = (0.0, _F32_MAX)
    out = torch.empty_like(x)
    stream = torch.cuda.current_stream(x.device).cuda_stream
    with torch.cuda.device(x.device):
        res = ssd_combined(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
                           seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_softplus=bool(dt_softplus),
                           dt_limit=limit, return_final_states=bool(return_final_states),
                           return_varlen_states=bool(return_varlen_states), out=out, stream=stream)
    res = res if isinstance(res, tuple) else (res,)
    rest = [torch.from_dlpack(r) for r in res[1:]]
    if not return_varlen_states:
        return out if not return_final_states else (out, rest[0])
    varlen = rest[-1].to(C.dtype)
    return (out, varlen) if not return_final_states else (out, rest[0], varlen)
