"""What the SSD trace scripts (`ssd-phase-trace`, `ssd-step-trace`) and `ssd-row` share: text patches by unique anchors, a copy of
this tree's cake_rt with patched kernel files that the script re-runs itself in, and a bench suite row's call with the
traced kernel's debug buffers as device arrays."""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile


def replace_once(text: str, old: str, new: str, tool: str, where: str) -> str:
    """``text`` with its one occurrence of ``old`` replaced (an AssertionError names an anchor the source lost)."""
    assert text.count(old) == 1, f"{tool}: anchor not found once in {where}: {old[:70]!r}"
    return text.replace(old, new)


def run_patched(tool: str, patches: dict, run_rows, default_runs: int) -> None:
    """The scripts' main: ``[ROW ...] [--runs N]`` (``-h`` / ``--help``: the calling script's docstring). Outside the copy: copy cake_rt to a temporary directory, rewrite
    each file of ``patches`` (a path under cake_rt/kernels -> a function of its text) and run the calling script again
    there; inside it: ``run_rows(rows, runs)``."""
    args = sys.argv[1:]
    if "-h" in args or "--help" in args:  # the calling script's docstring is its help
        print((sys.modules["__main__"].__doc__ or tool).strip())
        return
    runs = default_runs
    if "--runs" in args:
        i = args.index("--runs")
        runs = int(args[i + 1])
        del args[i:i + 2]
    rows = args or ["short"]
    inner = f"_{tool.upper().replace('-', '_')}_INNER"
    if os.environ.get(inner):
        run_rows(rows, runs)
        return
    here = pathlib.Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix=f"{tool}-") as tmp:
        shutil.copytree(here / "cake_rt", pathlib.Path(tmp) / "cake_rt", ignore=shutil.ignore_patterns("__pycache__"))
        for rel, patch in patches.items():
            f = pathlib.Path(tmp) / "cake_rt" / "kernels" / rel
            f.write_text(patch(f.read_text()))
        env = dict(os.environ, PYTHONPATH=tmp, **{inner: "1"})
        sys.exit(subprocess.call([sys.executable, sys.argv[0], *rows, "--runs", str(runs)], env=env))


def suite_params(row: str) -> dict:
    """A bench SSD suite row's parameters: the suite's defaults with the row's own."""
    from cake_rt.bench.suites import suite_rows

    return next(p for p in suite_rows("ssd") if p["name"] == row)


def suite_call(row: str, stream=None):
    """A bench suite row's call: ``(params, call)``; ``call()`` runs ``ssd_combined`` on the suite's inputs (seed 1234,
    family auto, the row's options, into one output array) on ``stream`` (None: the current stream)."""
    import cupy

    import cake_rt
    from cake_rt.bench import cases

    p = suite_params(row)
    inp = cases.ssd_inputs(p, 1234)
    cu = None if inp["cu_seqlens"] is None else cupy.asnumpy(inp["cu_seqlens"])
    kw = dict(D=inp["D"], z=inp["z"], dt_bias=inp["dt_bias"], cu_seqlens=cu, dt_softplus=True,
              return_final_states=True, return_varlen_states=bool(p.get("return_varlen_states")))
    y = cupy.empty_like(inp["x"])

    def call():
        return cake_rt.ssd_combined(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], int(p["chunk"]), **kw, out=y,
                                    stream=stream)

    return p, call


def traced_rows(rows):
    """For each bench suite row that runs the chunk-parallel family: ``(row, params, call, plan, kernel, stream,
    flush)``; ``call()`` runs the row's call (the suite's inputs, family auto) on ``stream``, ``flush(stream)`` empties
    L2, ``kernel`` is the traced ``ssd_chunkpar`` of the plan's program. Rows of the exact family are named and
    skipped."""
    import cupy

    from cake_rt.bench.timing import L2Flusher
    from cake_rt.launch.arch import device_info
    from cake_rt.launch.compile import get_kernel
    from cake_rt.ops import ssd as ops

    stream = cupy.cuda.Stream(non_blocking=True)
    flush = L2Flusher(device_info(0).l2_bytes)
    for row in rows:
        p, call = suite_call(row, stream)
        call()
        stream.synchronize()
        plan = ops.last_plan()
        if plan.family != "chunkpar":
            print(f"{row}: the {plan.family} family ({plan.reason}); nothing to trace")
            continue
        kernel = get_kernel(ops.KERNEL_PATH, "ssd_chunkpar", defines=plan.defines, device=0)
        yield row, p, call, plan, kernel, stream, flush


def global_array(kernel, name: str, n: int, dtype):
    """The traced module's ``__device__`` array ``name`` (``n`` elements of ``dtype``) as a CuPy array."""
    import cupy
    import numpy as np

    ptr = kernel.module.get_global_var(name)
    return cupy.ndarray((n,), dtype, memptr=cupy.cuda.MemoryPointer(
        cupy.cuda.UnownedMemory(ptr, n * np.dtype(dtype).itemsize, kernel.module), 0))


def dump_records(directory: str, fname: str, recs, gpu_us: float, axis: int) -> None:
    """The DSA trace scripts' ``--dump``: ``recs`` (a record array per run) stacked and cut along ``axis`` of a run's
    array (the CTAs or the tiles) after the last index any run stamped, to ``directory/fname`` (compressed), with the
    traced call's GPU time."""
    import numpy as np

    a = np.stack(recs)
    other = tuple(i for i in range(a.ndim) if i != axis + 1)
    n = int(np.nonzero(a.any(axis=other))[0].max(initial=-1)) + 1
    os.makedirs(directory, exist_ok=True)
    np.savez_compressed(os.path.join(directory, fname), recs=np.take(a, range(n), axis=axis + 1), gpu_us=gpu_us)


def dsa_traced_runs(rows, heads, runs: int, array: str, shape, cold: bool = True):
    """For each DSA bench suite row and head count whose program is the wgmma one: ``(name, H, runner, recs, gpu_us)``.
    The row's prepared runner (the suite's inputs and metadata) runs ``runs`` times with a cold L2 (``cold`` False:
    the inputs left in L2 by the run before, the L2 not flushed); after each run the
    traced module's ``__device__`` array ``array`` (uint64, zeroed before the run) is read as an int64 array of
    ``shape`` into ``recs``; ``gpu_us`` is the bench GPU time of the traced call."""
    import types

    import cupy
    import numpy as np

    import cake_rt
    from cake_rt.bench import cases
    from cake_rt.bench.suites import load_suite
    from cake_rt.bench.timing import L2Flusher, Timer
    from cake_rt.launch.arch import device_info
    from cake_rt.launch.compile import get_kernel
    from cake_rt.ops import dsa as ops

    suite = load_suite("dsa")
    stream = cupy.cuda.Stream(non_blocking=True)
    l2 = device_info(0).l2_bytes
    flush = L2Flusher(l2)
    for name in rows:
        row = next((r for r in suite["rows"] if r["name"] == name), None)
        if row is None:
            print(f"{name}: no DSA suite row of that name")
            continue
        for H in heads:
            item = types.SimpleNamespace(heads=H, defaults=suite["defaults"], params=row)
            _, _, topk, _, q, k, w, meta = cases._dsa_setup(item, {})
            indices = cupy.empty((q.shape[0], topk), np.int32)  # a prepared runner writes caller-owned outputs
            scores = cupy.empty((q.shape[0], topk), np.float32)
            runner = cake_rt.prepare_dsa_indexer_det_topk(q, k, w, topk, **meta, indices=indices, scores=scores)
            if not runner.config.wgmma:
                print(f"{name} H={H}: not the wgmma program; nothing to trace")
                continue
            # the program the runner launches: its plan's variant (several windows, the split parts' running floor)
            defines = runner.config.program_defines(runner.plan.windows, runner.plan.running_floor)
            kern = get_kernel(ops.KERNEL_PATH, "dsa_scan", defines=defines, device=0)
            buf = global_array(kern, array, int(np.prod(shape)), cupy.uint64)
            recs = []
            for _ in range(runs):
                buf.fill(0)
                if cold:
                    flush(stream)
                runner(stream=stream)
                stream.synchronize()
                recs.append(buf.get().reshape(shape).astype(np.int64))
            gpu = Timer(stream, repeats=max(runs, 5), warmup=2, l2_bytes=l2).time(lambda: runner(stream=stream),
                                                                                  wall=False)
            yield name, H, runner, recs, gpu["median"] * 1e3
