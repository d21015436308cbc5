"""Compile programs ahead of time into the disk cache (``cake-rt warmup``, ``scripts/prewarm``).

Each op lists its programs for a target (``cake_rt.ops.ssd.programs``, ``cake_rt.ops.dsa.programs``:
``[(source path relative to cake_rt/kernels, defines)]``); the ones not yet in the cache are compiled in
parallel processes (NVRTC runs on the CPU; no GPU needed when the target is given). A later first call of
an op finds its program in the cache and compiles nothing. Programs are compiled with the options a call would
load them with (``-lineinfo`` under CAKE_RT_LINEINFO).

Without ``shapes`` the list is each op's own: the SSD programs of the shapes the tests and the bench run
(``ssd._PROGRAM_CASES``); the DSA programs of the head counts and head dims the tests and the bench run
(``dsa._PROGRAM_SHAPES``). ``shapes`` narrows it to what a workload needs: shapes that name an SSD key narrow the list
of every SSD case a call can make (``ssd.programs(every=True)``), shapes that name DSA ``heads`` or ``head_dim`` the
list of every head count and head dim the op takes, so any workload's programs can be compiled ahead. Each entry is
``KEY=VALUE,KEY=VALUE`` (all must match; a program is kept when any entry matches). Keys are the programs' defines
(``SSD_P``, ``DSA_H``...) or these names: SSD ``family`` (exact, chunkpar: a program holds one family's kernel),
``dtype`` (of x: bfloat16, float16, float32), ``dt_dtype`` (float32 or x's), ``state_dtype``, ``headdim``, ``dstate``,
``chunk`` (the programs of every head and group count of that shape); DSA ``heads``, ``head_dim``, ``windows``
(0: the programs of units within one 65,536-key window, which every call whose blocks see at most 65,536 keys runs,
with and without the split parts' running floor; 1: the one of several windows, for longer rows; all by default).
"""
from __future__ import annotations

import os
import re
import time

OPS = ("ssd", "dsa")
ALIASES = {
    "ssd": {"family": "SSD_FAMILY", "headdim": "SSD_P", "dstate": "SSD_N", "chunk": "SSD_Q", "dtype": "SSD_T",
            "dt_dtype": "SSD_DT", "state_dtype": "SSD_SD"},
    "dsa": {"heads": "DSA_H", "head_dim": "DSA_D", "windows": "DSA_WINDOWS"},
}
# A define a program leaves out has this value (the DSA program of one-window units has no DSA_WINDOWS).
_ABSENT = {"DSA_WINDOWS": 0}
_DTYPE_CODES = {"bfloat16": 0, "bf16": 0, "float16": 1, "fp16": 1, "float32": 2, "fp32": 2}
_FAMILY_CODES = {"exact": 0, "chunkpar": 1}  # SSD_FAMILY (cake_rt.ops.ssd.FAMILIES)


def parse_shapes(entries) -> list:
    """['headdim=64,dstate=128', ...] -> [{'headdim': '64', 'dstate': '128'}, ...] (ValueError naming --shapes)."""
    out = []
    for e in entries or ():
        d = {}
        for part in (p.strip() for p in str(e).split(",")):
            if not part:
                continue
            key, sep, val = part.partition("=")
            if not sep or not key.strip() or not val.strip():
                raise ValueError(f"--shapes: expected KEY=VALUE[,KEY=VALUE...], got {e!r}")
            d[key.strip()] = val.strip()
        if not d:
            raise ValueError(f"--shapes: expected KEY=VALUE[,KEY=VALUE...], got {e!r}")
        out.append(d)
    return out


def _matches(op: str, defines: dict, want: dict) -> bool:
    for key, val in want.items():
        name = ALIASES[op].get(key, key)
        if name not in defines and name not in _ABSENT:
            return False
        if key == "windows" and val not in ("0", "1"):
            raise ValueError(f"--shapes: windows: expected 0 or 1, got {val!r}")
        if key in ("dtype", "dt_dtype", "state_dtype"):
            code = _DTYPE_CODES.get(val.lower())
            if code is None:
                raise ValueError(f"--shapes: {key}: expected bfloat16, float16 or float32, got {val!r}")
            val = str(code)
        if key == "family":
            code = _FAMILY_CODES.get(val.lower())
            if code is None:
                raise ValueError(f"--shapes: family: expected exact or chunkpar, got {val!r}")
            val = str(code)
        if str(defines.get(name, _ABSENT.get(name))) != val:
            return False
    return True


def programs(ops, target: str, shapes=(), every: bool | None = None) -> list:
    """[(op, source path, defines)] of ``ops`` for ``target``, narrowed by ``shapes`` (see the module docstring).
    ``every``: None, the lists of every shape an op takes where the shapes name it (a workload's warmup); False, the
    tested shapes' lists whatever the shapes name (tools that compare trees or time the tested programs); True, the
    lists of every shape. ValueError when a --shapes key is known to none of the ops' programs, or when the shapes
    match no program."""
    from .ops import dsa, ssd

    # DSA: the programs of any head count or head dim a workload names (--shapes heads=40), not only the tested ones;
    # SSD: those of any case, once a shape names an SSD key (--shapes headdim=128,dstate=128,chunk=256)
    named = any(ALIASES["dsa"].get(k, k) in ("DSA_H", "DSA_D") for s in shapes or () for k in s)
    named_ssd = any(k in ALIASES["ssd"] or k.startswith("SSD_") for s in shapes or () for k in s)
    if every is not None:
        named = named_ssd = bool(every)
    lists = {"ssd": lambda t: ssd.programs(t, every=named_ssd), "dsa": lambda t: dsa.programs(t, every=named)}
    out = []
    used = set()  # the shapes entries some op's programs know every key of
    for op in ops:
        if op not in lists:
            raise ValueError(f"op: expected one of {', '.join(OPS)}, got {op!r}")
        progs = lists[op](target)
        if shapes:
            keys = {k for s in shapes for k in s}
            known = set(ALIASES[op]) | {k for _, d in progs for k in d}
            relevant = [s for s in shapes if set(s) <= known]
            used.update(i for i, s in enumerate(shapes) if set(s) <= known)
            if not relevant:
                if len(ops) == 1:
                    raise ValueError(f"--shapes: {op} programs know {', '.join(sorted(known))}; "
                                     f"got {', '.join(sorted(keys))}")
                continue
            progs = [(p, d) for p, d in progs if any(_matches(op, d, s) for s in relevant)]
        out += [(op, p, d) for p, d in progs]
    unused = [s for i, s in enumerate(shapes or ()) if i not in used]
    if unused:  # an entry no op's programs know: a misspelt key, never "warm nothing for it"
        raise ValueError(f"--shapes: no {' or '.join(ops)} program knows "
                         + "; ".join(",".join(f"{k}={v}" for k, v in s.items()) for s in unused)
                         + f" (names: ssd {', '.join(sorted(ALIASES['ssd']))}; dsa {', '.join(sorted(ALIASES['dsa']))}; "
                         "or a program's defines)")
    if shapes and not out:  # known keys, values no program has (heads=99): say so, never "0 programs" and success
        raise ValueError("--shapes: no " + " or ".join(ops) + f" program for {target} matches "
                         + "; ".join(",".join(f"{k}={v}" for k, v in s.items()) for s in shapes))
    return out


def _name(path: str) -> str:
    return os.path.basename(path)


def is_cached(path: str, defines: dict, target: str) -> bool:
    """Whether the disk cache already holds this program, verified as a call would load it (a truncated, empty or
    corrupt file is discarded with a warning and compiled again)."""
    from .launch.compile import debug_options, is_cached_on_disk, load_source

    return is_cached_on_disk(load_source(path), name=_name(path), target=target, defines=defines,
                             options=debug_options())


def _compile_one(job):
    path, defines, target = job
    from .launch.compile import compile_cubin, debug_options, load_source

    t0 = time.monotonic()  # the options a call would load the program with (CAKE_RT_LINEINFO: a spawned worker inherits it)
    compile_cubin(load_source(path), name=_name(path), target=target, defines=defines, options=debug_options())
    return time.monotonic() - t0


def warmup(ops, target: str, *, shapes=(), jobs: int | None = None, progress=None, every: bool | None = None) -> dict:
    """Compile the programs of ``ops`` for ``target`` not yet in the cache (``programs(ops, target, shapes, every)``),
    ``jobs`` processes at a time. Returns {'programs', 'cached', 'compiled', 'failed': [(label, error)], 'seconds'}."""
    import concurrent.futures as cf
    import multiprocessing

    from . import env

    if env.cache_dir() is None:
        raise RuntimeError("warmup: the disk cache is off (CAKE_RT_CACHE_DIR=off): nothing would be kept")
    from .launch.compile import trusted_cache_dir

    if trusted_cache_dir() is None:  # every compile would bypass it (CacheWarning says why)
        raise RuntimeError(f"warmup: the cache directory {env.cache_dir()} is not used (owned by another user, "
                           "writable by group or others, not a directory, or under an unknown home): nothing would be kept")
    progs = programs(ops, target, shapes, every)
    todo = [(op, p, d) for op, p, d in progs if not is_cached(p, d, target)]
    res = {"programs": len(progs), "cached": len(progs) - len(todo), "compiled": 0, "failed": [], "seconds": 0.0}
    t0 = time.monotonic()
    if progress is not None:
        progress.total = max(1, len(todo))
    if todo:
        jobs = max(1, min(len(todo), jobs or os.cpu_count() or 1))
        ctx = multiprocessing.get_context("spawn")  # never fork a process that may hold a CUDA context
        with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futs = {pool.submit(_compile_one, (p, d, target)): (op, p, d) for op, p, d in todo}
            for fut in cf.as_completed(futs):
                op, p, d = futs[fut]
                label = f"{op} {_name(p)} " + " ".join(f"{k}={v}" for k, v in sorted(d.items()))
                try:
                    secs = fut.result()
                    res["compiled"] += 1
                    if progress is not None:
                        progress.step(label, f"{secs:.1f} s")
                except Exception as exc:
                    res["failed"].append((label, f"{exc.__class__.__name__}: {exc}"))
                    if progress is not None:
                        progress.step(label, "FAILED")
    res["seconds"] = time.monotonic() - t0
    return res


def cache_summary() -> dict:
    """{'path', 'files', 'bytes'} of the disk cache (path None when it is off): the files the cache writes
    (``cache_files``), not whatever else a shared folder holds."""
    from . import env

    d = env.cache_dir()
    if d is None:
        return {"path": None, "files": 0, "bytes": 0}
    try:
        listing = cache_files(d)
    except OSError:  # a directory this user cannot list: nothing to count (a compile warns about its files)
        listing = []
    files, nbytes = 0, 0
    for f in listing:
        try:
            nbytes += f.stat().st_size
        except OSError:  # renamed or removed by another process since the listing (a temp file of a compile)
            continue
        files += 1
    return {"path": str(d), "files": files, "bytes": nbytes}


# What the cache writes, and nothing else: a cache directory set to a folder that holds other files (a project,
# the home directory) must not lose them to ``cake-rt cache --clear``.
_CACHE_FILES = re.compile(r"[0-9a-f]{64}\.cubin|\.tmp-[^/]*\.cubin")
_MODEL_FILES = re.compile(r"ssd-[^/]*\.json|ssd-[^/]*\.tmp|\.tmp-[^/]*\.json")


def cache_files(d) -> list:
    """The files of cache directory ``d`` with the names the cache writes (cubins, cost models and their temp files),
    sorted; what ``cache_summary`` counts and ``clear_cache`` removes."""
    out = []
    if not d.is_dir():
        return out
    for folder, names in ((d, _CACHE_FILES), (d / "cost-models", _MODEL_FILES)):
        if not folder.is_dir() or folder.is_symlink() and folder != d:
            continue
        out += [f for f in sorted(folder.iterdir()) if names.fullmatch(f.name) and (f.is_file() or f.is_symlink())]
    return out


def clear_cache() -> int:
    """Delete the cached cubins and calibrated cost models (the names the cache writes, and their temp files);
    returns the number of files removed. An ``OSError`` names a file that could not be removed."""
    from . import env

    d = env.cache_dir()
    if d is None or not d.is_dir():
        return 0
    n = 0
    for f in cache_files(d):
        f.unlink(missing_ok=True)
        n += 1
    try:
        (d / "cost-models").rmdir()
    except OSError:
        pass  # absent, or holds files the cache did not write
    return n
