"""The ``cake-rt`` command.

    cake-rt                 info, then a self-test when a GPU is present
    cake-rt info            versions, GPUs and the exact compile target of each
    cake-rt selftest        compile and run the building-block kernels and a small call of each op,
                            checked against the float64 references
    cake-rt bench ...       the benchmark suites (``cake-rt bench --help``)
    cake-rt calibrate       measure the SSD family-selection cost model on this GPU

Without a GPU, ``cake-rt`` and ``cake-rt info`` say so plainly and exit 0 after printing what they can;
``selftest``, ``bench`` and ``calibrate`` need a GPU and exit 1 with one line.
"""
from __future__ import annotations

import argparse
import platform
import sys

from . import __version__


def _versions() -> list:
    rows = [("cake-rt", __version__), ("python", platform.python_version())]
    import numpy

    rows.append(("numpy", numpy.__version__))
    try:
        import ml_dtypes

        rows.append(("ml_dtypes", ml_dtypes.__version__))
    except Exception as exc:  # pragma: no cover
        rows.append(("ml_dtypes", f"missing ({exc})"))
    try:
        import cupy

        rows.append(("cupy", cupy.__version__))
    except Exception as exc:
        rows.append(("cupy", f"not importable ({exc})"))
        return rows
    try:
        from .launch.compile import nvrtc_version

        rows.append(("nvrtc", ".".join(map(str, nvrtc_version()))))
    except Exception as exc:
        rows.append(("nvrtc", f"not available ({exc})"))
    try:
        v = cupy.cuda.runtime.driverGetVersion()
        rows.append(("cuda driver", f"{v // 1000}.{(v % 1000) // 10}" if v else "none found"))
    except Exception:
        rows.append(("cuda driver", "none found"))
    return rows


def _gpu_problem():
    """None when a usable GPU is present, else a one-line reason."""
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"no CUDA GPU found ({exc.__class__.__name__}: {exc})"
    if n == 0:
        return "no CUDA GPU found"
    return None


def cmd_info(_args) -> int:
    for k, v in _versions():
        print(f"{k:12s} {v}")
    try:
        from .launch.compile import available_targets

        print(f"{'targets':12s} {', '.join(available_targets())} (what this NVRTC compiles for)")
    except Exception as exc:
        print(f"{'targets':12s} unknown ({exc})")
    problem = _gpu_problem()
    if problem is not None:
        print(f"gpu          {problem}: cake-rt can compile its kernels here but not run them.")
        return 0
    import cupy

    from .launch.arch import device_info

    for i in range(cupy.cuda.runtime.getDeviceCount()):
        d = device_info(i)
        print(f"gpu {i}        {d.name}, sm_{d.capability[0]}{d.capability[1]} -> target {d.target}, "
              f"{d.sm_count} SMs, {d.smem_per_block_optin // 1024} KiB smem/block, "
              f"cooperative={'yes' if d.cooperative_launch else 'no'}, L2 {d.l2_bytes >> 20} MiB"
              + ("" if d.supported else "  (unsupported: cake-rt needs sm_80+)"))
    return 0


def cmd_selftest(args) -> int:
    problem = _gpu_problem()
    if problem is not None:
        print(f"cake-rt selftest: {problem}; the self-test runs kernels and needs a GPU.")
        return 1
    from .selftest import run_selftest

    return run_selftest(verbose=args.verbose)


def cmd_calibrate(args) -> int:
    problem = _gpu_problem()
    if problem is not None:
        print(f"cake-rt calibrate: {problem}; calibration measures kernels and needs a GPU.")
        return 1
    try:
        from .ops.ssd import calibrate
    except ImportError as exc:
        print(f"cake-rt calibrate: the SSD calibration is not available in this build ({exc})")
        return 1
    return int(calibrate(argv=args.rest) or 0)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":
        # The bench package owns every bench flag.
        problem_free_help = any(a in ("-h", "--help", "--dry-run") or a.startswith("--from-json") for a in argv[1:])
        if not problem_free_help:
            problem = _gpu_problem()
            if problem is not None:
                print(f"cake-rt bench: {problem}; benchmarks need a GPU (use --dry-run to list the rows).")
                return 1
        from .bench import main as bench_main

        return int(bench_main(argv[1:]) or 0)
    parser = argparse.ArgumentParser(prog="cake-rt", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("info", help="versions, GPUs and compile targets")
    p = sub.add_parser("selftest", help="compile and run every building block and a small call of each op")
    p.add_argument("-v", "--verbose", action="store_true")
    sub.add_parser("bench", help="benchmark suites (cake-rt bench --help)")
    p = sub.add_parser("calibrate", help="measure the SSD selection cost model on this GPU")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command in (None, "info"):
        rc = cmd_info(args)
        if args.command is None and _gpu_problem() is None:
            args.verbose = False
            rc = cmd_selftest(args) or rc
        return rc
    if args.command == "selftest":
        return cmd_selftest(args)
    if args.command == "calibrate":
        return cmd_calibrate(args)
    parser.print_help()
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
