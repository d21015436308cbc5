"""Runs a plan: floors first, then every Item, in this process or in N fresh worker processes.

With ``processes`` N > 1, each Item runs in N fresh ``python -m cake_rt.bench.worker`` processes,
alternating the arm order (process p takes order p % 2, so both orders occur for N >= 2), and every
figure is the median over the processes of each process's median.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

SCHEMA = "cake-rt-bench/1"


class Progress:
    """A plain-text progress bar on stderr: redrawn in place on a terminal, one line per step otherwise."""

    def __init__(self, total: int, stream=None, width: int = 28):
        self.total = max(1, int(total))
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.monotonic()

    def _bar(self) -> str:
        fill = int(self.width * self.done / self.total)
        return "[" + "#" * fill + "." * (self.width - fill) + f"] {self.done}/{self.total}"

    def step(self, label: str, result: str = "") -> None:
        """Mark one step done; ``label`` names it, ``result`` is a short outcome."""
        self.done += 1
        line = f"{self._bar()} {time.monotonic() - self.t0:6.1f}s {label}" + (f": {result}" if result else "")
        if self.tty:
            self.stream.write("\r\033[K" + line)
            if self.done >= self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\033[K")
        self.stream.write(text + "\n")
        self.stream.flush()


def _short(recs: list) -> str:
    parts = []
    for r in recs:
        if r.get("error"):
            return "ERROR " + r["error"][:100]
        ms = r.get("ms", {}).get("median")
        if ms is not None:
            tag = r["arm"] + (f"@{r['hold']}" if r.get("hold") else "")
            parts.append(f"{tag} {ms:.4g} ms")
    return ", ".join(parts[:4])


def run_worker(item, opts: dict, order: int, *, timeout_s: float = 600.0) -> list:
    """Run one Item in a fresh Python process; returns its raw records."""
    from .cases import _base_record

    with tempfile.TemporaryDirectory(prefix="cake-rt-bench-") as tmp:
        spec_path, out_path = os.path.join(tmp, "spec.json"), os.path.join(tmp, "out.json")
        clean = {k: v for k, v in opts.items() if not k.startswith("_")}
        with open(spec_path, "w") as f:
            json.dump({"item": item.to_dict(), "opts": clean, "order": order}, f)
        try:
            proc = subprocess.run([sys.executable, "-m", "cake_rt.bench.worker", spec_path, out_path],
                                  capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            rec = _base_record(item, "error")
            rec["error"] = f"worker process timed out after {timeout_s} s"
            return [rec]
        if proc.returncode != 0 or not os.path.exists(out_path):
            rec = _base_record(item, "error")
            rec["error"] = f"worker process exited {proc.returncode}: {proc.stderr.strip()[-600:]}"
            return [rec]
        with open(out_path) as f:
            return json.load(f)


def merge_processes(per_process: list) -> list:
    """Records of the same Item from several processes -> one record per key, times combined."""
    from .timing import combine_processes

    by_key, order = {}, []
    for recs in per_process:
        for r in recs:
            if r["key"] not in by_key:
                by_key[r["key"]] = []
                order.append(r["key"])
            by_key[r["key"]].append(r)
    out = []
    for key in order:
        group = by_key[key]
        errs = [r for r in group if r.get("error")]
        if errs:
            out.append(errs[0])
            continue
        base = json.loads(json.dumps(group[0]))
        base["ms"] = combine_processes([r["ms"] for r in group])
        for name in base.get("peers", {}):
            pm = [r["peers"][name]["ms"] for r in group if "ms" in r["peers"].get(name, {})]
            if pm:
                base["peers"][name]["ms"] = combine_processes(pm)
            checks = [r["peers"][name].get("check", {}).get("ok") for r in group]
            base["peers"][name].setdefault("check", {})["ok"] = all(c is not False for c in checks)
        base["arm_order"] = [r.get("arm_order") for r in group]
        base["notes"] = sorted({n for r in group for n in r.get("notes", [])})
        out.append(base)
    return out


def _free_pool() -> None:
    """Give the previous row's buffers back, so a row never runs short of memory another row held."""
    try:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
    except Exception:
        pass


def run_plan(plan: list, opts: dict, *, processes: int = 1, progress: Progress | None = None,
             time_limit_s: float | None = None, measure_floors_first: bool = True, checkpoint=None) -> dict:
    """Floors, then every Item; returns the raw result document (``report.finalize`` derives the figures)."""
    from .cases import _base_record, run_item
    from .floors import measure_floors
    from .machine import machine_header
    from .peers import peer_status

    t0 = time.monotonic()
    header = machine_header()
    peers = peer_status()
    header["peers"] = {k: v for k, v in peers.items() if k.endswith("_version")}
    floors = None
    notes = [f"peer {k} not available: {v}" for k, v in peers.items() if not k.endswith("_version") and v]
    if measure_floors_first:
        import cupy

        try:
            stream = cupy.cuda.Stream(non_blocking=True)
            with stream:
                floors = measure_floors(stream)
            stream.synchronize()
        except Exception as exc:  # the rows still run; they get no floor columns
            notes.append(f"floors not measured: {exc.__class__.__name__}: {exc}")
        _free_pool()
        if progress is not None and floors is not None:
            progress.note(f"floors: copy {floors['copy_tbps']:.2f} TB/s, bf16 matrix {floors['bf16_tflops']:.0f} TFLOP/s "
                          f"({floors['gemm']['method'].split(',')[0]})")
    records = []
    in_opts = dict(opts, _peer_status=peers)
    for item in plan:
        if time_limit_s is not None and time.monotonic() - t0 > time_limit_s:
            rec = _base_record(item, "skipped")
            rec["error"] = f"skipped: the run passed --time-limit {time_limit_s:.0f} s"
            records.append(rec)
            if progress is not None:
                for _ in range(max(1, processes)):
                    progress.step(item.label(), "skipped (time limit)")
            continue
        if processes <= 1:
            recs = run_item(item, in_opts, 0)
            if progress is not None:
                progress.step(item.label(), _short(recs))
        else:
            per = []
            for p in range(processes):
                per.append(run_worker(item, opts, p % 2))
                if progress is not None:
                    progress.step(f"{item.label()} (process {p + 1}/{processes})", _short(per[-1]))
            recs = merge_processes(per)
        records += recs
        _free_pool()
        if checkpoint is not None:
            checkpoint({"schema": SCHEMA, "machine": header, "floors": floors, "notes": notes, "records": records,
                        "partial": True, "wall_s": time.monotonic() - t0})
    return {"schema": SCHEMA, "machine": header, "floors": floors, "notes": notes, "records": records,
            "wall_s": time.monotonic() - t0}
