"""Shared pytest configuration: tests marked ``gpu`` are skipped, with a reason, when no CUDA GPU is usable."""
import functools

import pytest


@functools.lru_cache(maxsize=1)
def _gpu_reason():
    """Return None when a CUDA GPU can run kernels here, else the reason it cannot."""
    try:
        import cupy
    except Exception as exc:  # CuPy missing or broken: no GPU path at all
        return f"CuPy is not importable ({exc.__class__.__name__}: {exc})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"no CUDA device ({exc.__class__.__name__}: {exc})"
    if n < 1:
        return "no CUDA device"
    return None


def gpu_count():
    if _gpu_reason() is not None:
        return 0
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


def pytest_collection_modifyitems(config, items):
    reason = _gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"GPU test skipped: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
