"""The two floors, measured on the GPU at the start of a run.

copy   device-to-device cudaMemcpyAsync of a large buffer; bandwidth counts bytes read plus written.
gemm   bf16 x bf16 -> bf16 matrix product 8192^3 with float32 accumulation: cuBLAS through CuPy
       (cublasGemmEx, CUDA_R_16BF operands, CUBLAS_COMPUTE_32F), or torch.matmul when the CuPy path
       is unavailable; the header says which. Random operands (a product of zeros runs faster).
A row's floor is max(flops / gemm rate, bytes / copy bandwidth).
"""
from __future__ import annotations

import numpy as np

CUDA_R_16BF = 14
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT = -1


def _time_events(fn, stream, *, warmup: int, repeats: int):
    """(median ms, the SM clock's figures) of ``fn`` on ``stream``: the bench's one timer, warm L2, GPU time; the
    clock's ``clock_mhz`` / ``clock_reasons`` a sample where it can be read (clocks.SmClock), else {}."""
    from .timing import Timer

    t = Timer(stream, repeats=repeats, warmup=warmup, warm_l2=True, budget_s=60.0, min_repeats=repeats)
    out = t.time(fn, wall=False)
    return out["median"], {k: out[k] for k in ("clock_mhz", "clock_reasons") if k in out}


def measure_copy(stream, *, nbytes: int | None = None, repeats: int = 10) -> dict:
    import cupy

    free, _total = cupy.cuda.runtime.memGetInfo()
    n = int(nbytes or min(1 << 30, free // 4))
    n -= n % 256
    src = cupy.empty(n, dtype=cupy.uint8)
    dst = cupy.empty(n, dtype=cupy.uint8)
    cupy.cuda.runtime.memsetAsync(src.data.ptr, 0x3C, n, stream.ptr)
    kind = cupy.cuda.runtime.memcpyDeviceToDevice

    def fn():
        cupy.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, n, kind, stream.ptr)

    ms, clock = _time_events(fn, stream, warmup=3, repeats=repeats)
    return {"tbps": 2 * n / (ms * 1e-3) / 1e12, "ms": ms, "bytes_moved": 2 * n,
            "method": f"cudaMemcpyAsync device-to-device, {n >> 20} MiB, read + write bytes, median of {repeats}",
            **clock}


def _gemm_cupy(n: int, stream):
    import cupy
    from cupy_backends.cuda.libs import cublas

    from .arrays import random_normal

    with stream:  # the operands are written in the timed stream's order, before its first multiply
        a = random_normal((n, n), "bfloat16", seed=11)
        b = random_normal((n, n), "bfloat16", seed=12)
        c = cupy.empty((n, n), dtype=a.dtype)
    handle = cupy.cuda.device.get_cublas_handle()
    alpha = np.ones(1, np.float32)
    beta = np.zeros(1, np.float32)

    def fn():
        cublas.setStream(handle, stream.ptr)
        mode = cublas.getPointerMode(handle)
        cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
        try:
            cublas.gemmEx(handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, n, n, n, alpha.ctypes.data,
                          a.data.ptr, CUDA_R_16BF, n, b.data.ptr, CUDA_R_16BF, n, beta.ctypes.data,
                          c.data.ptr, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
        finally:
            cublas.setPointerMode(handle, mode)

    return fn, "cuBLAS cublasGemmEx through CuPy (bf16 operands and output, CUBLAS_COMPUTE_32F)"


def _gemm_torch(n: int, stream):
    import torch

    g = torch.Generator(device="cuda").manual_seed(13)
    ts = torch.cuda.ExternalStream(stream.ptr)
    with torch.cuda.stream(ts):  # the operands in the timed stream's order, as _gemm_cupy's
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)

    def fn():
        with torch.cuda.stream(ts):
            torch.matmul(a, b)

    return fn, f"torch.matmul (torch {torch.__version__}, bf16)"


def measure_gemm(stream, *, n: int = 8192, repeats: int = 10) -> dict:
    errors = []
    for make in (_gemm_cupy, _gemm_torch):
        try:
            fn, method = make(n, stream)
            ms, clock = _time_events(fn, stream, warmup=3, repeats=repeats)
            return {"tflops": 2.0 * n ** 3 / (ms * 1e-3) / 1e12, "ms": ms, "n": n,
                    "method": f"{method}, {n}^3, random operands, median of {repeats}", "errors": errors, **clock}
        except Exception as exc:  # the next method, and say why this one failed
            errors.append(f"{make.__name__}: {exc.__class__.__name__}: {exc}")
    raise RuntimeError("bf16 matrix-rate floor: no method worked: " + "; ".join(errors))


def measure_floors(stream) -> dict:
    copy = measure_copy(stream)
    gemm = measure_gemm(stream)
    return {"copy_tbps": copy["tbps"], "bf16_tflops": gemm["tflops"], "copy": copy, "gemm": gemm}


def floor_ms(flops: int, nbytes: int, floors: dict):
    """(floor in ms, 'flops' or 'bytes') for a row under measured floors."""
    t_f = flops / (floors["bf16_tflops"] * 1e12) * 1e3
    t_b = nbytes / (floors["copy_tbps"] * 1e12) * 1e3
    return (t_f, "flops") if t_f >= t_b else (t_b, "bytes")
