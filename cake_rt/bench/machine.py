"""The machine header of a bench run: GPU, SMs, driver, CUDA runtime, CuPy, NVRTC, cake-rt version and git hash."""
from __future__ import annotations

import datetime
import os
import platform
import subprocess

from .. import env


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def git_hash(path: str | None = None):
    """(hash, dirty) of the checkout holding the cake_rt package, or (None, None) outside a git checkout."""
    here = path or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        h = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if h.returncode != 0:
            return None, None
        d = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=10)
        return h.stdout.strip(), bool(d.stdout.strip())
    except Exception:
        return None, None


def software_header() -> dict:
    """What can be said without a GPU."""
    import numpy

    import cake_rt

    h = {"cake_rt": cake_rt.__version__, "python": platform.python_version(), "numpy": numpy.__version__,
         "host": platform.node(), "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    named = env.text("CAKE_RT_GIT_HASH")
    if named:
        # The caller names the commit the tree was made from (a copied tree, whose .git may be absent or
        # belong to another checkout): an explicit name wins over what git says here.
        h["git_hash"], h["git_dirty"] = named, None
        h["git_hash_from"] = "CAKE_RT_GIT_HASH"
    else:
        h["git_hash"], h["git_dirty"] = git_hash()
    try:
        import cupy

        h["cupy"] = cupy.__version__
        h["nvrtc"] = ".".join(str(v) for v in cupy.cuda.nvrtc.getVersion())
    except Exception as exc:
        h["cupy"] = f"not importable ({exc.__class__.__name__})"
    return h


def machine_header(device=None) -> dict:
    """The full header: software_header() plus the GPU and CUDA versions."""
    import cupy

    from cake_rt.launch.arch import device_info

    h = software_header()
    info = device_info(device)
    h["gpu"] = {"index": info.index, "name": info.name, "capability": list(info.capability), "target": info.target,
                "sm_count": info.sm_count, "l2_bytes": info.l2_bytes, "smem_per_block_optin": info.smem_per_block_optin,
                "smem_per_sm": info.smem_per_sm, "cooperative_launch": info.cooperative_launch}
    try:
        props = cupy.cuda.runtime.getDeviceProperties(info.index)
        h["gpu"]["memory_bytes"] = int(props.get("totalGlobalMem", 0))
        h["gpu"]["clock_khz"] = int(props.get("clockRate", 0)) or None
    except Exception:
        pass
    h["cuda_driver"] = _cuda_version(cupy.cuda.runtime.driverGetVersion())
    h["cuda_runtime"] = _cuda_version(cupy.cuda.runtime.runtimeGetVersion())
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i",
                              str(info.index)], capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            h["driver"] = out.stdout.strip().splitlines()[0]
    except Exception:
        pass
    return h
