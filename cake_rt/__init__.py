"""cake-rt: runtime-compiled CUDA kernels for Mamba2 SSD combined prefill and the deterministic DSA indexer top-k.

Public API (re-exported lazily so that ``import cake_rt`` never compiles or touches a GPU):

    ssd_combined, ssd_plan                                    -- cake_rt.ops.ssd
    dsa_indexer_det_topk, prepare_dsa_indexer_det_topk,
    dsa_indexer_workspace_bytes                               -- cake_rt.ops.dsa
    cp_zigzag_layout                                          -- cake_rt.cp
    device_info                                               -- cake_rt.launch.arch

Submodules load on first use as attributes too (``cake_rt.interop.BF16`` after ``import cake_rt``):
interop, cp, env, ops, launch, reference, compat, bench, warmup.
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

_SUBMODULES = ("interop", "cp", "env", "ops", "launch", "reference", "compat", "bench", "warmup")

__all__ = sorted(_EXPORTS) + ["__version__"]


def _warn_unknown_switches() -> None:
    from . import env

    unknown = env.unknown_switches()
    if unknown:
        import warnings

        warnings.warn(f"cake-rt: {', '.join(unknown)} {'is not a switch' if len(unknown) == 1 else 'are not switches'} "
                      f"of this version and {'has' if len(unknown) == 1 else 'have'} no effect (switches: "
                      f"{', '.join(env.SWITCHES)}; see cake_rt/env.py)", RuntimeWarning, stacklevel=2)


_warn_unknown_switches()


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"cake_rt.{name}")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cake_rt' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
