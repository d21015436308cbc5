"""From raw records to the figures of a row, the terminal table, the JSON file and ``--compare``.

A row's figures (``finalize``):
    floor_ms        max(flops / measured bf16 rate, bytes / measured copy bandwidth); floor_bound says which
    floor_fraction  floor_ms / ms (1.0 = at the floor)
    tflops, tbps    flops / ms and bytes / ms
    peers[p].speedup  peer ms / our ms, same inputs, same process; only when the peer's cross-check passed
    slowdown        (side stream) ms with SMs held / ms of the same schedule unheld
    static_over_ticket (side stream, ticket rows) static ms / ticket ms under the same hold
    target          the H200 target of the suite file and whether this run met it
"""
from __future__ import annotations

import json
import math

from .floors import floor_ms
from .runner import SCHEMA

REQUIRED_MACHINE = ("cake_rt", "git_hash", "cupy", "nvrtc", "gpu", "cuda_driver", "cuda_runtime")
REQUIRED_RECORD = ("key", "table", "row", "arm", "error")
REQUIRED_MS = ("median", "p20", "p80", "n")


def _side_target():
    try:
        from .suites import load_suite

        return load_suite("dsa").get("side_stream", {}).get("target")
    except Exception:
        return None


def _peer_speedup_min(rec: dict, ms: float):
    sp = [p.get("speedup") for p in rec.get("peers", {}).values() if p.get("speedup") is not None]
    return min(sp) if sp else None


# The figures a target may ask for: each one's value in a record (None: not measured in this run) and its test.
_TARGET_FIGURES = {
    "min_floor_fraction": (lambda r, ms: r.get("floor_fraction"), lambda v, t: v >= t),
    "max_floor_ratio": (lambda r, ms: ms / r["floor_ms"] if r.get("floor_ms") else None, lambda v, t: v <= t),
    "max_ms": (lambda r, ms: ms, lambda v, t: v <= t),
    "min_peer_speedup": (_peer_speedup_min, lambda v, t: v >= t),
    "max_slowdown": (lambda r, ms: r.get("slowdown"), lambda v, t: v <= t),
}


def _eval_target(rec: dict, target: dict | None, gpu: str = "H200"):
    """Each figure the target names, checked: ``met`` is True only when every one of them could be checked and passed,
    False when any checked one failed, None when none failed but some could not be checked (``unchecked``: a row run
    without its peers, a floor not measured), so a partial run never reads as a met target. The targets are the
    H200's: on another GPU (``gpu``, the machine header's name) nothing is checked and ``met`` is None."""
    if not target or "ms" not in rec:
        return None
    if "H200" not in gpu:
        return {"spec": target, "checks": {}, "unchecked": [], "met": None, "other_gpu": gpu}
    ms = rec["ms"]["median"]
    checks, unchecked = {}, []
    for name, (value, passes) in _TARGET_FIGURES.items():
        if name not in target:
            continue
        v = value(rec, ms)
        if v is None:
            unchecked.append(name)
        else:
            checks[name] = passes(v, target[name])
    met = False if not all(checks.values()) else (None if unchecked or not checks else True)
    return {"spec": target, "checks": checks, "unchecked": unchecked, "met": met}


# What ``finalize`` derives: dropped first, so a saved run (--from-json) shows figures of its raw times only.
_DERIVED = ("tflops", "tbps", "floor_ms", "floor_bound", "floor_fraction", "unheld_ms", "slowdown", "static_over_ticket",
            "target_result")


def finalize(doc: dict) -> dict:
    """Add the derived figures to every record of a raw result document (in place; returns it)."""
    floors = doc.get("floors")
    recs = doc.get("records", [])
    for r in recs:
        for k in _DERIVED:
            r.pop(k, None)
        for p in r.get("peers", {}).values():
            p.pop("speedup", None)
        if r.get("error") or "ms" not in r:
            continue
        ms = r["ms"]["median"]
        fl, nb = r.get("flops") or 0, r.get("bytes") or 0
        r["tflops"] = fl / (ms * 1e-3) / 1e12 if ms > 0 else None
        r["tbps"] = nb / (ms * 1e-3) / 1e12 if ms > 0 else None
        if floors:
            r["floor_ms"], r["floor_bound"] = floor_ms(fl, nb, floors)
            r["floor_fraction"] = r["floor_ms"] / ms if ms > 0 else None
        for p in r.get("peers", {}).values():
            if "ms" in p:
                ok = p.get("check", {}).get("ok", True)
                p["speedup"] = p["ms"]["median"] / ms if ok and ms > 0 else None
                if not ok:
                    p["note"] = "cross-check failed: no speedup reported"
    # Side-stream: slowdown against the same schedule unheld; static over ticket under the same hold.
    side = [r for r in recs if r.get("table") == "side_stream" and "ms" in r and not r.get("error")]
    by = {(r["row"], r["heads"], r["arm"], r.get("hold")): r for r in side}
    starget = _side_target()
    for r in side:
        base = by.get((r["row"], r["heads"], r["arm"], 0))
        if base is not None:
            r["unheld_ms"] = base["ms"]["median"]
            r["slowdown"] = r["ms"]["median"] / base["ms"]["median"]
        st = by.get((r["row"], r["heads"], "static", r.get("hold")))
        if r["arm"] == "ticket" and st is not None:
            r["static_over_ticket"] = st["ms"]["median"] / r["ms"]["median"]
        r["target"] = starget if (starget and r["arm"] == starget.get("schedule")
                                  and r.get("hold") == starget.get("hold")) else None
    gpu = str(doc.get("machine", {}).get("gpu", {}).get("name", ""))
    for r in recs:
        if not r.get("error"):
            r["target_result"] = _eval_target(r, r.get("target"), gpu)
    return doc


# ---------------------------------------------------------------------------------------------- table


def _f(v, fmt="{:.3f}", none="-"):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return none
    return fmt.format(v)


def _ms(r):
    m = r.get("ms")
    if not m:
        return "-"
    return f"{m['median']:.4f} ({m['p20']:.4f}-{m['p80']:.4f})"


def _host(r):
    """The steady-state host ms, and the host's Python speed measured right after it (``timing.host_probe_us``), which
    the raw figure carries: rows whose host path is the same code differ by the machine's speed between them."""
    h = (r.get("ms") or {}).get("host")
    if not isinstance(h, dict):
        return "-"
    probe = h.get("probe_us")
    return f"{h['median']:.4f}" + (f" (probe {probe:.1f} us)" if probe else "")


def _wall(ms):
    w = (ms or {}).get("wall")
    return f"{w['median']:.4f}" if isinstance(w, dict) else "-"


def _peer_names(recs) -> list:
    return list(dict.fromkeys(n for r in recs for n in r.get("peers", {})))


def _peer_cells(r, name):
    p = r.get("peers", {}).get(name)
    if not p or "ms" not in p:
        return "-", "-"
    sp = p.get("speedup")
    return f"{p['ms']['median']:.4f}", (f"{sp:.2f}x" if sp is not None else "check failed")


def _target_cell(r):
    t = r.get("target_result")
    if not t:
        return ""
    if t.get("other_gpu") is not None:
        return "n/a (not an H200)"
    if t.get("met") is None:
        return "unchecked: " + ", ".join(t["unchecked"]) if t.get("unchecked") else ""
    return "met" if t["met"] else "MISSED"


def _md(headers, rows) -> str:
    out = ["| " + " | ".join(str(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _grid(headers, rows) -> str:
    widths = [max(len(str(h)), *(len(str(row[i])) for row in rows)) if rows else len(str(h))
              for i, h in enumerate(headers)]
    line = "  ".join(str(h).ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in rows]
    return "\n".join(out)


def method_text(warm_l2: bool, processes: int) -> str:
    """The timing method of a run, in words (stored in the JSON's config when the run is made)."""
    return ("GPU time of one synchronized call (CUDA events; the host enqueues the call while a delay kernel holds "
            "the stream; host time measured apart, per call over back-to-back calls), median (p20-p80) over repeats, "
            "the arms of a row (prepared / eager, schedules, peers) timed in alternating rounds"
            + (", warm L2" if warm_l2 else ", cold L2 (2x L2 flushed before each call)")
            + (f", median over {processes} fresh processes (both arm orders)" if processes > 1 else ""))


def _header_lines(doc: dict) -> list:
    m = doc.get("machine", {})
    gpu = m.get("gpu", {})
    out = [f"cake-rt {m.get('cake_rt')} ({(m.get('git_hash') or 'no git')[:12]}{'+dirty' if m.get('git_dirty') else ''}) "
           f"on {gpu.get('name', '?')} ({gpu.get('sm_count', '?')} SMs, {gpu.get('target', '?')}), "
           f"driver {m.get('driver') or m.get('cuda_driver')}, CUDA runtime {m.get('cuda_runtime')}, "
           f"CuPy {m.get('cupy')}, NVRTC {m.get('nvrtc')}, {m.get('date_utc', '')}"]
    f = doc.get("floors")
    if f:
        out.append(f"floors: copy {f['copy_tbps']:.2f} TB/s (read+write), bf16 matrix {f['bf16_tflops']:.0f} TFLOP/s "
                   f"[{f['gemm']['method']}]")
    cfg = doc.get("config", {})
    if cfg:
        out.append("method: " + (cfg.get("method") or "(not recorded)"))
        if cfg.get("argv") is not None:
            out.append("command: cake-rt bench " + " ".join(cfg["argv"]))
    return out


def _sections(doc: dict) -> list:
    """[(title, headers, rows)] of the tables present in ``doc``."""
    recs = [r for r in doc.get("records", []) if not r.get("error")]
    sec = []
    ssd = [r for r in recs if r["table"] == "ssd"]
    if ssd:
        peers = _peer_names(ssd)
        rows = []
        for r in ssd:
            fam = (r.get("extra") or {}).get("family") or "-"
            row = [r["row"], r["dims"]["batch"], r["dims"]["seqlen"], r["dims"]["nheads"], r["dims"]["ngroups"],
                   r["dims"]["chunk"], fam, _ms(r), _wall(r.get("ms")), _host(r), _f(r.get("tflops"), "{:.1f}"),
                   _f(r.get("tbps"), "{:.2f}"), _f(r.get("floor_ms"), "{:.4f}"), _f(r.get("floor_fraction"), "{:.0%}")]
            for n in peers:
                pm, sp = _peer_cells(r, n)
                row += [pm, _wall((r.get("peers", {}).get(n) or {}).get("ms")), sp]
            rows.append(row + [_target_cell(r)])
        heads = ["row", "batch", "seqlen", "H", "G", "chunk", "family", "ms", "wall ms", "host ms", "TFLOP/s", "TB/s",
                 "floor ms", "of floor"]
        for n in peers:
            heads += [f"{n} ms", f"{n} wall", "speedup"]
        sec.append(("SSD combined (bf16 x/B/C/z, fp32 dt, D, dt_bias, softplus, final states fp32; "
                    "ms: GPU time, median (p20-p80); wall ms: eager wall time from an idle stream, host work "
                    "included; host ms: host time per call, steady state (calls back to back), with the host's Python speed measured right after (probe); speedup: peer GPU time / ours)",
                    heads + ["H200 target"], rows))
    dsa = [r for r in recs if r["table"] == "dsa"]
    if dsa:
        rows = []
        for r in dsa:
            pm, sp = _peer_cells(r, "torch-eager")
            d = r["dims"]
            rows.append([r["row"], d["H"], r["arm"], d["T"], d["Tkv"], d["segments"], _ms(r), _host(r),
                         _f(r.get("tflops"), "{:.1f}"), _f(r.get("tbps"), "{:.2f}"), _f(r.get("floor_ms"), "{:.4f}"),
                         _f(r.get("floor_fraction"), "{:.0%}"), pm, sp, _target_cell(r)])
        sec.append(("DSA indexer top-k (D 128, topk 2048; ms: GPU time, median (p20-p80); host ms: host time per call, steady state (calls back to back), with the host's Python speed measured right after (probe))",
                    ["row", "H", "entry", "T", "Tkv", "seg", "ms", "host ms", "TFLOP/s", "TB/s", "floor ms", "of floor",
                     "torch ms", "speedup", "H200 target"], rows))
    side = [r for r in recs if r["table"] == "side_stream"]
    if side:
        rows = [[r["row"], r["heads"], r.get("hold"), r["arm"], _ms(r), _f(r.get("unheld_ms"), "{:.4f}"),
                 _f(r.get("slowdown"), "{:.3f}x"), _f(r.get("static_over_ticket"), "{:.3f}x"), _target_cell(r)]
                for r in side]
        sec.append(("Side stream: a spinning kernel on a second stream holds N SMs during a prepared call",
                    ["row", "H", "SMs held", "schedule", "ms", "unheld ms", "slowdown", "static/ticket",
                     "H200 target"], rows))
    sc = [r for r in recs if r["table"] == "selfcheck"]
    if sc:
        rows = [[r["row"], r.get("hold"), _ms(r), _f(r.get("tbps"), "{:.2f}"), _peer_cells(r, "cudaMemcpyAsync")[0],
                 _f((r.get("extra") or {}).get("hold_info", {}).get("distinct_sms"), "{}")] for r in sc]
        sec.append(("Runner self-check (copy kernel vs cudaMemcpyAsync, under side-stream holds)",
                    ["row", "SMs held", "ms", "TB/s", "memcpy ms", "distinct SMs held"], rows))
    comp = doc.get("compare")
    if comp:
        rows = [[c["key"], _f(c["old_ms"], "{:.4f}"), _f(c["new_ms"], "{:.4f}"), _f(c["speedup"], "{:.3f}x")]
                for c in comp["rows"]]
        sec.append((f"Compare with {comp['path']} ({(comp.get('old_git_hash') or '?')[:12]}, "
                    f"{comp.get('old_gpu')}): speedup = old ms / new ms", ["row", "old ms", "new ms", "speedup"], rows))
    return sec


def _notes(doc: dict) -> list:
    notes = list(doc.get("notes", []))
    comp = doc.get("compare")
    if comp and comp.get("missing"):
        notes.append(f"not in {comp['path']}: {', '.join(comp['missing'])}")
    for r in doc.get("records", []):
        for n in r.get("notes", []):
            notes.append(f"{r['key']}: {n}")
        if r.get("error"):
            notes.append(f"{r['key']}: ERROR {r['error']}")
    return list(dict.fromkeys(notes))


def format_tables(doc: dict) -> str:
    """The terminal report: machine line, floors, one table per suite, notes and errors."""
    out = _header_lines(doc)
    for title, headers, rows in _sections(doc):
        out += ["", title, _grid(headers, rows)]
    notes = _notes(doc)
    if notes:
        out += ["", "notes:"] + [f"  - {n}" for n in notes]
    return "\n".join(out)


def format_markdown(doc: dict) -> str:
    """The same report as Markdown (the tables of docs/benchmarks.md)."""
    out = [f"- {line}" for line in _header_lines(doc)]
    for title, headers, rows in _sections(doc):
        out += ["", f"**{title}**", "", _md(headers, rows)]
    notes = _notes(doc)
    if notes:
        out += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------- JSON


def _clean(v):
    """JSON-safe copy: NaN/inf -> None, NumPy scalars and arrays -> Python."""
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        return _clean(v.tolist())
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def write_json(doc: dict, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(_clean(doc), f, indent=1, sort_keys=False)
        f.write("\n")


def _number(v) -> bool:
    """An int or float that float arithmetic takes (JSON reads 1e999 as inf, but 10**400 as an int no float holds)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        float(v)
    except OverflowError:
        return False
    return True


# The dimensions each table's rows print (``_sections``).
_DIMS = {"ssd": ("batch", "seqlen", "nheads", "ngroups", "chunk"), "dsa": ("H", "T", "Tkv", "segments")}
# The figures a target may ask for (``_eval_target``), each compared with a number.
_TARGET_NUMBERS = tuple(_TARGET_FIGURES)


def _need(cond: bool, where: str, what: str, got) -> None:
    if not cond:
        raise ValueError(f"{where}: expected {what}, got {got!r}")


def _optional_object(v, where: str) -> dict:
    _need(v is None or isinstance(v, dict), where, "an object", v)
    return v or {}


def _optional_number(v, where: str) -> None:
    _need(v is None or _number(v), where, "a number", v)


def _view(ms: dict, view: str, where: str) -> None:
    """An optional timing view of ``ms`` (``host``, ``wall``): None or an object with a number median."""
    v = ms.get(view)
    if v is not None:
        _need(isinstance(v, dict) and _number(v.get("median")), f"{where}.{view}", "an object with a number median", v)
        _optional_number(v.get("probe_us"), f"{where}.{view}.probe_us")


def _check_record(i: int, r) -> None:
    """One record: every part ``finalize``, ``compare`` and the tables read (``validate_doc``)."""
    _need(isinstance(r, dict), f"records[{i}]", "an object", r)
    miss = [k for k in REQUIRED_RECORD if k not in r]
    if miss:
        raise ValueError(f"record {r.get('key')!r}: missing {miss}")
    _need(isinstance(r["key"], str), f"records[{i}].key", "a string", r["key"])
    where = f"record {r['key']!r}"
    for k in ("table", "row", "arm"):
        _need(isinstance(r[k], str), f"{where}: {k}", "a string", r[k])
    for k in ("heads", "hold"):  # with row and arm, the key a side-stream row is paired by (hashable)
        _need(r.get(k) is None or _number(r[k]), f"{where}: {k}", "a number or null", r.get(k))
    _need(r["error"] is None or (isinstance(r["error"], str) and r["error"]), f"{where}: error",
          "null or a message", r["error"])
    _need(isinstance(r.get("notes", []), list), f"{where}: notes", "a list", r.get("notes"))
    if r["error"] is not None:
        return
    ms = r.get("ms")
    if not isinstance(ms, dict) or any(not _number(ms.get(k)) for k in REQUIRED_MS):
        raise ValueError(f"{where}: 'ms' needs numbers {REQUIRED_MS}")
    if not 0 < ms["p20"] <= ms["median"] <= ms["p80"]:
        raise ValueError(f"{where}: expected 0 < p20 <= median <= p80, got {ms}")
    for view in ("host", "wall"):
        _view(ms, view, f"{where}: ms")
    for k in ("flops", "bytes"):
        _optional_number(r.get(k), f"{where}: {k}")
    if r["table"] in _DIMS:
        dims = r.get("dims")
        _need(isinstance(dims, dict) and all(k in dims for k in _DIMS[r["table"]]), f"{where}: dims",
              f"an object with {list(_DIMS[r['table']])}", dims)
    if r["table"] == "side_stream":
        _need("heads" in r, f"{where}: heads", "a head count", None)
    extra = _optional_object(r.get("extra"), f"{where}: extra")
    _optional_object(extra.get("hold_info"), f"{where}: extra.hold_info")
    target = _optional_object(r.get("target"), f"{where}: target")
    for k in _TARGET_NUMBERS:
        if k in target:
            _need(_number(target[k]), f"{where}: target.{k}", "a number", target[k])
    peers = r.get("peers", {})
    if not isinstance(peers, dict):
        raise ValueError(f"{where}: 'peers' expected an object, got {peers!r}")
    for name, p in peers.items():
        if not isinstance(p, dict):
            raise ValueError(f"{where}: peer {name!r} expected an object, got {p!r}")
        if "ms" in p:
            if not (isinstance(p["ms"], dict) and _number(p["ms"].get("median"))):
                raise ValueError(f"{where}: peer {name!r} 'ms' needs a median")
            _view(p["ms"], "wall", f"{where}: peer {name!r} ms")
        if "check" in p:
            _need(isinstance(p["check"], dict), f"{where}: peer {name!r} check", "an object", p["check"])


def validate_doc(doc: dict) -> None:
    """Raise ValueError when a result document does not follow the schema (cake-rt-bench/1). Every part that
    ``finalize``, ``compare`` and the tables index is type-checked here, so a file that parses as JSON but holds
    something else is a named error, never a crash further on."""
    if not isinstance(doc, dict):
        raise ValueError(f"expected a JSON object (a cake-rt bench result), got a {type(doc).__name__}")
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"schema: expected {SCHEMA!r}, got {doc.get('schema')!r}")
    m = doc.get("machine")
    if not isinstance(m, dict):
        raise ValueError("machine: expected an object")
    missing = [k for k in REQUIRED_MACHINE if k not in m]
    if missing:
        raise ValueError(f"machine: missing {missing}")
    _need(m["git_hash"] is None or isinstance(m["git_hash"], str), "machine.git_hash", "a string or null",
          m["git_hash"])
    if not isinstance(m["gpu"], dict):
        raise ValueError(f"machine.gpu: expected an object, got {m['gpu']!r}")
    for k in ("name", "sm_count"):
        if k not in m["gpu"]:
            raise ValueError(f"machine.gpu: missing {k!r}")
    f = doc.get("floors")
    if f is not None:
        if not isinstance(f, dict):
            raise ValueError(f"floors: expected an object, got {f!r}")
        for k in ("copy_tbps", "bf16_tflops"):
            if not (_number(f.get(k)) and f[k] > 0):
                raise ValueError(f"floors.{k}: expected a positive number, got {f.get(k)!r}")
        _need(isinstance(f.get("gemm"), dict) and "method" in f["gemm"], "floors.gemm", "an object with a method",
              f.get("gemm"))
    cfg = doc.get("config")
    if not isinstance(cfg, dict):
        raise ValueError("config: expected an object")
    _need(cfg.get("method") is None or isinstance(cfg["method"], str), "config.method", "a string", cfg.get("method"))
    argv = cfg.get("argv")
    _need(argv is None or (isinstance(argv, list) and all(isinstance(a, str) for a in argv)), "config.argv",
          "a list of strings", argv)
    _need(isinstance(doc.get("notes", []), list), "notes", "a list", doc.get("notes"))
    recs = doc.get("records")
    if not isinstance(recs, list):
        raise ValueError("records: expected a list")
    keys = set()
    for i, r in enumerate(recs):
        _check_record(i, r)
        if r["key"] in keys:
            raise ValueError(f"record key {r['key']!r} appears twice")
        keys.add(r["key"])
    comp = doc.get("compare")  # the block of a run made with --compare, printed again by --from-json
    if comp is not None:
        _need(isinstance(comp, dict) and "path" in comp and isinstance(comp.get("rows"), list)
              and isinstance(comp.get("missing", []), list) and all(isinstance(k, str) for k in comp.get("missing", [])),
              "compare", "an object with a path, a list of rows and a list of missing keys", comp)
        _need(comp.get("old_git_hash") is None or isinstance(comp["old_git_hash"], str), "compare.old_git_hash",
              "a string or null", comp.get("old_git_hash"))
        for j, c in enumerate(comp["rows"]):
            _need(isinstance(c, dict) and all(k in c for k in ("key", "old_ms", "new_ms", "speedup")),
                  f"compare.rows[{j}]", "an object with key, old_ms, new_ms and speedup", c)
            for k in ("old_ms", "new_ms", "speedup"):
                _optional_number(c[k], f"compare.rows[{j}].{k}")


# ---------------------------------------------------------------------------------------------- compare


def compare(doc: dict, old: dict, path: str) -> dict:
    """Attach ``compare`` (old ms / new ms per matching key) to ``doc``; returns the compare block."""
    old_by = {r["key"]: r for r in old.get("records", []) if not r.get("error") and "ms" in r}
    rows, missing = [], []
    for r in doc.get("records", []):
        if r.get("error") or "ms" not in r:
            continue
        o = old_by.get(r["key"])
        if o is None:
            missing.append(r["key"])
            continue
        od, nd = o.get("dims"), r.get("dims")
        differ = sorted(k for k in od if k in nd and od[k] != nd[k]) if isinstance(od, dict) and isinstance(nd, dict) else []
        if differ:  # the same row name for another problem (a suite file edited in between): no speedup of it
            note = (f"not compared with {path}: another problem there ("
                    + ", ".join(f"{k} {od[k]} there, {nd[k]} here" for k in differ) + ")")
            if note not in r.setdefault("notes", []):
                r["notes"].append(note)
            continue
        new_ms, old_ms = r["ms"]["median"], o["ms"]["median"]
        sp = old_ms / new_ms if new_ms > 0 else None
        r["compare"] = {"old_ms": old_ms, "speedup": sp}
        rows.append({"key": r["key"], "old_ms": old_ms, "new_ms": new_ms, "speedup": sp})
    block = {"path": path, "old_git_hash": old.get("machine", {}).get("git_hash"),
             "old_gpu": old.get("machine", {}).get("gpu", {}).get("name"), "rows": rows, "missing": missing}
    doc["compare"] = block
    return block
