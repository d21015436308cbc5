"""Device facts the launch layer needs: capability, SM count, shared-memory limits, cooperative-launch
support and the exact compile target (``sm_90a`` on Hopper, ``sm_100a`` on B200-class, plain ``sm_80`` /
``sm_86`` / ``sm_89`` elsewhere).

Everything here is cached per device index and never touches a GPU at import time.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

# Capabilities whose architecture-specific ("a") features the kernels use: wgmma/setmaxnreg on sm_90a,
# tcgen05 on sm_100a/sm_103a. For these the compile target carries the "a" suffix.
_ARCH_SPECIFIC = {(9, 0): "sm_90a", (10, 0): "sm_100a", (10, 3): "sm_103a"}
MIN_CAPABILITY = (8, 0)



@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """Facts about one CUDA device, read once through the CUDA runtime."""

    index: int
    name: str
    capability: tuple
    sm_count: int
    smem_per_block_optin: int  # bytes a block may opt in to (cudaDevAttrMaxSharedMemoryPerBlockOptin)
    smem_per_sm: int  # bytes per multiprocessor
    regs_per_sm: int
    cooperative_launch: bool
    l2_bytes: int
    target: str  # the exact NVRTC target, e.g. "sm_90a"

    @property
    def supported(self) -> bool:
        return tuple(self.capability) >= MIN_CAPABILITY


def target_for_capability(capability) -> str:
    """Exact compile target for a compute capability: (9, 0) -> "sm_90a", (8, 6) -> "sm_86"."""
    major, minor = (int(v) for v in capability)
    if (major, minor) in _ARCH_SPECIFIC:
        return _ARCH_SPECIFIC[(major, minor)]
    return f"sm_{major}{minor}"


def gpu_problem():
    """None when CuPy sees a CUDA GPU here, else a one-line reason (no driver, an old driver, no device)."""
    try:
        import cupy
    except Exception as exc:
        return f"CuPy is not importable ({exc.__class__.__name__}: {exc}); install cake-rt[cuda12] or [cuda13]"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        if not _driver_loadable():
            return "no CUDA GPU found: no NVIDIA driver here (libcuda could not be loaded)"
        msg = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        if "InsufficientDriver" in msg or "insufficient" in msg.lower():
            try:
                rt = cupy.cuda.runtime.runtimeGetVersion()
                return (f"no usable CUDA GPU: the NVIDIA driver is older than CuPy's CUDA runtime "
                        f"{rt // 1000}.{(rt % 1000) // 10} (update the driver, or use cake-rt[cuda12] on a CUDA 12 driver)")
            except Exception:
                return f"no usable CUDA GPU: the NVIDIA driver is too old for this CuPy ({msg})"
        return f"no CUDA GPU found ({msg})"
    return None if n > 0 else "no CUDA GPU found (the driver sees no device)"


_libcuda = None


def libcuda():
    """The NVIDIA driver library through ctypes (loaded once; the driver entry points CuPy does not wrap, e.g.
    ``cuTensorMapEncodeTiled``). Raises ``OSError`` when there is no driver."""
    global _libcuda
    if _libcuda is None:
        import ctypes

        for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
            try:
                _libcuda = ctypes.CDLL(name)
                break
            except OSError:
                continue
        else:
            raise OSError("the NVIDIA driver library (libcuda) could not be loaded")
    return _libcuda


def _driver_loadable() -> bool:
    try:
        libcuda()
        return True
    except OSError:
        return False


def has_gpu() -> bool:
    """True when CuPy imports and sees at least one CUDA device (never raises): ``gpu_problem() is None``."""
    return gpu_problem() is None


def _device_index(device) -> int:
    import cupy

    if device is None:
        return cupy.cuda.runtime.getDevice()
    if isinstance(device, (int, np.integer)) and not isinstance(device, bool):
        return int(device)
    idx = getattr(device, "id", None)
    if idx is None:
        raise TypeError(f"device: expected None, an int or a cupy.cuda.Device, got {type(device).__name__}")
    return int(idx)


@functools.lru_cache(maxsize=None)
def _read_device_info(index: int) -> DeviceInfo:
    import cupy

    rt = cupy.cuda.runtime
    props = rt.getDeviceProperties(index)
    attr = rt.deviceGetAttribute
    capability = (int(props["major"]), int(props["minor"]))
    name = props["name"]
    if isinstance(name, bytes):
        name = name.decode()
    return DeviceInfo(
        index=index,
        name=name,
        capability=capability,
        sm_count=int(attr(rt.cudaDevAttrMultiProcessorCount, index)),
        smem_per_block_optin=int(attr(rt.cudaDevAttrMaxSharedMemoryPerBlockOptin, index)),
        smem_per_sm=int(attr(rt.cudaDevAttrMaxSharedMemoryPerMultiprocessor, index)),
        regs_per_sm=int(attr(rt.cudaDevAttrMaxRegistersPerMultiprocessor, index)),
        cooperative_launch=bool(attr(rt.cudaDevAttrCooperativeLaunch, index)),
        l2_bytes=int(props.get("l2CacheSize", 0)),
        target=target_for_capability(capability),
    )


def device_info(device=None) -> DeviceInfo:
    """Facts about ``device`` (None: the current CuPy device; an int; or a ``cupy.cuda.Device``)."""
    return _read_device_info(_device_index(device))


def device_index(device=None) -> int:
    """The integer index of ``device`` (None: current device)."""
    return _device_index(device)
