"""Helpers of the SSD GPU tests and scripts: random inputs (host copies rounded exactly as the device
gets them), poisoned outputs, float64 read-back, relative L2 errors."""
from __future__ import annotations

import math

import numpy as np

from cake_rt.interop import BF16, FP16, FP32

BARS = {BF16: 1e-2, FP16: 5e-3, FP32: 1e-4}


def to_dev(a):
    import cupy

    a = np.ascontiguousarray(a)
    if a.dtype.itemsize == 2 and a.dtype != np.int16:
        return cupy.asarray(a.view(np.uint16)).view(a.dtype)
    return cupy.asarray(a)


def to_host(a):
    """A device array on the host in its own dtype (16-bit floats through their bits)."""
    import cupy

    if a.dtype.itemsize == 2 and a.dtype.kind not in "iu":
        return a.view(cupy.uint16).get().view(a.dtype)
    return a.get()


def to_host64(a):
    return to_host(a).astype(np.float64)


def to_bytes(a) -> bytes:
    import cupy

    return a.view(cupy.uint8).get().tobytes()


POISON_BYTE = 0xFF  # NaN in float32, bfloat16 and float16 alike (0x7F bytes are NaN in float16 only: 3.4e38 in the others)


def poison(shape, dtype):
    """A device array of ``shape`` filled with NaN bit patterns (``POISON_BYTE`` bytes)."""
    import cupy

    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    buf = cupy.full(max(n, 1), POISON_BYTE, dtype=cupy.uint8)[:n]
    return buf.view(dtype).reshape(shape)


def poison_pool(nbytes=64 << 20):
    """Fill free memory-pool blocks with ``POISON_BYTE`` so the op's cupy.empty outputs start as NaN garbage."""
    import cupy

    bufs = [cupy.full(nbytes // 8, POISON_BYTE, dtype=cupy.uint8) for _ in range(8)]
    cupy.cuda.Device().synchronize()
    del bufs


def rel_l2(a, ref) -> float:
    a = np.asarray(a, np.float64)
    ref = np.asarray(ref, np.float64)
    num = float(np.linalg.norm((a - ref).ravel()))
    den = float(np.linalg.norm(ref.ravel()))
    if not math.isfinite(num):
        return math.inf
    return num / den if den > 0 else num


def make_case(seed, b, L, H, P, N, G, dtype=BF16, *, dt_dtype=FP32, state_dtype=FP32, z=True, D="h", bias=True,
              softplus=True, init=True, cu_lens=None, seq_idx=None, dt_limit=None):
    """Host (rounded) and device inputs of one call. mamba_ssm-like ranges: A = -U(1, 16),
    dt' ~ 1e-3 .. 1e-1 after softplus with dt_bias (long memory: inter-chunk terms matter)."""
    rng = np.random.default_rng(seed)
    dtype, dt_dtype, state_dtype = np.dtype(dtype), np.dtype(dt_dtype), np.dtype(state_dtype)
    h = {}
    h["x"] = rng.standard_normal((b, L, H, P)).astype(np.float32).astype(dtype)
    h["dt"] = (rng.standard_normal((b, L, H)) * 0.5).astype(np.float32).astype(dt_dtype)
    h["A"] = (-rng.uniform(1.0, 16.0, H)).astype(np.float32)
    h["B"] = rng.standard_normal((b, L, G, N)).astype(np.float32).astype(dtype)
    h["C"] = rng.standard_normal((b, L, G, N)).astype(np.float32).astype(dtype)
    kw = {}
    if D == "h":
        kw["D"] = rng.standard_normal(H).astype(np.float32)
    elif D == "hp":
        kw["D"] = rng.standard_normal((H, P)).astype(np.float32)
    if z:
        kw["z"] = rng.standard_normal((b, L, H, P)).astype(np.float32).astype(dtype)
    if bias:
        tgt = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), H))
        kw["dt_bias"] = (tgt + np.log(-np.expm1(-tgt))).astype(np.float32)
    nseq = b
    if cu_lens is not None:
        assert b == 1 and sum(cu_lens) == L
        kw["cu_seqlens"] = np.concatenate([[0], np.cumsum(cu_lens)]).astype(np.int32)
        nseq = len(cu_lens)
    if seq_idx is not None:
        kw["seq_idx"] = np.asarray(seq_idx, np.int32)
    if init:
        kw["initial_states"] = (rng.standard_normal((nseq, H, P, N)) * 0.5).astype(np.float32).astype(state_dtype)
    flags = dict(dt_softplus=softplus)
    if dt_limit is not None:
        flags["dt_limit"] = dt_limit
    dev = {k: to_dev(v) for k, v in h.items()}
    dkw = {k: (to_dev(v) if k != "cu_seqlens" else to_dev(v)) for k, v in kw.items()}
    return {"host": h, "host_kw": {**kw, **flags}, "dev": dev, "dev_kw": {**dkw, **flags},
            "dtype": dtype, "state_dtype": state_dtype, "shape": (b, L, H, P, N, G)}


def call(case, chunk, family, *, final=False, varlen=False, chunks=False, stream=None, out=None):
    """Run ssd_combined with a poisoned out (and a poisoned pool for the states); returns a list of arrays."""
    import cake_rt

    d = case["dev"]
    y = out if out is not None else poison(d["x"].shape, d["x"].dtype)
    poison_pool()  # also synchronizes: the poison is complete before a side-stream call starts
    res = cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], chunk, **case["dev_kw"],
                               return_final_states=final, return_varlen_states=varlen, return_chunk_states=chunks,
                               state_dtype=case["state_dtype"], family=family, out=y, stream=stream)
    res = list(res) if isinstance(res, tuple) else [res]
    assert res[0].data.ptr == y.data.ptr
    return res


def reference(case, chunk, *, final=False, varlen=False, chunks=False):
    from cake_rt.reference.ssd import ssd_reference_chunked

    h = case["host"]
    kw = {k: (v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v)
          for k, v in case["host_kw"].items()}
    r = ssd_reference_chunked(h["x"].astype(np.float64), h["dt"].astype(np.float64), h["A"].astype(np.float64),
                              h["B"].astype(np.float64), h["C"].astype(np.float64), chunk, **kw,
                              return_final_states=final, return_varlen_states=varlen, return_chunk_states=chunks)
    return list(r) if isinstance(r, tuple) else [r]
