"""The ``cake-rt`` command: one argparse parser for every subcommand.

    cake-rt                      info, then the self-test when a GPU is present
    cake-rt info                 versions, GPUs and the exact compile target of each
    cake-rt selftest [-v]        compile and run the building blocks and a small call of each op
    cake-rt bench ...            the benchmark suites (``cake-rt bench --help``)
    cake-rt calibrate ...        fit the SSD family-selection cost model to this GPU and save it
    cake-rt warmup [ssd|dsa|all] compile the programs a workload needs into the cache ahead of time
    cake-rt cache [--clear]      where the cache is, how big, and clearing it

Exit status, every subcommand: 0 ok; 1 a check, a row or a compile failed, or an asked-for output could
not be written; 2 bad arguments; 3 no usable GPU for a subcommand that needs one.
"""
from __future__ import annotations

import argparse
import platform
import sys

from . import __version__
from .launch.arch import gpu_problem  # the one GPU probe (tests patch cake_rt.cli.gpu_problem)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_GPU = 0, 1, 2, 3
EXIT_TEXT = ("exit status: 0 ok; 1 a check, row or compile failed, or an asked-for output could not be written; "
             "2 bad arguments; 3 no usable GPU.")


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
        rows.append(("cupy", f"not importable ({exc}); install cake-rt[cuda12] or cake-rt[cuda13]"))
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


def cmd_info(_args) -> int:
    for k, v in _versions():
        print(f"{k:12s} {v}")
    try:
        from .launch.compile import available_targets

        print(f"{'targets':12s} {', '.join(available_targets())} (what this NVRTC compiles for)")
    except Exception as exc:
        print(f"{'targets':12s} unknown ({exc})")
    from .warmup import cache_summary

    c = cache_summary()
    print(f"{'cache':12s} " + (f"{c['path']} ({c['files']} files, {c['bytes'] / 2**20:.1f} MiB)" if c["path"]
                               else "off (CAKE_RT_CACHE_DIR=off)"))
    from .env import unknown_switches

    for name in unknown_switches():
        print(f"{'ignored':12s} {name} (not a cake-rt switch: no effect)")
    problem = gpu_problem()
    if problem is not None:
        print(f"gpu          {problem}: cake-rt can compile its kernels here but not run them.")
        return EXIT_OK
    import cupy

    from .launch.arch import device_info
    from .launch.compile import SUPPORTED_TARGETS, available_targets

    for i in range(cupy.cuda.runtime.getDeviceCount()):
        d = device_info(i)
        note = ""
        if not d.supported:
            note = "  (unsupported: cake-rt needs sm_80+)"
        elif d.target not in SUPPORTED_TARGETS:  # no NVRTC makes it one: the kernels are compiled for it as it is
            note = (f"  ({d.target} is not one of the targets cake-rt is tested on, {', '.join(SUPPORTED_TARGETS)}: "
                    f"its kernels are compiled for it untested)")
        elif d.target not in available_targets():
            note = f"  (this NVRTC cannot compile for {d.target}: install a newer NVRTC)"
        print(f"gpu {i}        {d.name}, sm_{d.capability[0]}{d.capability[1]} -> target {d.target}, "
              f"{d.sm_count} SMs, {d.smem_per_block_optin // 1024} KiB smem/block, "
              f"cooperative={'yes' if d.cooperative_launch else 'no'}, L2 {d.l2_bytes >> 20} MiB" + note)
    return EXIT_OK


def _need_gpu(what: str, why: str):
    problem = gpu_problem()
    if problem is None:
        return None
    print(f"cake-rt {what}: {problem}; {why} needs a GPU.", file=sys.stderr)
    return EXIT_NO_GPU


def cmd_selftest(args) -> int:
    rc = _need_gpu("selftest", "the self-test runs kernels and")
    if rc is not None:
        return rc
    from .selftest import run_selftest

    return EXIT_OK if run_selftest(verbose=args.verbose) == 0 else EXIT_FAILED


def cmd_calibrate(args) -> int:
    rows = None
    if args.rows is not None:  # checked before the GPU, as bench's rows: a misspelt row is not a GPU problem
        from .bench.suites import suite_rows

        rows = [r.strip() for r in args.rows.split(",") if r.strip()]
        known = [p["name"] for p in suite_rows("ssd")]
        unknown = [r for r in rows if r not in known]
        if not rows or unknown:
            print("cake-rt calibrate: --rows: " + (f"unknown SSD row {', '.join(map(repr, unknown))}" if unknown
                                                    else "expected at least one row name")
                  + f" (the SSD suite's rows: {', '.join(known)})", file=sys.stderr)
            return EXIT_USAGE
    rc = _need_gpu("calibrate", "calibration measures kernels and")
    if rc is not None:
        return rc
    from .bench.calibrate import calibrate

    return calibrate(rows=rows, repeats=args.repeats, save=not args.no_save, output=args.output)


def cmd_warmup(args) -> int:
    from .bench.runner import Progress
    from .warmup import OPS, parse_shapes, warmup

    ops = OPS if args.op == "all" else (args.op,)
    target = args.target
    if target is not None:
        from .launch.compile import SUPPORTED_TARGETS

        if target not in SUPPORTED_TARGETS:
            print(f"cake-rt warmup: --target: expected one of {', '.join(SUPPORTED_TARGETS)}, got {target!r}",
                  file=sys.stderr)
            return EXIT_USAGE
    else:
        problem = gpu_problem()
        if problem is not None:
            print(f"cake-rt warmup: {problem}; name the target to compile for with --target (e.g. sm_90a)",
                  file=sys.stderr)
            return EXIT_NO_GPU
        from .launch.arch import device_info

        target = device_info().target
    try:
        shapes = parse_shapes(args.shapes)
        progress = Progress(1)
        res = warmup(ops, target, shapes=shapes, jobs=args.jobs, progress=progress)
    except ValueError as exc:
        print(f"cake-rt warmup: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RuntimeError as exc:
        print(f"cake-rt warmup: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"{res['programs']} programs for {target}: {res['cached']} already cached, {res['compiled']} compiled "
          f"in {res['seconds']:.1f} s" + (f", {len(res['failed'])} FAILED" if res["failed"] else ""))
    for label, err in res["failed"]:  # the whole message: a CompileError's NVRTC log says why
        print(f"  {label}: " + "\n    ".join(err.splitlines()), file=sys.stderr)
    return EXIT_FAILED if res["failed"] else EXIT_OK


def cmd_cache(args) -> int:
    from .warmup import cache_summary, clear_cache

    c = cache_summary()
    if c["path"] is None:
        print("cache: off (CAKE_RT_CACHE_DIR=off)")
        return EXIT_OK
    if args.clear:
        try:
            n = clear_cache()
        except OSError as exc:
            print(f"cake-rt cache: --clear: {exc}", file=sys.stderr)
            return EXIT_FAILED
        print(f"cache: removed {n} files from {c['path']}")
        return EXIT_OK
    print(f"cache: {c['path']}: {c['files']} files, {c['bytes'] / 2**20:.1f} MiB "
          "(compiled cubins and calibrated cost models; `cake-rt cache --clear` empties it)")
    return EXIT_OK


def cmd_bench(args) -> int:
    from .bench.cli import run

    return run(args, args.bench_argv)


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    from .bench.cli import add_arguments as add_bench_arguments

    p = argparse.ArgumentParser(
        prog="cake-rt",
        description="cake-rt: runtime-compiled CUDA kernels (Mamba2 SSD combined prefill, deterministic DSA "
                    "indexer top-k). Without a subcommand: info, then the self-test when a GPU is present.",
        epilog=EXIT_TEXT)
    p.add_argument("--version", action="version", version=f"cake-rt {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    s = sub.add_parser("info", help="versions, GPUs, compile targets and the cache",
                       description="Versions (cake-rt, Python, NumPy, CuPy, NVRTC, driver), the targets this NVRTC "
                                   "compiles for, the cache, and each GPU with its exact target. Needs no GPU.",
                       epilog=EXIT_TEXT)
    s.set_defaults(func=cmd_info)
    s = sub.add_parser("selftest", help="compile and run every building block and a small call of each op",
                       description="Compile and run the building-block kernels and a small call of each op, "
                                   "checked against the float64 references.", epilog=EXIT_TEXT)
    s.add_argument("-v", "--verbose", action="store_true", help="one line per check with its details")
    s.set_defaults(func=cmd_selftest)
    s = sub.add_parser("bench", help="the benchmark suites (cake-rt bench --help)",
                       description="Benchmark cake-rt's kernels on this GPU: the SSD combined and DSA indexer "
                                   "suites against the measured copy and bf16 matrix floors and the optional peers "
                                   "(mamba_ssm and vLLM Triton SSD, a PyTorch eager indexer).",
                       epilog="Timing: GPU time of one synchronized call (CUDA events; the host enqueues the call "
                              "behind a delay kernel), eager wall time from an idle stream, and host time; median "
                              "and p20/p80 over repeats; cold L2 unless --warm-l2. " + EXIT_TEXT)
    add_bench_arguments(s)
    s.set_defaults(func=cmd_bench)
    s = sub.add_parser("calibrate", help="fit the SSD family-selection cost model to this GPU and save it",
                       description="Time both SSD families on the SSD suite rows, fit the cost model's constants "
                                   "and save them under the cache directory for this GPU model; ssd_combined "
                                   "uses them from then on (other GPU models keep theirs).", epilog=EXIT_TEXT)
    s.add_argument("--rows", metavar="seed,short,...", help="SSD suite rows to measure (default: all)")
    s.add_argument("--repeats", type=_positive_int, default=7, metavar="N", help="timed calls per family (default 7)")
    where = s.add_mutually_exclusive_group()  # --no-save would drop the fit that --output asks for
    where.add_argument("--output", metavar="PATH", help="write the fit here instead of the cache directory")
    where.add_argument("--no-save", action="store_true", dest="no_save", help="print the fit, save nothing")
    s.set_defaults(func=cmd_calibrate)
    s = sub.add_parser("warmup", help="compile the programs a workload needs into the cache ahead of time",
                       description="Compile each op's programs for this GPU's target (or --target, no GPU needed) "
                                   "into the disk cache, in parallel processes, so that first calls compile "
                                   "nothing. --shapes narrows the list: KEY=VALUE[,KEY=VALUE...] (all must match; "
                                   "repeat --shapes for more): SSD family (exact, chunkpar), dtype, dt_dtype, "
                                   "state_dtype, headdim, dstate, chunk; DSA heads, head_dim, windows (0: blocks of at "
                                   "most 65,536 keys, 1: longer; both by default); or any define of the programs "
                                   "(SSD_P, DSA_H, ...). Without --shapes, the programs of the shapes the tests and the "
                                   "bench run; with an SSD key, any SSD shape the op takes (every head and group "
                                   "count); with DSA heads or head_dim, any head count the op takes (8 to 128, step 8).",
                       epilog="example: cake-rt warmup ssd --shapes dtype=bfloat16,headdim=64,dstate=128,chunk=256. "
                              + EXIT_TEXT)
    s.add_argument("op", nargs="?", default="all", choices=("ssd", "dsa", "all"), help="which op (default all)")
    s.add_argument("--shapes", action="append", metavar="KEY=VALUE,...", help="only programs matching these")
    s.add_argument("--target", metavar="sm_90a", help="compile for this target (default: this GPU's)")
    s.add_argument("--jobs", type=_positive_int, metavar="N", help="parallel compile processes (default: CPUs)")
    s.set_defaults(func=cmd_warmup)
    s = sub.add_parser("cache", help="where the compile cache is and how big; --clear empties it",
                       description="The disk cache holds compiled cubins (keyed by source, defines, options, NVRTC "
                                   "version and target) and calibrated cost models. Location: $CAKE_RT_CACHE_DIR, "
                                   "else $XDG_CACHE_HOME/cake-rt, else ~/.cache/cake-rt.", epilog=EXIT_TEXT)
    s.add_argument("--clear", action="store_true", help="delete every cached cubin and cost model")
    s.set_defaults(func=cmd_cache)
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help / --version (0) or a usage error (2), already printed by argparse
        return int(exc.code or 0)
    if args.command is None:
        rc = cmd_info(args)
        if gpu_problem() is None:
            args.verbose = False
            rc = cmd_selftest(args) or rc
        return rc
    if args.command == "bench":
        args.bench_argv = argv[argv.index("bench") + 1:]
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
