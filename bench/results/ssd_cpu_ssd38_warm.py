# ssd38: warm an arm's kernel cache on the CPU: every sm_90a SSD program (copied from ~/.cache/cake-rt when there), the
# selftest program, and the phase-trace copy's program of short. Run with PYTHONPATH=<arm tree>,
# CAKE_RT_CACHE_DIR=<arm cache>; argv[1]: the arm tree.
import concurrent.futures as cf
import multiprocessing
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import textwrap

from cake_rt.launch.compile import cache_key, debug_options, load_source
from cake_rt.warmup import _compile_one, _name, programs

T = "sm_90a"


def main():
    tree = pathlib.Path(sys.argv[1]).resolve()
    dst = pathlib.Path(os.environ["CAKE_RT_CACHE_DIR"])
    dst.mkdir(parents=True, exist_ok=True)
    os.chmod(dst, 0o700)
    seeds = (pathlib.Path.home() / ".cache/cake-rt",)
    jobs = [(p, d) for _, p, d in programs(("ssd",), T)] + [("common/selftest.cu", None)]
    todo, copied = [], 0
    for p, d in jobs:
        k = cache_key(load_source(p), name=_name(p), target=T, defines=d, options=debug_options())
        if (dst / (k + ".cubin")).exists():
            continue
        src = next((d / (k + ".cubin") for d in seeds if (d / (k + ".cubin")).exists()), None)
        if src is not None:
            shutil.copy2(src, dst / (k + ".cubin"))
            copied += 1
        else:
            todo.append((p, d, T))
    print(f"{tree.name}: {len(jobs)} programs, {copied} copied, {len(todo)} to compile", flush=True)
    with cf.ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_compile_one, todo))
    # the phase trace's patched program of short (bf16, headdim 64, dstate 128, chunk 256, 8 units a group, 4 rows)
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(tree / "cake_rt", pathlib.Path(tmp) / "cake_rt", ignore=shutil.ignore_patterns("__pycache__"))
        code = f"""
    import importlib.machinery, importlib.util, pathlib, sys
    sys.path.insert(0, {str(tree / 'scripts')!r})
    ld = importlib.machinery.SourceFileLoader("pt", {str(tree / 'scripts/ssd-phase-trace')!r})
    m = importlib.util.module_from_spec(importlib.util.spec_from_loader("pt", ld)); ld.exec_module(m)
    for rel, patch in m.PATCHES.items():
        f = pathlib.Path({tmp!r}) / "cake_rt/kernels" / rel
        f.write_text(patch(f.read_text()))
    from cake_rt.ops import ssd as ops
    from cake_rt.warmup import _compile_one
    assert ops.__file__.startswith({tmp!r}), ops.__file__
    d = ops.program_defines(0, 2, 2, 64, 128, 256, 8, {T!r}, family="chunkpar", rows=4)
    print("trace program", d, round(_compile_one((ops.KERNEL_PATH, d, {T!r})), 1), "s")
    """
        subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=dict(os.environ, PYTHONPATH=tmp), cwd=tmp, check=True)
    n = len(list(dst.glob("*.cubin")))
    print(f"{tree.name}: {n} cubins, {sum(f.stat().st_size for f in dst.glob('*.cubin')) >> 20} MiB", flush=True)


if __name__ == "__main__":
    main()
