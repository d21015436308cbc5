"""Argument parsing and the main flow of ``cake-rt bench``.

    cake-rt bench all --json run.json --plot run.png     every row of both suites, peers when importable
    cake-rt bench dsa --rows S1,A1 --heads 64            two DSA rows at H = 64 (+ their side-stream rows)
    cake-rt bench ssd --suite quick --processes 4        each row in 4 fresh processes, median
    cake-rt bench all --dry-run                          list what would run (no GPU needed)
    cake-rt bench selfcheck                              the runner's own check (copy kernel, SM holds)
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from .. import cli as _cli
from ..cli import EXIT_FAILED, EXIT_NO_GPU, EXIT_OK, EXIT_TEXT, EXIT_USAGE


def gpu_problem():
    """The CLI's one GPU probe (``cake_rt.cli.gpu_problem``), looked up per call so a test can patch either."""
    return _cli.gpu_problem()
from .peers import SSD_PEERS
from .suites import TARGETS, build_plan, load_suite, parse_int_list

EXIT_FAILED_ROWS = EXIT_FAILED


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``cake-rt bench`` (the top-level parser's ``bench`` subcommand and ``python -m cake_rt.bench``)."""
    p.add_argument("target", nargs="?", default="all", choices=TARGETS,
                   help="what to run (default: all = ssd + dsa; selfcheck = the runner's own copy-kernel row)")
    sel = p.add_mutually_exclusive_group()
    sel.add_argument("--suite", metavar="NAME", help="a named subset of the suite files (default, quick, big, tails, long)")
    sel.add_argument("--rows", metavar="S1,C1,...", help="comma-separated row names (see --dry-run)")
    p.add_argument("--heads", metavar="32,64", help="DSA head counts (default: the suite file's, 32,64)")
    p.add_argument("--side-stream", metavar="1,32", dest="side_stream",
                   help="SMs to hold in the DSA side-stream table, or 'none' (default: the suite file's, 1,32)")
    p.add_argument("--processes", type=int, default=1, metavar="N",
                   help="run each row in N fresh processes (arm order alternating) and take the median (default 1: in this process)")
    p.add_argument("--repeats", type=int, default=20, metavar="N", help="timed calls per arm (default 20; fewer for arms slower than --budget-s allows)")
    p.add_argument("--warmup", type=int, default=3, metavar="N", help="untimed calls per arm first (default 3)")
    p.add_argument("--budget-s", type=float, default=2.0, dest="budget_s", metavar="S",
                   help="at most this many seconds of timed calls per arm (default 2; never fewer than 5 calls)")
    p.add_argument("--warm-l2", action="store_true", dest="warm_l2", help="do not flush the L2 between calls")
    p.add_argument("--no-peers", action="store_true", dest="no_peers", help="do not run the peers")
    p.add_argument("--seed", type=int, default=1234, help="random inputs seed (default 1234)")
    p.add_argument("--json", metavar="PATH", help="write every figure and the machine header as JSON")
    p.add_argument("--plot", metavar="PATH", help="write a PNG of every row against its floor and peers (needs matplotlib)")
    p.add_argument("--speedup-plot", dest="speedup_plot", metavar="PATH",
                   help="write a PNG of cake-rt's speedup over each peer per row (needs matplotlib)")
    p.add_argument("--compare", metavar="OLD.json", help="add a speedup column against an earlier --json run")
    p.add_argument("--markdown", metavar="PATH", help="also write the tables as Markdown")
    p.add_argument("--from-json", dest="from_json", metavar="RUN.json",
                   help="measure nothing: re-render the tables (and --plot, --markdown, --compare) of a saved run; no GPU needed")
    p.add_argument("--time-limit", type=float, dest="time_limit", metavar="S",
                   help="skip the rows not started after S seconds (they are listed as skipped)")
    p.add_argument("--dry-run", action="store_true", dest="dry_run", help="list the rows that would run and exit")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cake-rt bench",
        description="Benchmark cake-rt's kernels on this GPU: the SSD combined and DSA indexer suites "
                    "(shipped as data in cake_rt/bench/suites/), against the measured copy and bf16 "
                    "matrix floors and the optional peers (mamba_ssm and vLLM Triton SSD, PyTorch eager).",
        epilog="Timing: GPU time of one synchronized call (CUDA events; the call enqueued behind a delay kernel), "
               "eager wall time from an idle stream and host time; median and p20/p80 over repeats; cold L2 "
               "unless --warm-l2. " + EXIT_TEXT)
    add_arguments(p)
    return p


def _options(args) -> dict:
    return {"repeats": args.repeats, "warmup": args.warmup, "warm_l2": args.warm_l2, "peers": not args.no_peers,
            "budget_s": args.budget_s, "seed": args.seed, "min_repeats": min(5, args.repeats)}


def plan_from_args(args) -> list:
    """The plan for parsed arguments (ValueError names the flag at fault)."""
    rows = [r.strip() for r in args.rows.split(",") if r.strip()] if args.rows is not None else None
    if args.rows is not None and not rows:
        raise ValueError("--rows: expected at least one row name")
    heads = parse_int_list(args.heads, "--heads") if args.heads else None
    side = parse_int_list(args.side_stream, "--side-stream", allow_none=True) if args.side_stream is not None else None
    for name, v, lo in (("--processes", args.processes, 1), ("--repeats", args.repeats, 1), ("--warmup", args.warmup, 0)):
        if v < lo:
            raise ValueError(f"{name}: expected an integer >= {lo}, got {v}")
    if not args.budget_s > 0:
        raise ValueError(f"--budget-s: expected a positive number, got {args.budget_s}")
    if args.time_limit is not None and not args.time_limit > 0:
        raise ValueError(f"--time-limit: expected a positive number of seconds, got {args.time_limit}")
    if args.seed < 0:
        raise ValueError(f"--seed: expected an integer >= 0, got {args.seed}")
    return build_plan(args.target, suite=args.suite, rows=rows, heads=heads, side_stream=side)


def describe_plan(plan: list) -> str:
    """The --dry-run listing: one line per item with its geometry and counts."""
    from .layouts import dsa_floor_counts, dsa_layout, ssd_floor_counts

    lines = []
    for it in plan:
        if it.table == "ssd":
            p = dict(it.defaults)
            p.update(it.params)
            fl, nb, _ = ssd_floor_counts(p)
            segs = len(p.get("cu_seqlens_lengths") or []) or p["batch"]
            lines.append(f"ssd         {it.row:<11} batch {p['batch']} x seqlen {p['seqlen']}, H {p['nheads']}, "
                         f"P {p['headdim']}, N {p['dstate']}, G {p['ngroups']}, chunk {p['chunk']}, {segs} segments; "
                         f"{fl / 1e9:.1f} GFLOP, {nb / 1e6:.1f} MB; arms: ours, {', '.join(SSD_PEERS)}")
        elif it.table in ("dsa", "side_stream"):
            lay = dsa_layout(it.params)
            fl, nb, _ = dsa_floor_counts(lay, it.heads, it.defaults.get("head_dim", 128), it.defaults.get("topk", 2048))
            what = ("arms: prepared, eager, torch-eager" if it.table == "dsa"
                    else f"holds 0,{','.join(map(str, it.holds))} SMs x schedules {', '.join(it.schedules)}")
            lines.append(f"{it.table:<11} {it.row:<11} H {it.heads}, T {lay.T}, Tkv {lay.Tkv}, {lay.segments} segments, "
                         f"{lay.visible_pairs:,} visible pairs; {fl / 1e9:.1f} GFLOP, {nb / 1e6:.1f} MB; {what}")
        else:
            lines.append(f"{it.table:<11} {it.row:<11} {it.params.get('shape')}")
    lines.append(f"{len(plan)} items")
    return "\n".join(lines)


def main(argv=None) -> int:
    """``python -m cake_rt.bench``: parse ``argv`` (the arguments after ``bench``) and run."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed by argparse
        return int(exc.code or 0)
    return run(args, argv)


def _want_plots(args) -> list:
    return [(flag, path) for flag, path in (("--plot", args.plot), ("--speedup-plot", args.speedup_plot)) if path]


def run(args, argv) -> int:
    """The bench for parsed arguments; returns the exit status."""
    try:
        plan = plan_from_args(args)
        old = None
        if args.compare:
            from .report import validate_doc

            with open(args.compare, encoding="utf-8") as f:  # an OSError names the file
                try:
                    old = json.load(f)
                    validate_doc(old)
                except (ValueError, RecursionError) as exc:  # RecursionError: nesting json cannot read
                    raise ValueError(f"--compare: {args.compare} is not a cake-rt bench JSON file: {exc}") from None
        for flag, path in (("--json", args.json), ("--plot", args.plot), ("--speedup-plot", args.speedup_plot),
                           ("--markdown", args.markdown)):
            if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
                raise ValueError(f"{flag}: the folder of {path} does not exist")
    except (ValueError, OSError) as exc:
        print(f"cake-rt bench: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.dry_run:
        print(describe_plan(plan))
        return EXIT_OK
    from .plot import matplotlib_available

    if _want_plots(args) and not matplotlib_available():
        flags = " and ".join(f for f, _ in _want_plots(args))
        print(f"cake-rt bench: {flags} needs matplotlib (pip install matplotlib); nothing was run", file=sys.stderr)
        return EXIT_FAILED
    if args.from_json:
        return _render_saved(args, old)
    problem = gpu_problem()
    if problem is not None:
        print(f"cake-rt bench: {problem}; benchmarks need a CUDA GPU (--dry-run lists the rows).", file=sys.stderr)
        return EXIT_NO_GPU

    from .report import compare, finalize, method_text, validate_doc
    from .runner import Progress, run_plan

    total = len(plan) * max(1, args.processes)
    progress = Progress(total)
    config = {"argv": argv, "target": args.target, "suite": args.suite, "rows": args.rows, "heads": args.heads,
              "side_stream": args.side_stream, "processes": args.processes, **_options(args),
              "suite_files": {n: load_suite(n).get("title") for n in ("ssd", "dsa")},
              "method": method_text(args.warm_l2, args.processes)}

    def checkpoint(partial: dict) -> None:
        """After every row: the rows so far in --json (marked partial), so a cut-off run keeps them."""
        from .report import write_json

        if args.json:
            try:
                write_json(dict(partial, config=config), args.json)
            except OSError:
                pass  # reported by the final write

    doc = run_plan(plan, _options(args), processes=args.processes, progress=progress, time_limit_s=args.time_limit,
                   checkpoint=checkpoint)
    doc["config"] = config
    finalize(doc)
    if old is not None:
        compare(doc, old, args.compare)
    try:
        validate_doc(doc)
    except ValueError as exc:  # report it, but never lose a run's figures over it
        doc.setdefault("notes", []).append(f"schema check failed: {exc}")
        print(f"cake-rt bench: the result does not follow the schema: {exc}", file=sys.stderr)
    written = _emit(doc, args)
    failed = [r["key"] for r in doc["records"] if r.get("error")]
    return EXIT_FAILED if failed or not written else EXIT_OK


MD_BEGIN, MD_END = "<!-- cake-rt bench: begin -->", "<!-- cake-rt bench: end -->"


def write_markdown(text: str, path: str) -> None:
    """Write the Markdown tables to ``path``; when the file exists and holds the two marker lines
    (``MD_BEGIN``, ``MD_END``), only the part between them is replaced (how docs/benchmarks.md is updated)."""
    old = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = f.read()
    if old is not None and MD_BEGIN in old and MD_END in old.split(MD_BEGIN, 1)[1]:
        head, rest = old.split(MD_BEGIN, 1)
        tail = rest.split(MD_END, 1)[1]
        text = head + MD_BEGIN + "\n" + text + MD_END + tail
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _emit(doc: dict, args) -> bool:
    """Print the tables; write --json, --markdown, --plot and --speedup-plot. False when one could not be written."""
    from .plot import write_plot, write_speedup_plot
    from .report import format_markdown, format_tables, write_json

    print(format_tables(doc))
    ok = True
    writers = [("--json", args.json, lambda p: write_json(doc, p)),
               ("--markdown", args.markdown, lambda p: write_markdown(format_markdown(doc), p)),
               ("--plot", args.plot, lambda p: write_plot(doc, p)),
               ("--speedup-plot", args.speedup_plot, lambda p: write_speedup_plot(doc, p))]
    for flag, path, write in writers:
        if not path:
            continue
        try:
            write(path)
            print(f"wrote {path}")
        except Exception as exc:
            ok = False
            print(f"cake-rt bench: {flag} {path} not written: {exc.__class__.__name__}: {exc}", file=sys.stderr)
    return ok


def _render_saved(args, old) -> int:
    """--from-json: the tables and files of a saved run, re-derived from its raw times (no GPU)."""
    from .report import compare, finalize, validate_doc

    try:
        with open(args.from_json, encoding="utf-8") as f:
            doc = json.load(f)
        validate_doc(doc)
    except (OSError, ValueError, RecursionError) as exc:
        print(f"cake-rt bench: --from-json: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json and os.path.abspath(args.json) == os.path.abspath(args.from_json):
        print("cake-rt bench: --json: would overwrite the --from-json file", file=sys.stderr)
        return EXIT_USAGE
    finalize(doc)
    if old is not None:
        compare(doc, old, args.compare)
    return EXIT_OK if _emit(doc, args) else EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
