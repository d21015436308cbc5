"""cake-rt: runtime-compiled CUDA kernels for Mamba2 SSD combined prefill and the deterministic DSA indexer top-k.

Public API (re-exported lazily so that ``import cake_rt`` never compiles or touches a GPU):

    ssd_combined, ssd_plan                                    -- cake_rt.ops.ssd
    dsa_indexer_det_topk, prepare_dsa_indexer_det_topk,
    dsa_indexer_workspace_bytes                               -- cake_rt.ops.dsa
    cp_zigzag_layout                                          -- cake_rt.cp
    device_info                                               -- cake_rt.launch.arch
"""
import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "ssd_combined": "cake_rt.ops.ssd",
    "ssd_plan": "cake_rt.ops.ssd",
    "dsa_indexer_det_topk": "cake_rt.ops.dsa",
    "prepare_dsa_indexer_det_topk": "cake_rt.ops.dsa",
    "dsa_indexer_workspace_bytes": "cake_rt.ops.dsa",
    "cp_zigzag_layout": "cake_rt.cp",
    "device_info": "cake_rt.launch.arch",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cake_rt' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
