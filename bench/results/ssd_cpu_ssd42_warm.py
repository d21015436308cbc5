# ssd42: warm an arm's kernel cache on the CPU: the selftest program and the sm_90a SSD programs of the call's bench rows
# and of scripts/ssd-fingerprint's cases (with --all every SSD program: the GPU tests and sanitize-case run on that arm;
# a cubin already in SEED_CACHE, default /tmp/ssd42cache, or ~/.cache/cake-rt is copied instead). Run with
# PYTHONPATH=<arm tree>, CAKE_RT_CACHE_DIR=<arm cache>; argv[1]: the arm tree; then --all.
import concurrent.futures as cf
import multiprocessing
import os
import pathlib
import shutil
import sys

from cake_rt.launch.compile import cache_key, debug_options, load_source
from cake_rt.warmup import _compile_one, _name, programs

T = "sm_90a"
# (x dtype code, headdim, dstate, chunk) of the bench rows and the fingerprint's cases (dt and states fp32 in all)
CALL_SHAPES = {(0, 64, 128, 256), (0, 64, 128, 128), (1, 64, 64, 128), (0, 128, 256, 256), (0, 64, 64, 64),
               (1, 64, 256, 128), (0, 128, 64, 128), (2, 64, 64, 128), (1, 128, 64, 256), (0, 64, 128, 64)}


def in_call(d) -> bool:
    return (d["SSD_T"], d["SSD_P"], d["SSD_N"], d["SSD_Q"]) in CALL_SHAPES and d["SSD_DT"] == 2 and d["SSD_SD"] == 2


def main():
    tree = pathlib.Path(sys.argv[1]).resolve()
    dst = pathlib.Path(os.environ["CAKE_RT_CACHE_DIR"])
    dst.mkdir(parents=True, exist_ok=True)
    os.chmod(dst, 0o700)
    seeds = tuple(pathlib.Path(p) for p in (os.environ.get("SEED_CACHE", "/tmp/ssd42cache"),
                                            pathlib.Path.home() / ".cache/cake-rt"))
    jobs = [(p, d) for _, p, d in programs(("ssd",), T) if "--all" in sys.argv[2:] or in_call(d)]
    jobs += [("common/selftest.cu", None)]
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
    n = len(list(dst.glob("*.cubin")))
    print(f"{tree.name}: {n} cubins, {sum(f.stat().st_size for f in dst.glob('*.cubin')) >> 20} MiB", flush=True)


if __name__ == "__main__":
    main()
