"""NVRTC compile of a kernel source to a cubin for the exact target, with a memory and disk cache.

Why not ``cupy.RawModule(code=...)``: CuPy's compile path cannot express ``sm_90a`` (wgmma and
setmaxnreg exist only there) and forces ``-ftz=true``. cake-rt owns its flags, compiles with NVRTC
directly (``cupy.cuda.nvrtc``, which works on a machine without a GPU) and loads the cubin through CuPy.

The cache key is a SHA-256 of the full source text (local ``#include`` files inlined), the defines, the
options, the NVRTC version and the target, so any edit to any header recompiles. Disk cache directory:
``$CAKE_RT_CACHE_DIR``, else ``$XDG_CACHE_HOME/cake-rt``, else ``~/.cache/cake-rt``; set
``CAKE_RT_CACHE_DIR=off`` to disable the disk cache (``cache_dir`` is where the setting is read).

Disk-cache rules: the directory is created ``0700``; one owned by another user or writable by group or
others is not trusted (bypassed, one ``CacheWarning``). Each file carries a SHA-256 of its cubin, checked
on load; a truncated, corrupt, unreadable or foreign file is discarded with a ``CacheWarning`` naming it
and the program is recompiled (the memory cache only ever holds verified or freshly compiled bytes).
Writes are atomic (private temp file, fsync, rename) and leave no temp file behind on failure.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import os
import pathlib
import re
import stat
import tempfile
import threading
import time
import warnings

KERNEL_ROOT = pathlib.Path(__file__).resolve().parent.parent / "kernels"

# Targets every program must compile for (CI checks them without a GPU). sm_100a joins when the NVRTC
# in use knows it (see ``available_targets``).
SUPPORTED_TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90a", "sm_100a")

# Flags the library owns: IEEE float32 (no flush-to-zero, exact division and sqrt), contraction into
# FMA allowed (it is deterministic for a fixed program), C++17.
DEFAULT_OPTIONS = ("-std=c++17", "--ftz=false", "--prec-div=true", "--prec-sqrt=true", "--fmad=true")

# A quoted include, with an optional trailing comment: every such line is inlined, so the key covers its text.
_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"[ \t]*(?://[^\n]*|/\*.*?\*/)?\s*$', re.MULTILINE)


class CompileError(RuntimeError):
    """NVRTC rejected a program; the message carries the program name, target and the NVRTC log."""


def _resolve_include(name: str, including_dir: pathlib.Path) -> pathlib.Path:
    for base in (including_dir, KERNEL_ROOT):
        candidate = (base / name).resolve()
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f'#include "{name}" not found relative to {including_dir} or {KERNEL_ROOT}')


def _inline(path: pathlib.Path, seen: set) -> str:
    text = path.read_text()

    def replace(match):
        target = _resolve_include(match.group(1), path.parent)
        if target in seen:
            return f"// (already included: {match.group(1)})"
        seen.add(target)
        return f"// begin {match.group(1)}\n{_inline(target, seen)}\n// end {match.group(1)}"

    return _INCLUDE_RE.sub(replace, text)


def load_source(path) -> str:
    """Read a kernel file (relative to ``cake_rt/kernels/`` or absolute) with its local includes inlined.

    Each included file is inlined once (``#pragma once`` semantics); includes resolve relative to the
    including file, then to ``cake_rt/kernels/``. The result needs no include path, so its text alone
    determines the binary.
    """
    p = pathlib.Path(path)
    if not p.is_absolute():
        p = KERNEL_ROOT / p
    p = p.resolve()
    if not p.is_file():
        raise FileNotFoundError(f"kernel source {path!r} not found (looked for {p})")
    return _inline(p, {p})


def _nvrtc():
    from cupy.cuda import nvrtc

    return nvrtc


@functools.lru_cache(maxsize=1)
def nvrtc_version() -> tuple:
    return tuple(_nvrtc().getVersion())


def available_targets() -> tuple:
    """SUPPORTED_TARGETS restricted to what the installed NVRTC can compile for."""
    try:
        archs = set(_nvrtc().getSupportedArchs())
    except Exception:  # very old NVRTC without the query: assume the classic set
        archs = {80, 86, 89, 90}
    out = []
    for t in SUPPORTED_TARGETS:
        num = int(re.sub(r"\D", "", t))
        if num in archs:
            out.append(t)
    return tuple(out)


def _full_text(source: str, defines) -> str:
    if not defines:
        return source
    lines = [f"#define {k} {v}" for k, v in sorted(defines.items())]
    return "\n".join(lines) + "\n" + source


def _options(target: str, options) -> list:
    return [f"-arch={target}", *DEFAULT_OPTIONS, *options]


def elf_complete(image: bytes) -> bytes:
    """``image`` padded with zero bytes up to the end of its ELF tables and sections.

    CuPy's ``nvrtc.getCUBIN`` returns the cubin less its last byte (it treats the buffer like PTX, as a
    NUL-terminated string); that byte is the top byte of the last program header's 64-bit alignment, which
    is 0. The driver only loaded the short image because CPython stores a NUL after every bytes object; the
    padded image is the compiler's exact output. Anything that is not a 64-bit little-endian ELF is returned
    as is."""
    import struct

    if len(image) < 64 or image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1:
        return image
    phoff, shoff = struct.unpack_from("<QQ", image, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", image, 0x36)
    need = max(phoff + phentsize * phnum, shoff + shentsize * shnum)
    for i in range(shnum):
        off = shoff + i * shentsize
        if off + 0x28 > len(image):
            break
        sh_type, = struct.unpack_from("<I", image, off + 4)
        sh_offset, sh_size = struct.unpack_from("<QQ", image, off + 0x18)
        if sh_type != 8:  # SHT_NOBITS occupies no file bytes
            need = max(need, sh_offset + sh_size)
    short = need - len(image)
    return image + b"\0" * short if 0 < short <= 8 else image


def kernel_params(cubin: bytes) -> dict:
    """``{kernel_name: [parameter bytes, in order]}`` of every entry function of a cubin, read from its ``.nv.info.<name>``
    sections (the kernel parameter records, EIATTR_KPARAM_INFO, that the driver copies a launch's arguments by). Lets a
    CPU test hold a host-side argument list against the compiled signature (a parameter more or less shifts every
    later argument). Anything that is not a 64-bit little-endian ELF has none."""
    import struct

    if len(cubin) < 64 or cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        return {}
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    heads = [struct.unpack_from("<I4xQ8xQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names = heads[shstrndx][2]
    out = {}
    for name_off, _, off, size in heads:
        name = cubin[names + name_off:cubin.index(b"\0", names + name_off)].decode()
        if not name.startswith(".nv.info."):
            continue
        params, i = [], off
        while i < off + size:
            fmt, attr = cubin[i], cubin[i + 1]
            if fmt == 4:  # EIFMT_SVAL: a 16-bit length, then that many bytes
                n, = struct.unpack_from("<H", cubin, i + 2)
                if attr == 0x17:  # EIATTR_KPARAM_INFO: index, ordinal, offset, then the size in bits 18..31
                    _, ordinal, _, bits = struct.unpack_from("<IHHI", cubin, i + 4)
                    params.append((ordinal, (bits >> 18) & 0x3FFF))
                i += 4 + n
            else:  # EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL: 4 bytes (the records stay 4-byte aligned)
                i += 4
        out[name[len(".nv.info."):]] = [n for _, n in sorted(params)]
    return out


def _run_nvrtc(text: str, name: str, target: str, options, *, verbose: bool):
    nvrtc = _nvrtc()
    opts = _options(target, options)
    if verbose:
        opts.append("-Xptxas=-v")
    prog = nvrtc.createProgram(text, name, [], [])
    try:
        try:
            nvrtc.compileProgram(prog, opts)
        except nvrtc.NVRTCError as exc:
            log = nvrtc.getProgramLog(prog)
            raise CompileError(
                f"NVRTC failed to compile program {name!r} for {target} ({exc}).\n"
                f"options: {' '.join(opts)}\n--- NVRTC log ---\n{log}"
            ) from None
        cubin = elf_complete(nvrtc.getCUBIN(prog))
        log = nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)
    return cubin, log


def cache_key(source: str, *, name: str, target: str, defines=None, options=()) -> str:
    text = _full_text(source, defines)
    h = hashlib.sha256()
    for part in (text, name, target, repr(tuple(options)), repr(DEFAULT_OPTIONS), repr(nvrtc_version())):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def cache_dir():
    """The disk-cache directory the settings ask for (``CAKE_RT_CACHE_DIR``, read by ``cake_rt.env``), or
    None when the disk cache is off. Whether the directory is trusted is decided by ``trusted_cache_dir``."""
    from .. import env

    return env.cache_dir()


class CacheWarning(UserWarning):
    """A disk-cache file or directory was not used (named in the message); the program was recompiled."""


_warned_dirs: set = set()


def _warn(msg: str) -> None:
    warnings.warn(msg, CacheWarning, stacklevel=4)


class _Untrusted(Exception):
    """Why a cache directory is not used, found before it is touched."""


def trusted_cache_dir():
    """``cache_dir()`` created ``0700`` when missing, or None (with one warning per directory) when it is
    owned by another user, writable by group or others, not a directory, or cannot be created, or starts with a ``~``
    that no home directory expands (``env.home_unknown``: never a directory under the working directory)."""
    from .. import env

    cdir = cache_dir()
    if cdir is None:
        return None
    try:
        if env.home_unknown(cdir):
            raise _Untrusted("starts with '~' but no home directory is known to expand it to (HOME is unset and "
                             "this user has no passwd entry)")
        if not cdir.exists():
            cdir.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.mkdir(cdir, 0o700)
            except FileExistsError:  # another process made it first: checked below like any existing one
                pass
            else:
                os.chmod(cdir, 0o700)  # the umask must not widen it
        st = os.stat(cdir)
    except _Untrusted as exc:
        reason = str(exc)
    except OSError as exc:
        reason = f"cannot be created or read ({exc.__class__.__name__}: {exc})"
    else:
        if not stat.S_ISDIR(st.st_mode):
            reason = "is not a directory"
        elif hasattr(os, "getuid") and st.st_uid != os.getuid():
            reason = f"is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
        elif st.st_mode & 0o022:
            reason = f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
        else:
            return cdir
    if str(cdir) not in _warned_dirs:
        _warned_dirs.add(str(cdir))
        _warn(f"cake-rt cache directory {cdir} {reason}: not trusted, the disk cache is bypassed "
              f"(programs are compiled in memory); set CAKE_RT_CACHE_DIR to a private directory")
    return None


# On-disk format: magic line, SHA-256 of the cubin bytes (hex) and a newline, then the cubin.
_MAGIC = b"cake-rt cubin v1\n"
_HEADER = len(_MAGIC) + 64 + 1


def _pack_file(data: bytes) -> bytes:
    return _MAGIC + hashlib.sha256(data).hexdigest().encode() + b"\n" + data


def _unpack_file(blob: bytes):
    """The cubin inside a cache file, or the reason it is not usable."""
    if len(blob) < _HEADER or not blob.startswith(_MAGIC) or blob[_HEADER - 1:_HEADER] != b"\n":
        return None, "no cake-rt header (truncated, foreign or corrupt)"
    want = blob[len(_MAGIC):_HEADER - 1].decode("ascii", "replace")
    data = blob[_HEADER:]
    if not data:
        return None, "empty cubin"
    if hashlib.sha256(data).hexdigest() != want:
        return None, "content hash mismatch (truncated or modified)"
    return data, None


def _read_file(path: pathlib.Path):
    """The bytes of ``path`` (None: it does not exist), or the reason it cannot be a cache file. Opened without
    blocking and read only when it is a regular file: a FIFO or a device under a cubin's name (``/dev/zero``
    through a link) would otherwise hang or exhaust memory."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"is unreadable ({exc.__class__.__name__}: {exc})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, "is not a regular file"
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(), None
    except OSError as exc:
        return None, f"is unreadable ({exc.__class__.__name__}: {exc})"
    finally:
        os.close(fd)


def _read_cached(path: pathlib.Path):
    """Verified cubin bytes from ``path``, or None; a bad file is removed with a warning naming it."""
    blob, bad = _read_file(path)
    if bad is not None:
        _warn(f"cake-rt cache file {path} {bad}; recompiling")
        _discard_file(path)
        return None
    if blob is None:
        return None
    data, reason = _unpack_file(blob)
    if data is None:
        _warn(f"cake-rt cache file {path} discarded: {reason}; recompiling")
        _discard_file(path)
    return data


def _discard_file(path: pathlib.Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass  # replaced by the fresh write, or left for a later run: never loaded unverified


def write_atomic(path: pathlib.Path, blob: bytes) -> None:
    """Write ``blob`` to ``path`` atomically: a private temp file in the same directory, fsync, rename, so that a
    concurrent reader sees the old file or the new one, never half of one. No temp file is left behind when it
    fails (the ``OSError`` propagates)."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _write_cached(cdir: pathlib.Path, path: pathlib.Path, data: bytes) -> None:
    """``write_atomic`` of a packed cubin into the cache directory ``cdir``."""
    try:
        write_atomic(path, _pack_file(data))
    except OSError:
        pass  # a read-only or full cache is not an error; the memory cache still works


_cubin_cache: dict = {}
_cubin_lock = threading.Lock()


def compile_cubin(source: str, *, name: str, target: str, defines=None, options=()) -> bytes:
    """Compile ``source`` (already include-inlined) to a cubin for ``target``; no GPU needed.

    Cached in memory and on disk under the key described in the module docstring. A disk file is used
    only from a trusted directory and only when its content hash matches; anything else is discarded
    with a ``CacheWarning`` naming it and the program is recompiled. Raises ``CompileError`` with the
    NVRTC log on failure.
    """
    key = cache_key(source, name=name, target=target, defines=defines, options=options)
    with _cubin_lock:
        hit = _cubin_cache.get(key)
    if hit is not None:
        return hit
    cdir = trusted_cache_dir()
    path = cdir / f"{key}.cubin" if cdir is not None else None
    data = _read_cached(path) if path is not None else None
    if data is None:
        _check_target(target)
        with _progress_line(name, target, defines, cdir):
            data, _ = _run_nvrtc(_full_text(source, defines), name, target, options, verbose=False)
        if path is not None:
            _write_cached(cdir, path, data)
    with _cubin_lock:
        _cubin_cache[key] = data
    return data


def is_cached_on_disk(source: str, *, name: str, target: str, defines=None, options=()) -> bool:
    """Whether the trusted disk cache holds a verified cubin of this program (what ``compile_cubin`` would load);
    a bad file is discarded with the warning a load gives, so ``cake-rt warmup`` compiles it again."""
    cdir = trusted_cache_dir()
    if cdir is None:
        return False
    key = cache_key(source, name=name, target=target, defines=defines, options=options)
    return _read_cached(cdir / f"{key}.cubin") is not None


def _check_target(target: str) -> None:
    """A clear error when this NVRTC cannot compile for ``target`` (an NVRTC older than the GPU)."""
    if target in SUPPORTED_TARGETS and target not in available_targets():
        raise CompileError(
            f"NVRTC {'.'.join(map(str, nvrtc_version()))} cannot compile for {target} (this GPU's exact target); "
            f"install a newer NVRTC: the nvidia-cuda-nvrtc wheel of a newer CUDA (cake-rt[cuda12] takes 12.x, "
            f"cake-rt[cuda13] takes 13.x)")


class _progress_line:
    """One line on stderr when a compile runs longer than a second (first calls otherwise look hung):
    which program, which target, and where the result is kept. ``CAKE_RT_QUIET=1`` silences it."""

    def __init__(self, name, target, defines, cdir):
        self.text = (f"cake-rt: compiling {name} "
                     + (f"({', '.join(f'{k}={v}' for k, v in sorted((defines or {}).items()))}) " if defines else "")
                     + f"for {target}; done once, then cached"
                     + (f" in {cdir}" if cdir is not None else " in memory (disk cache off)")
                     + " (`cake-rt warmup` compiles ahead of time)")
        self.timer = None

    def __enter__(self):
        from .. import env

        if not env.flag("CAKE_RT_QUIET"):
            import sys

            def say(text=self.text):
                print(text, file=sys.stderr, flush=True)

            self.timer = threading.Timer(1.0, say)
            self.timer.daemon = True
            self.timer.start()
        return self

    def __exit__(self, *exc):
        if self.timer is not None:
            self.timer.cancel()
        return False


def forget_cubin(source: str, *, name: str, target: str, defines=None, options=()) -> None:
    """Drop a program from the memory and disk caches (a cubin the driver refused to load)."""
    key = cache_key(source, name=name, target=target, defines=defines, options=options)
    with _cubin_lock:
        _cubin_cache.pop(key, None)
    cdir = trusted_cache_dir()
    if cdir is not None:
        _discard_file(cdir / f"{key}.cubin")


_fresh_count = itertools.count()
_FUNC_RE = re.compile(r"Compiling entry function '([^']+)'")
_PROPS_RE = re.compile(r"Function properties for (\S+)")
_STACK_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS_RE = re.compile(r"Used (\d+) registers")
# ptxas's notes that it serialized a function's wgmma (each waits for the one before: e.g. C7512, too few registers
# to keep the accumulators of several in flight)
_WGMMA_SERIAL_RE = re.compile(r"\((C\d+)\) Potential Performance Loss: (wgmma\.mma_async instructions are serialized"
                              r"[^\n]*?) (?:for|in) the function '([^']+)'")
_SMEM_RE = re.compile(r"(\d+) bytes smem")


def fresh_text(text: str) -> str:
    """``text`` plus one unused ``__device__`` word named after this process and a counter: a program no compiler
    cache (NVRTC's own included) has seen, with the same kernels."""
    return f"{text}\n__device__ unsigned cake_rt_fresh_{os.getpid()}_{next(_fresh_count)};\n"


def cold_compile_seconds(source: str, *, name: str, target: str, defines=None, options=()) -> float:
    """Seconds NVRTC takes to compile a program that no cache holds (``fresh_text``): what the first call of a
    program costs on a machine with an empty kernel cache. NVRTC 13 answers a text it has compiled before faster
    (seen on the H200's machine: 0.26 s for an SSD program that takes ~1.2-1.6 s), so a timing of the plain text
    after any earlier compile of it, even in another process, is not a cold compile."""
    t0 = time.perf_counter()
    _run_nvrtc(fresh_text(_full_text(source, defines)), name, target, options, verbose=False)
    return time.perf_counter() - t0


def compile_report(source: str, *, name: str, target: str, defines=None, options=()) -> dict:
    """Resource report of every entry function, from ptxas: registers, spills, stack and static smem.

    Returns ``{kernel_name: {"registers", "spill_stores", "spill_loads", "stack_bytes", "shared_bytes", "params",
    "wgmma_serialized"}}`` (``params``: ``kernel_params``' parameter sizes; ``wgmma_serialized``: ptxas's note, code and
    reason, when it made every ``wgmma`` of the kernel wait for the one before, else None).
    Works without a GPU (CI uses it to fail on a kernel that stops compiling or starts spilling). A kernel's figures are
    those of its own "Function properties" block: an out-of-line device function's block (the sm_90a SSD producer's
    ``load_tile_async``) follows the kernel's in the log and is not the kernel's.

    NVRTC 13 can answer a repeat compile of the same program without running ptxas again, and then its log has
    no report (seen on the H200's machine, whose GPU tests compile these programs first). So the report compiles
    ``fresh_text``, and a compile that still names no entry function raises ``CompileError`` instead of returning
    an empty report.
    """
    cubin, log = _run_nvrtc(fresh_text(_full_text(source, defines)), name, target, options, verbose=True)
    if not _FUNC_RE.search(log):
        raise CompileError(f"NVRTC gave no ptxas report for {name!r} ({target}); its log:\n{log}")
    params = kernel_params(cubin)
    report: dict = {}
    current = None
    for line in log.splitlines():
        m = _FUNC_RE.search(line)
        if m:
            current = report.setdefault(
                m.group(1),
                {"registers": 0, "spill_stores": 0, "spill_loads": 0, "stack_bytes": 0, "shared_bytes": 0,
                 "params": params.get(m.group(1)), "wgmma_serialized": None},
            )
            continue
        m = _PROPS_RE.search(line)
        if m:
            current = report.get(m.group(1))  # None for a function that is not an entry
            continue
        if current is None:
            continue
        m = _STACK_RE.search(line)
        if m:
            current["stack_bytes"] = int(m.group(1))
            current["spill_stores"] = int(m.group(2))
            current["spill_loads"] = int(m.group(3))
        m = _REGS_RE.search(line)
        if m:
            current["registers"] = int(m.group(1))
            s = _SMEM_RE.search(line)
            current["shared_bytes"] = int(s.group(1)) if s else 0
    for m in _WGMMA_SERIAL_RE.finditer(log):  # (printed before the function's own block)
        if m.group(3) in report:
            report[m.group(3)]["wgmma_serialized"] = f"{m.group(1)}: {m.group(2)}"
    return report


_attr_lock = threading.Lock()


@dataclasses.dataclass
class Kernel:
    """A loaded kernel: the CuPy function plus the resource facts the launch layer needs."""

    function: object  # cupy.cuda.Function
    name: str
    device: int
    module: object  # keeps the cupy Module (and so the function) alive
    num_regs: int
    shared_size_bytes: int  # static shared memory
    local_size_bytes: int
    max_threads_per_block: int
    max_dynamic_shared: int = 0

    def set_max_dynamic_shared(self, nbytes: int) -> None:
        """Raise the kernel's dynamic shared-memory limit (needed above 48 KiB); grow-only and thread-safe
        (two threads asking for different sizes end with the larger one set)."""
        nbytes = int(nbytes)
        if nbytes <= self.max_dynamic_shared:
            return
        from cupy_backends.cuda.api import driver

        from .streams import relaxed_capture_mode

        with _attr_lock, relaxed_capture_mode():  # set up once, as a program's load (``_get_kernel_slow``)
            if nbytes <= self.max_dynamic_shared:
                return
            driver.funcSetAttribute(
                self.function.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes
            )
            self.max_dynamic_shared = nbytes


_kernel_cache: dict = {}
_kernel_lock = threading.Lock()
# (device, path, kernel, defines, options) -> Kernel: the per-call fast path, so a launch path does not
# re-read and re-hash its source on every call. Source edits are seen by new processes (or after
# ``clear_kernel_memo()``), which is what a library needs; the content-hash cache stays authoritative.
_kernel_memo: dict = {}


def clear_kernel_memo() -> None:
    """Forget the per-call fast path (tests that edit kernel sources in-process use this)."""
    _kernel_memo.clear()


def debug_options() -> tuple:
    """The diagnostic NVRTC options the environment asks for (never on by default): ``-lineinfo`` under
    CAKE_RT_LINEINFO, for compute-sanitizer's and ncu's source lines. ``get_kernel`` adds them to every program it
    loads; code that compiles through ``compile_cubin`` directly (warmup) passes them itself."""
    from .. import env

    return ("-lineinfo",) if env.flag("CAKE_RT_LINEINFO") else ()


def get_kernel(path, kernel_name: str, *, defines=None, options=(), device=None) -> Kernel:
    """Compile (or fetch from cache) ``path`` for ``device``'s exact target and return one of its kernels.

    ``path`` is relative to ``cake_rt/kernels/``. ``defines`` ({name: value}) are prepended as ``#define``
    lines; ``options`` are NVRTC options, ``debug_options()`` added to them. Loaded modules are cached per (device,
    cache key): every device gets its own module.
    """
    from .arch import device_index

    options = tuple(options) + debug_options()
    memo_key = (device_index(device), str(path), kernel_name,
                tuple(sorted((defines or {}).items())), options)
    hit = _kernel_memo.get(memo_key)
    if hit is not None:
        return hit
    kernel = _get_kernel_slow(path, kernel_name, defines=defines, options=options, device=memo_key[0])
    _kernel_memo[memo_key] = kernel
    return kernel


def _get_kernel_slow(path, kernel_name: str, *, defines, options, device) -> Kernel:
    import cupy
    from cupy_backends.cuda.api import driver

    from .arch import device_info

    info = device_info(device)
    if not info.supported:
        raise RuntimeError(
            f"cake-rt needs compute capability >= 8.0; device {info.index} ({info.name}) is "
            f"{info.capability[0]}.{info.capability[1]}"
        )
    source = load_source(path)
    name = pathlib.Path(str(path)).name
    key = cache_key(source, name=name, target=info.target, defines=defines, options=options)
    ck = (info.index, key, kernel_name)
    with _kernel_lock:
        hit = _kernel_cache.get(ck)
    if hit is not None:
        return hit
    cubin = compile_cubin(source, name=name, target=info.target, defines=defines, options=options)
    from .streams import relaxed_capture_mode

    # The load in relaxed capture mode: a driver that counts a module load as "potentially unsafe" refuses it beside a
    # capture in global mode (any thread's) or thread-local mode (this thread's) and invalidates that capture (the H200's
    # driver 580 allows it in either mode: docs/reliability.md, review32). A load is no stream work and is made once per
    # process, so no graph can record it or miss it at a replay; relaxed mode still refuses it where it conflicts with a
    # capture (the CaptureError below).
    with cupy.cuda.Device(info.index), relaxed_capture_mode():
        module = cupy.cuda.function.Module()
        try:
            module.load(cubin)
        except Exception as exc:
            from .streams import CAPTURE_ERRORS, CaptureError

            if getattr(exc, "status", None) in CAPTURE_ERRORS:  # the cubin is good: a capture forbids loading it
                raise CaptureError(
                    f"cake-rt: {name} ({info.target}) is not loaded yet, and a CUDA graph capture under way forbids "
                    f"loading a module: make one eager call with the same arguments before capturing") from None
            # A verified cubin the driver still refuses (e.g. written by a broken toolchain): never keep it.
            forget_cubin(source, name=name, target=info.target, defines=defines, options=options)
            _warn(f"cake-rt: the cached cubin of {name} ({info.target}) did not load ({exc}); recompiling")
            cubin = compile_cubin(source, name=name, target=info.target, defines=defines, options=options)
            module = cupy.cuda.function.Module()
            module.load(cubin)
        fn = module.get_function(kernel_name)
        ga = driver.funcGetAttribute
        kernel = Kernel(
            function=fn,
            name=kernel_name,
            device=info.index,
            module=module,
            num_regs=ga(driver.CU_FUNC_ATTRIBUTE_NUM_REGS, fn.ptr),
            shared_size_bytes=ga(driver.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn.ptr),
            local_size_bytes=ga(driver.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn.ptr),
            max_threads_per_block=ga(driver.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn.ptr),
            max_dynamic_shared=ga(driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fn.ptr),
        )
    with _kernel_lock:
        kernel = _kernel_cache.setdefault(ck, kernel)
    return kernel
