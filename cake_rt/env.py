"""Every environment switch cake-rt reads, in one place, with one rule for "on".

    CAKE_RT_CACHE_DIR            where compiled cubins and calibrated cost models are kept (``~`` expanded, a
                                 relative path taken from the working directory); ``off`` disables the disk
                                 cache. Default ``$XDG_CACHE_HOME/cake-rt`` (when absolute), else
                                 ``~/.cache/cake-rt``. A ``~`` that no home directory expands (HOME unset, no
                                 passwd entry) leaves the disk cache bypassed, with a warning.
    CAKE_RT_QUIET                on: no compile-progress line on stderr (``cake-rt`` prints one when a
                                 program takes more than a second to compile).
    CAKE_RT_SSD_CHUNK_PARALLEL   ``auto`` (default), ``always``, ``never``: overrides the SSD family choice
                                 (an explicit ``family=`` argument wins); read on every call.
    CAKE_RT_SSD_WORKSPACE_CAP    byte cap of the SSD chunk-parallel workspace (default 256 MiB).
    CAKE_RT_DSA_MMA              ``sync``: the mma.sync DSA scan program on Hopper instead of wgmma (A/B runs).
    CAKE_RT_LINEINFO             on: compile every kernel with ``-lineinfo`` (source lines for compute-sanitizer
                                 and ncu); read when a program is loaded for a problem.
    CAKE_RT_GIT_HASH             the commit a bench run's tree was copied from, recorded in the run's JSON
                                 (wins over the tree's ``.git``: a copied working tree).

A boolean switch is on for ``1``, ``true``, ``yes``, ``on`` and off when unset or ``0``, ``false``, ``no``,
``off`` or empty (any case, surrounding blanks ignored); any other value is a ``ValueError`` naming the
variable. Values are read when asked for, never cached, so a test or a shell can change them between calls. Any
other ``CAKE_RT_*`` variable has no effect: ``import cake_rt`` warns once naming it (``unknown_switches``).
"""
from __future__ import annotations

import os
import pathlib

SWITCHES = {
    "CAKE_RT_CACHE_DIR": "directory of compiled cubins and calibrated cost models ('off': no disk cache)",
    "CAKE_RT_QUIET": "boolean: no compile-progress line on stderr",
    "CAKE_RT_SSD_CHUNK_PARALLEL": "auto | always | never: override of the SSD family choice",
    "CAKE_RT_SSD_WORKSPACE_CAP": "byte cap of the SSD chunk-parallel workspace",
    "CAKE_RT_DSA_MMA": "sync: the mma.sync DSA scan on Hopper instead of wgmma",
    "CAKE_RT_LINEINFO": "boolean: compile every kernel with -lineinfo",
    "CAKE_RT_GIT_HASH": "commit recorded by cake-rt bench (wins over the tree's .git: copied trees)",
}

_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")


def unknown_switches() -> list:
    """Names in the environment that look like cake-rt switches (``CAKE_RT_`` prefix) and are not one: a misspelling,
    or a switch an earlier version read (the DSA-only lineinfo switch, now ``CAKE_RT_LINEINFO``). They do nothing;
    ``import cake_rt`` warns once about them and ``cake-rt info`` lists them."""
    return sorted(k for k in os.environ if k.startswith("CAKE_RT_") and k not in SWITCHES)


def _check(name: str) -> None:
    if name not in SWITCHES:
        raise KeyError(f"{name}: not a cake-rt switch (known: {', '.join(SWITCHES)})")


_environ = os.environ
_data = getattr(_environ, "_data", None)  # the dict os.environ reads and writes (CPython's _Environ)
_encoded: dict = {}


def text(name: str, default: str | None = None) -> str | None:
    """The raw value of switch ``name`` (blanks stripped), or ``default`` when unset.

    Read from the dict ``os.environ`` keeps, without the ``KeyError`` that ``os.environ.get`` raises and catches
    for an unset name (0.7 us, paid by every call of an op that reads its switches per call)."""
    if name not in SWITCHES:
        _check(name)
    e = os.environ
    if e is not _environ or _data is None:
        v = e.get(name)
    else:
        k = _encoded.get(name)
        if k is None:
            k = _encoded[name] = e.encodekey(name)
        v = _data.get(k)
        if v is not None:
            v = e.decodevalue(v)
    return default if v is None else v.strip()


def flag(name: str) -> bool:
    """Switch ``name`` as a boolean under the one rule above."""
    v = (text(name) or "").lower()
    if v in _ON:
        return True
    if v in _OFF:
        return False
    raise ValueError(f"{name}: expected one of {', '.join(_ON)} (on) or {', '.join(v or repr('') for v in _OFF)} "
                     f"(off), got {os.environ.get(name)!r}")


def choice(name: str, allowed: tuple, default: str) -> str:
    """Switch ``name`` as one of ``allowed`` (lower-cased); ``default`` when unset or empty."""
    v = (text(name) or "").lower() or default
    if v not in allowed:
        raise ValueError(f"{name}: expected {', '.join(allowed)}, got {os.environ.get(name)!r}")
    return v


def byte_count(name: str, default: int) -> int:
    """Switch ``name`` as a non-negative integer number of bytes; ``default`` when unset or empty."""
    v = text(name) or ""
    if not v:
        return int(default)
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"{name}: expected a byte count (integer), got {os.environ.get(name)!r}") from None
    if n < 0:
        raise ValueError(f"{name}: expected a non-negative byte count, got {n}")
    return n


def cache_dir() -> pathlib.Path | None:
    """The disk-cache directory, or None when ``CAKE_RT_CACHE_DIR`` is ``off`` (or 0, none, empty)."""
    v = text("CAKE_RT_CACHE_DIR")
    if v is not None:
        if v.lower() in ("off", "0", "none", ""):
            return None
        try:
            return pathlib.Path(v).expanduser()
        except RuntimeError:  # no home directory to expand "~" to (see below)
            return pathlib.Path(v)
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):  # a relative one is invalid (XDG base directory spec): ignored
        # With HOME unset and no passwd entry for this uid (a container's arbitrary --user), "~" stays as is: a path
        # starting with "~" is never used (``launch.compile.trusted_cache_dir``), not taken from the working directory.
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "cake-rt"


def home_unknown(path: pathlib.Path) -> bool:
    """Whether ``cache_dir()`` gave ``path`` with a leading ``~`` it could not expand (no home directory known)."""
    return bool(path.parts) and path.parts[0].startswith("~")
