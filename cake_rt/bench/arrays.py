"""Random device inputs for the bench rows (never zeros: they run faster than real data and hide bugs)."""
from __future__ import annotations


def bf16_dtype():
    from cake_rt.interop import BF16

    return BF16


def random_normal(shape, dtype, *, seed: int, scale: float = 1.0, shift: float = 0.0):
    """CuPy array of ``shape`` with N(shift, scale^2) values rounded to ``dtype`` (bf16 through float32,
    round to nearest even on the device, then a bit view)."""
    import cupy
    import numpy as np

    rs = cupy.random.RandomState(seed)
    x = rs.standard_normal(shape, dtype=cupy.float32)
    if scale != 1.0:
        x *= np.float32(scale)
    if shift:
        x += np.float32(shift)
    return cast_float32(x, dtype)


def random_uniform(shape, dtype, *, seed: int, low: float, high: float):
    import cupy

    rs = cupy.random.RandomState(seed)
    x = rs.uniform(low, high, shape).astype(cupy.float32)
    return cast_float32(x, dtype)


def cast_float32(x, dtype):
    """float32 CuPy array -> ``dtype`` ('bfloat16', 'float16', 'float32' or a NumPy dtype)."""
    import cupy
    import numpy as np

    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if name == "float32":
        return x
    if name == "float16":
        return x.astype(cupy.float16)
    if name == "bfloat16":
        u = x.view(cupy.uint32)
        r = (u + (cupy.uint32(0x7FFF) + ((u >> 16) & cupy.uint32(1)))) >> 16
        return r.astype(cupy.uint16).view(bf16_dtype())
    raise ValueError(f"dtype: expected bfloat16, float16 or float32, got {dtype!r}")
