# ssd40: warm an arm's kernel cache on the CPU: the selftest program and the sm_90a SSD programs of the call's bench rows
# and of scripts/ssd-fingerprint's cases (with --all every SSD program: the GPU tests and sanitize-case run on that arm),
# and with --trace the exact-scan programs of m2-2.7b-b8 and varlen as scripts/ssd-exact-trace patches them (a cubin
# already in SEED_CACHE, default /tmp/ssd40cache, or ~/.cache/cake-rt is copied instead). Run with PYTHONPATH=<arm tree>,
# CAKE_RT_CACHE_DIR=<arm cache>; argv[1]: the arm tree; then --all, --trace.
import concurrent.futures as cf
import importlib.machinery
import importlib.util
import multiprocessing
import os
import pathlib
import shutil
import sys
import tempfile

from cake_rt.launch.compile import cache_key, debug_options, load_source
from cake_rt.ops import ssd as ops
from cake_rt.warmup import _compile_one, _name, programs

T = "sm_90a"
TRACED_ROWS = ((2048, 80, 256), (65536, 8, 128))  # (seqlen, units a group, chunk): m2-2.7b-b8, varlen (bf16, dstate 128)
# (x dtype code, headdim, dstate, chunk) of the bench rows and the fingerprint's cases (dt and states fp32 in all)
CALL_SHAPES = {(0, 64, 128, 256), (0, 64, 128, 128), (1, 64, 64, 128), (0, 128, 256, 256), (0, 64, 64, 64),
               (1, 64, 256, 128), (0, 128, 64, 128), (2, 64, 64, 128), (1, 128, 64, 256), (0, 64, 128, 64)}


def in_call(d) -> bool:
    return (d["SSD_T"], d["SSD_P"], d["SSD_N"], d["SSD_Q"]) in CALL_SHAPES and d["SSD_DT"] == 2 and d["SSD_SD"] == 2


def traced_jobs(tree: pathlib.Path, tmp: pathlib.Path) -> list:
    """(absolute path of the patched ssd_combined.cu in a patched copy of the tree's cake_rt, defines) of the traced
    rows: the source text ssd-exact-trace's copy compiles, so the same cache key."""
    loader = importlib.machinery.SourceFileLoader("exact_trace", str(tree / "scripts" / "ssd-exact-trace"))
    spec = importlib.util.spec_from_loader("exact_trace", loader)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(tree / "scripts"))
    loader.exec_module(mod)
    shutil.copytree(tree / "cake_rt", tmp / "cake_rt", ignore=shutil.ignore_patterns("__pycache__"))
    for rel, patch in mod.PATCHES.items():
        f = tmp / "cake_rt" / "kernels" / rel
        f.write_text(patch(f.read_text()))
    path = str(tmp / "cake_rt" / "kernels" / ops.KERNEL_PATH)
    return [(path, ops.program_defines(0, 2, 2, 64, 128, q, u, T, family="exact")) for _, u, q in TRACED_ROWS]


def main():
    tree = pathlib.Path(sys.argv[1]).resolve()
    dst = pathlib.Path(os.environ["CAKE_RT_CACHE_DIR"])
    dst.mkdir(parents=True, exist_ok=True)
    os.chmod(dst, 0o700)
    seeds = tuple(pathlib.Path(p) for p in (os.environ.get("SEED_CACHE", "/tmp/ssd40cache"),
                                            pathlib.Path.home() / ".cache/cake-rt"))
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="ssd40-trace-"))
    jobs = [(p, d) for _, p, d in programs(("ssd",), T) if "--all" in sys.argv[2:] or in_call(d)]
    jobs += [("common/selftest.cu", None)]
    if "--trace" in sys.argv[2:]:
        jobs += traced_jobs(tree, tmp)
    todo, copied = [], 0
    for p, d in jobs:
        k = cache_key(load_source(p), name=_name(p), target=T, defines=d, options=debug_options())
        if (dst / (k + ".cubin")).exists():
            continue
        src = next((s / (k + ".cubin") for s in seeds if (s / (k + ".cubin")).exists()), None)
        if src is not None:
            shutil.copy2(src, dst / (k + ".cubin"))
            copied += 1
        else:
            todo.append((p, d, T))
    print(f"{tree.name}: {len(jobs)} programs, {copied} copied, {len(todo)} to compile", flush=True)
    with cf.ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_compile_one, todo))
    shutil.rmtree(tmp)
    n = len(list(dst.glob("*.cubin")))
    print(f"{tree.name}: {n} cubins, {sum(f.stat().st_size for f in dst.glob('*.cubin')) >> 20} MiB", flush=True)


if __name__ == "__main__":
    main()
