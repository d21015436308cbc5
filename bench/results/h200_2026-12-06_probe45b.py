"""(Session 45, second probe: main d21bd56 against branch bmerge, each from its own copy of cake_rt/kernels.) A DSA row's split records placed at chosen offsets of their own 2 MiB pages, for several programs (the split
histogram's layout: main, nocount, s1 = 8 consecutive bins on 8 lines of 1 KiB, s1k = on 8 KiB blocks), every
(variant, offset) runner alternated call by call in one process (cold L2); outputs checked equal.

    python3 probe_hist.py compile H[,H] VARIANTS             (CPU: the sm_90a programs into CAKE_RT_CACHE_DIR)
    python3 probe_hist.py run ROW H VARIANTS OFFSETS [REPEATS]
"""
import os
import sys

sys.path.insert(0, os.getcwd())
import cake_rt.ops.dsa as dsa  # noqa: E402

# each arm's kernels (a cache key is the program's text: both live in one cache)
SRC = {"main": ".dev/p45/kmain/cake_rt/kernels/dsa/indexer.cu", "bm": ".dev/p45/kbm/cake_rt/kernels/dsa/indexer.cu"}
VAR = {k: {} for k in SRC}


def use(v):
    dsa.KERNEL_PATH = os.path.join(os.getcwd(), SRC[v])
cur = {}
_orig = dsa.DsaConfig.program_defines


def _defs(self, windows):
    d = dict(_orig(self, windows))
    d.update(cur)
    return d


dsa.DsaConfig.program_defines = _defs


def compile_mode(heads, variants):
    import concurrent.futures as cf
    from cake_rt.warmup import _compile_one
    jobs = []
    for H in heads:
        cfg = dsa._try_config(H, 128, dsa.TARGET_SMEM["sm_90a"], True)
        for v in variants:
            for win in (False, True):
                d = dict(cfg.program_defines(win))
                use(v)
                jobs.append((dsa.KERNEL_PATH, d, "sm_90a"))
    with cf.ProcessPoolExecutor(2) as ex:
        for j, t in zip(jobs, ex.map(_compile_one, jobs)):
            print(f"compiled {j[1]} in {t:.1f} s", flush=True)
    from cake_rt.launch.compile import compile_report, load_source
    for path, d, tgt in jobs:
        r = compile_report(load_source(path), name="indexer.cu", target=tgt, defines=d)
        print({k: (v["registers"], v["spill_stores"], v["spill_loads"]) for k, v in r.items()}, d.get("DSA_WINDOWS"),
              path.split("/")[2], flush=True)


def run_mode(row_name, H, variants, offsets, repeats):
    import types
    import cupy
    import numpy as np
    import cake_rt
    from cake_rt.bench import cases
    from cake_rt.bench.suites import load_suite
    from cake_rt.bench.timing import Timer

    suite = load_suite("dsa")
    row = next(r for r in suite["rows"] if r["name"] == row_name)
    item = types.SimpleNamespace(heads=H, defaults=suite["defaults"], params=row)
    _, D, topk, layout, q, k, w, meta = cases._dsa_setup(item, {})
    stream = cupy.cuda.Stream(non_blocking=True)
    n = len(variants) * len(offsets)
    PAGE = 2 << 20
    big = cupy.zeros((n + 1) * PAGE, cupy.uint8)
    base = (big.data.ptr + PAGE - 1) // PAGE * PAGE
    orig = dsa._launch_args
    state = {"rec": 0}

    def patched(dp, qkw, indices, scores, workspace, tickets, schedule):
        a = orig(dp, qkw, indices, scores, workspace, tickets, schedule)
        if a is None or not a[4]:
            return a
        return a[:4] + (state["rec"],) + a[5:]

    dsa._launch_args = patched
    runners, outs = [], []
    i = 0
    for v in variants:
        use(v)
        for off in offsets:
            state["rec"] = base + i * PAGE + off
            ind, sc = cases._dsa_outputs(layout.T, topk)
            run = cake_rt.prepare_dsa_indexer_det_topk(q, k, w, topk, **meta, indices=ind, scores=sc, stream=stream)
            run(stream=stream)  # the pointers are bound at the first launch
            runners.append((f"{v} +{off:#x}", run))
            outs.append((ind, sc))
            i += 1
    cur.clear()
    stream.synchronize()
    arms = [(name, lambda run=run: run(stream=stream)) for name, run in runners]
    with stream:
        timer = Timer(stream, repeats=repeats, l2_bytes=cupy.cuda.Device().attributes["L2CacheSize"],
                      min_repeats=repeats, budget_s=120.0)
        times = timer.time_arms(arms, wall=False)
    stream.synchronize()
    first = [cupy.asnumpy(x) for x in outs[0]]
    same = all(np.array_equal(cupy.asnumpy(a), first[0]) and
               np.array_equal(cupy.asnumpy(b).view(np.uint32), first[1].view(np.uint32)) for a, b in outs[1:])
    print(f"{row_name} H={H} D={D} topk={topk}: {n} runners alternated, {repeats} samples each (cold L2); "
          f"outputs equal: {same}; records zero after: {int(cupy.count_nonzero(big))== 0}")
    print("offset     " + "".join(f"{v:>16}" for v in variants))
    for j, off in enumerate(offsets):
        cells = []
        for vi, v in enumerate(variants):
            t = times[f"{v} +{off:#x}"]
            cells.append(f"{t['median'] * 1e3:7.2f} ({t['min'] * 1e3:5.1f})")
        print(f"+{off:#09x} " + "".join(f"{c:>16}" for c in cells), flush=True)
    for v in variants:
        med = [times[f"{v} +{off:#x}"]["median"] * 1e3 for off in offsets]
        print(f"{v:>8}: median of medians {np.median(med):.2f} us, range {min(med):.2f}-{max(med):.2f}")
    return same


if __name__ == "__main__":
    if sys.argv[1] == "compile":
        compile_mode([int(h) for h in sys.argv[2].split(",")], sys.argv[3].split(","))
    else:
        ok = run_mode(sys.argv[2], int(sys.argv[3]), sys.argv[4].split(","),
                      [int(v, 0) for v in sys.argv[5].split(",")], int(sys.argv[6]) if len(sys.argv) > 6 else 12)
        sys.exit(0 if ok else 1)
