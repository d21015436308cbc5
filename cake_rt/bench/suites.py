"""The benchmark suites as data, and the plan of one run.

The suites are package data (``cake_rt/bench/suites/<name>.json``) so that a plain ``pip install cake-rt``
gets a working ``cake-rt bench``; the repository-level ``bench/`` folder holds recorded results only.

A suite file holds ``rows`` (each with a unique ``name``), named subsets under ``suites`` (``default``
is what runs without ``--suite``/``--rows``) and, for DSA, the ``side_stream`` table's rows, heads,
holds and schedules.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources

SUITE_NAMES = ("ssd", "dsa")
TARGETS = ("ssd", "dsa", "all", "selfcheck")


def load_suite(name: str) -> dict:
    """The parsed ``suites/<name>.json``, checked for the fields the runner reads."""
    if name not in SUITE_NAMES:
        raise ValueError(f"suite: expected one of {', '.join(SUITE_NAMES)}, got {name!r}")
    text = resources.files(__package__).joinpath("suites", f"{name}.json").read_text(encoding="utf-8")
    data = json.loads(text)
    validate_suite(data, name)
    return data


def suite_rows(name: str) -> list:
    """Each row of ``suites/<name>.json`` as one dict: the suite's defaults, then the row's own fields."""
    suite = load_suite(name)
    return [{**suite.get("defaults", {}), **r} for r in suite["rows"]]


def validate_suite(data: dict, name: str) -> None:
    """Raise ValueError when a suite file misses what the runner needs."""
    if data.get("suite") != name:
        raise ValueError(f"suite file {name}.json: field 'suite' is {data.get('suite')!r}, expected {name!r}")
    rows = data.get("rows")
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"suite file {name}.json: 'rows' must be a non-empty list")
    names = [r.get("name") for r in rows]
    if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"suite file {name}.json: row names must be unique non-empty strings, got {names}")
    subsets = data.get("suites", {})
    if "default" not in subsets:
        raise ValueError(f"suite file {name}.json: 'suites' needs a 'default' subset")
    for sub, members in subsets.items():
        unknown = [m for m in members if m not in names]
        if unknown:
            raise ValueError(f"suite file {name}.json: subset {sub!r} names unknown rows {unknown}")
    side = data.get("side_stream")
    if side is not None:
        unknown = [m for m in side.get("rows", []) if m not in names]
        if unknown:
            raise ValueError(f"suite file {name}.json: side_stream names unknown rows {unknown}")
    required = {"ssd": ("batch", "seqlen", "nheads", "headdim", "dstate", "ngroups", "chunk"), "dsa": ("layout",)}[name]
    for r in rows:
        missing = [k for k in required if k not in r]
        if missing:
            raise ValueError(f"suite file {name}.json: row {r['name']!r} lacks {missing}")


@dataclass
class Item:
    """One unit of work of a run: a row of a table, measured with all its arms in one process."""

    table: str  # "ssd" | "dsa" | "side_stream" | "selfcheck"
    row: str
    params: dict
    heads: int | None = None
    holds: tuple = ()
    schedules: tuple = ()
    defaults: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        k = f"{self.table}/{self.row}"
        if self.heads is not None:
            k += f"/H{self.heads}"
        return k

    def label(self) -> str:
        s = f"{self.table} {self.row}"
        if self.heads is not None:
            s += f" H={self.heads}"
        if self.holds:
            s += " hold " + ",".join(str(h) for h in self.holds)
        return s

    def to_dict(self) -> dict:
        return {"table": self.table, "row": self.row, "params": self.params, "heads": self.heads,
                "holds": list(self.holds), "schedules": list(self.schedules), "defaults": self.defaults}

    @classmethod
    def from_dict(cls, d: dict) -> "Item":
        return cls(d["table"], d["row"], d["params"], d.get("heads"), tuple(d.get("holds", ())),
                   tuple(d.get("schedules", ())), d.get("defaults", {}))


SELFCHECK_ROW = {"name": "copy-256M", "shape": "device-to-device copy kernel, 256 MiB (runner self-check)",
                 "nbytes": 256 << 20}


def parse_int_list(text: str, name: str, *, allow_none: bool = False, minimum: int = 1):
    """'32,64' -> (32, 64); 'none' -> () when allowed. ValueError naming the flag otherwise."""
    t = text.strip().lower()
    if allow_none and t in ("none", "0", "off", ""):
        return ()
    try:
        vals = tuple(int(v) for v in t.split(",") if v.strip())
    except ValueError:
        raise ValueError(f"{name}: expected comma-separated integers, got {text!r}") from None
    if not vals or any(v < minimum for v in vals):
        raise ValueError(f"{name}: expected integers >= {minimum}, got {text!r}")
    return vals


def build_plan(target: str, *, suite: str | None = None, rows=None, heads=None, side_stream=None) -> list:
    """The list of Items a run measures.

    target: 'ssd' | 'dsa' | 'all' | 'selfcheck'. suite: a named subset (default 'default'); rows: row
    names (across the selected suites; exclusive with suite); heads: DSA head counts (default from the
    suite file); side_stream: SM holds for the DSA side-stream table (None: the suite file's holds;
    (): no side-stream table)."""
    if target not in TARGETS:
        raise ValueError(f"target: expected one of {', '.join(TARGETS)}, got {target!r}")
    if suite is not None and rows:
        raise ValueError("--suite and --rows: give one or the other, not both")
    if target == "selfcheck":
        return [Item("selfcheck", SELFCHECK_ROW["name"], dict(SELFCHECK_ROW))]
    names = SUITE_NAMES if target == "all" else (target,)
    data = {n: load_suite(n) for n in names}

    chosen = {}
    if rows:
        known = {r["name"]: n for n in names for r in data[n]["rows"]}
        unknown = [r for r in rows if r not in known]
        if unknown:
            raise ValueError(f"--rows: unknown row(s) {', '.join(unknown)} for '{target}'; "
                             f"known: {', '.join(known)}")
        for n in names:
            chosen[n] = [r for r in rows if known[r] == n]
    else:
        sub = suite or "default"
        have = [n for n in names if sub in data[n]["suites"]]
        if not have:
            avail = sorted({s for n in names for s in data[n]["suites"]})
            raise ValueError(f"--suite: unknown suite {sub!r}; available: {', '.join(avail)}")
        for n in names:
            chosen[n] = list(data[n]["suites"].get(sub, []))

    plan = []
    if "ssd" in names:
        d = data["ssd"]
        by = {r["name"]: r for r in d["rows"]}
        plan += [Item("ssd", nm, by[nm], defaults=d.get("defaults", {})) for nm in chosen["ssd"]]
    if "dsa" in names:
        d = data["dsa"]
        by = {r["name"]: r for r in d["rows"]}
        hs = tuple(heads) if heads else tuple(d["defaults"]["heads"])
        for h in hs:
            plan += [Item("dsa", nm, by[nm], heads=h, defaults=d["defaults"]) for nm in chosen["dsa"]]
        side = d.get("side_stream") or {}
        holds = tuple(side.get("holds", ())) if side_stream is None else tuple(side_stream)
        if holds and chosen["dsa"]:
            side_rows = [nm for nm in side.get("rows", []) if nm in chosen["dsa"]] if rows or suite else side.get("rows", [])
            side_heads = tuple(heads) if heads else tuple(side.get("heads", hs))
            for h in side_heads:
                plan += [Item("side_stream", nm, by[nm], heads=h, holds=holds,
                              schedules=tuple(side.get("schedules", ("ticket", "static"))), defaults=d["defaults"])
                         for nm in side_rows]
    return plan
