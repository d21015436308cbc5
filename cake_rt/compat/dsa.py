"""The DSA indexer top-k with the serving engines' calling convention: torch tensors in, torch int32 indices out.

    from cake_rt.compat.dsa import indexer_topk
    topk_indices = indexer_topk(q, k, weights, 2048, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)

``q`` [T, H, D] bf16, ``k`` [Tkv, D] bf16, ``weights`` [T, H] float32 (CUDA tensors); the result is a torch
int32 [T, topk] tensor of key ids (global rows of ``k``) per query, ascending, -1 padded, deterministic
(``cake_rt.dsa_indexer_det_topk``), on torch's current stream of q's device. ``return_scores=True`` also
returns the float32 scores (-inf padded). Forward only: nothing here has a gradient. Inputs that require grad are
read as they are for the indices (integers, with no gradient in torch either); with ``return_scores=True`` they are a
``RuntimeError`` while grad mode is on (the scores would come back detached), as in ``compat.mamba_ssm``.
"""
from __future__ import annotations

import torch

__all__ = ["indexer_topk"]


def indexer_topk(q, k, weights, topk: int, *, cu_seqlens_q=None, cu_seqlens_k=None, q_causal_offsets=None,
                 causal: bool = True, return_scores: bool = False):
    """score(t, j) = sum_h weights[t, h] * relu(q[t, h] . k[j]); the ``topk`` best visible keys per query.

    Metadata (``cu_seqlens_q``/``cu_seqlens_k`` [S+1], ``q_causal_offsets`` [S]) as for
    ``cake_rt.dsa_indexer_det_topk``; host metadata avoids a device-to-host copy per call, and is what
    ``torch.cuda.graph`` takes (device metadata is a ``ValueError`` during capture)."""
    from ..launch.arch import device_info
    from ..ops.dsa import HEAD_DIMS, HEADS, _check_topk, dsa_indexer_det_topk, select_config

    for name, t in (("q", q), ("k", k), ("weights", weights)):
        if not isinstance(t, torch.Tensor) or not t.is_cuda:
            raise TypeError(f"{name}: expected a CUDA torch.Tensor, got {type(t).__name__}"
                            + (f" on {t.device}" if isinstance(t, torch.Tensor) else ""))
    # Indices are integers and never carry a gradient (as torch.topk's), so a training forward pass may ask for them;
    # scores returned detached from inputs that require grad would silently cut a loss on them off from q / weights.
    if return_scores and torch.is_grad_enabled():
        needs = [name for name, t in (("q", q), ("k", k), ("weights", weights)) if t.requires_grad]
        if needs:
            raise RuntimeError(f"cake_rt.compat.dsa.indexer_topk is forward only: {needs[0]} requires grad, and the "
                               "scores it would return have no gradient; call it under torch.no_grad() / "
                               "torch.inference_mode(), or ask for the indices alone (return_scores=False)")
    # topk and q's first dimension size the two outputs made below: refuse them, naming them, before they are allocated
    # (q.shape[0] of a 0-d q would be an IndexError naming nothing).
    topk = _check_topk(topk)  # an int (a NumPy integer too, as the op takes one)
    if q.dim() != 3:
        raise ValueError(f"q: expected 3 dimensions [T, H, D], got shape {tuple(q.shape)}")
    if int(q.shape[1]) in HEADS and int(q.shape[2]) in HEAD_DIMS:
        info = device_info(q.device.index)
        select_config(int(q.shape[1]), int(q.shape[2]), topk, info.smem_per_block_optin, info.target)
    T = int(q.shape[0])
    indices = torch.empty((T, int(topk)), dtype=torch.int32, device=q.device)
    scores = torch.empty((T, int(topk)), dtype=torch.float32, device=q.device)
    stream = torch.cuda.current_stream(q.device).cuda_stream
    with torch.cuda.device(q.device):
        dsa_indexer_det_topk(q, k, weights, topk, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                             q_causal_offsets=q_causal_offsets, causal=causal, indices=indices, scores=scores,
                             stream=stream)
    return (indices, scores) if return_scores else indices
