"""Quick DSA timing script for the device machine (not a test; `cake-rt bench dsa` is the full benchmark).

    PYTHONPATH=$PWD python3 tests/dsa/bench_dsa.py --rows S1,C1,A1 --heads 32,64 --json out.json
    # default program vs the CAKE_RT_DSA_FAST=1 variant, in one process, bits compared:
    PYTHONPATH=$PWD python3 tests/dsa/bench_dsa.py --rows S1,C1,A1 --heads 32,64 --variants default,fast \
        --schedules ticket --entries prepared --side "" --repeats 7 --delay-us 0,400 --json out.json

Times one synchronized call with CUDA events (median, p20, p80 over repeats, warm L2), prepared and
eager (caller-owned workspace) for each schedule, plus a side-stream table (a spinning kernel holds
1 or 32 SMs during the call). ``--variants`` sets ``CAKE_RT_DSA_FAST`` per measurement (0 for
``default``, 1 for ``fast``) and prints whether each variant's bits equal the first variant's.
``--delay-us 400`` times behind a 400 us one-CTA kernel on the same stream: GPU time without the host's
launch gaps (what the A rows, a few tens of us of GPU work, need).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

ROWS = {
    "S1": dict(T=8192, Tkv=8192),
    "S2": dict(T=16384, Tkv=16384),
    "C1": dict(T=4096, Tkv=65536),
    "A1": dict(T=4, Tkv=22018),
    "A2": dict(T=4, Tkv=30466),
    "A3": dict(T=4, Tkv=41986),
}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="S1,C1,A1")
    ap.add_argument("--heads", default="32,64")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--side", default="S1,C1,A1")
    ap.add_argument("--side-heads", default="32")
    ap.add_argument("--json", default=None)
    ap.add_argument("--profile", default="", help="rows to run once more with per-phase cycle counters")
    ap.add_argument("--mma", default="", help="comma list of programs to time: wgmma (default), sync")
    ap.add_argument("--variants", default="default",
                    help="comma list: default (CAKE_RT_DSA_FAST=0), fast (CAKE_RT_DSA_FAST=1)")
    ap.add_argument("--schedules", default="ticket,static")
    ap.add_argument("--entries", default="prepared,eager")
    ap.add_argument("--delay-us", default="0",
                    help="comma list; > 0: time behind a delay kernel of that many us on the same stream "
                         "(GPU time only, no host gaps: the A rows are latency-bound)")
    a = ap.parse_args(argv)
    variants = [v for v in a.variants.split(",") if v]
    for v in variants:
        if v not in ("default", "fast"):
            ap.error(f"--variants: expected default and/or fast, got {v!r}")
    delays = [int(float(x) * 1000) for x in a.delay_us.split(",") if x]
    schedules = [x for x in a.schedules.split(",") if x]
    entries = [x for x in a.entries.split(",") if x]
    if not schedules or not entries:
        ap.error("--schedules and --entries need at least one value")

    import cupy

    from cake_rt.interop import BF16
    from cake_rt.launch.compile import get_kernel
    from cake_rt.launch.grid import launch
    from cake_rt.ops import dsa

    D, topk = 128, 2048
    results = []

    spin = None

    def timeit(fn, stream, n, delay_ns=0):
        ev = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(n)]
        fn()
        fn()
        stream.synchronize()
        ts = []
        for e0, e1 in ev:
            if delay_ns:  # a one-CTA kernel in front: the host enqueues the call while the GPU waits on it
                launch(spin, 1, 32, (np.uint64(delay_ns), None), shared_mem=1024, stream=stream)
            e0.record(stream)
            fn()
            e1.record(stream)
            e1.synchronize()
            ts.append(cupy.cuda.get_elapsed_time(e0, e1))
        ts = np.array(ts)
        return float(np.median(ts)), float(np.percentile(ts, 20)), float(np.percentile(ts, 80))

    # bf16 matmul rate (cuBLAS through CuPy) as the floor for the table.
    try:
        n = 8192
        A = cupy.random.standard_normal((n, n), dtype=cupy.float32).astype(BF16)
        B = cupy.random.standard_normal((n, n), dtype=cupy.float32).astype(BF16)
        st = cupy.cuda.get_current_stream()
        ms, _, _ = timeit(lambda: cupy.matmul(A, B), st, 5)
        mm_tflops = 2 * n ** 3 / ms / 1e9
        del A, B
    except Exception as exc:  # pragma: no cover - device dependent
        print("matmul floor failed:", exc)
        mm_tflops = 767.0
    print(f"bf16 matmul 8192^3: {mm_tflops:.0f} TFLOP/s")
    spin = get_kernel("dsa/spin.cu", "dsa_hold_sm")
    delays = delays or [0]

    rng = np.random.default_rng(0)
    mmas = [m for m in a.mma.split(",") if m] or [""]
    for H, mma in [(int(h), m) for h in a.heads.split(",") for m in mmas]:
        os.environ["CAKE_RT_DSA_MMA"] = mma
        for row in a.rows.split(","):
            T, Tkv = ROWS[row]["T"], ROWS[row]["Tkv"]
            q = cupy.asarray(rng.standard_normal((T, H, D), dtype=np.float32).astype(BF16))
            k = cupy.asarray(rng.standard_normal((Tkv, D), dtype=np.float32).astype(BF16))
            w = cupy.asarray((rng.standard_normal((T, H)) * H ** -0.5).astype(np.float32))
            vp = dsa.visible_pairs([0, T], [0, Tkv])
            flops, nbytes = dsa.dsa_flops_bytes(T, Tkv, H, D, topk, vp)
            floor_ms = 2 * H * D * vp / (mm_tflops * 1e9)
            ws_bytes = dsa.dsa_indexer_workspace_bytes(q, k, w, topk)
            ws = cupy.empty(max(1, ws_bytes), dtype=cupy.uint8)
            s = cupy.cuda.Stream(non_blocking=True)
            outs = {}
            vouts = {}
            for variant in variants:
                os.environ["CAKE_RT_DSA_FAST"] = "1" if variant == "fast" else "0"
                for sched in schedules:
                    out = None
                    if "prepared" in entries:
                        idx = cupy.empty((T, topk), cupy.int32)
                        sc = cupy.empty((T, topk), cupy.float32)
                        r = dsa.prepare_dsa_indexer_det_topk(q, k, w, topk, indices=idx, scores=sc, workspace=ws,
                                                             schedule=sched)
                        for dns in delays:
                            med, p20, p80 = timeit(lambda: r(stream=s), s, a.repeats, dns)
                            rec = dict(row=row, H=H, mma=mma or "default", variant=variant, fast=r.config.fast,
                                       wgmma=r.config.wgmma, entry="prepared", schedule=sched, delay_us=dns / 1000,
                                       ms=med, p20=p20, p80=p80, tflops=flops / med / 1e9, floor_ms=floor_ms,
                                       frac_floor=floor_ms / med, units=r.plan.nunits, merge=r.plan.nmerge,
                                       grid=r._dp.grid)
                            results.append(rec)
                            print(json.dumps(rec), flush=True)
                        out = (idx.get(), sc.get().view(np.uint32))
                    if "eager" in entries:
                        idx2 = cupy.empty((T, topk), cupy.int32)
                        sc2 = cupy.empty((T, topk), cupy.float32)
                        for dns in delays:
                            med, p20, p80 = timeit(lambda: dsa.dsa_indexer_det_topk(
                                q, k, w, topk, indices=idx2, scores=sc2, workspace=ws, stream=s, schedule=sched),
                                s, a.repeats, dns)
                            rec = dict(row=row, H=H, mma=mma or "default", variant=variant, entry="eager",
                                       schedule=sched, delay_us=dns / 1000, ms=med, p20=p20, p80=p80,
                                       tflops=flops / med / 1e9, floor_ms=floor_ms, frac_floor=floor_ms / med)
                            results.append(rec)
                            print(json.dumps(rec), flush=True)
                        e_out = (idx2.get(), sc2.get().view(np.uint32))
                        if out is not None:
                            same = all(np.array_equal(x, y) for x, y in zip(out, e_out))
                            print(f"  eager == prepared bitwise ({variant}, {sched}): {same}")
                            results.append(dict(row=row, H=H, variant=variant, schedule=sched, eager_eq_prepared=same))
                        else:
                            out = e_out
                    if variant == variants[0]:
                        outs[sched] = out
                    vouts.setdefault(variant, out)
                    same = all(np.array_equal(x, y) for x, y in zip(out, vouts[variants[0]]))
                    if variant != variants[0] or sched != schedules[0]:
                        print(f"  {variant}/{sched} == {variants[0]}/{schedules[0]} bitwise: {same}", flush=True)
                        results.append(dict(row=row, H=H, variant=variant, schedule=sched,
                                            bitwise_eq=f"{variants[0]}/{schedules[0]}", same=bool(same)))
            os.environ["CAKE_RT_DSA_FAST"] = "1" if variants[0] == "fast" else "0"
            if row in a.profile.split(",") and mma == mmas[0]:
                for variant in variants:
                    os.environ["CAKE_RT_DSA_FAST"] = "1" if variant == "fast" else "0"
                    os.environ["CAKE_RT_DSA_PROFILE"] = "1"
                    try:
                        idx = cupy.empty((T, topk), cupy.int32)
                        sc = cupy.empty((T, topk), cupy.float32)
                        r = dsa.prepare_dsa_indexer_det_topk(q, k, w, topk, indices=idx, scores=sc, workspace=ws,
                                                             schedule="ticket")
                        r(stream=s)
                        s.synchronize()
                        ctr = dsa.profile_counters()
                        ctr.fill(0)
                        cupy.cuda.Device().synchronize()
                        r(stream=s)
                        s.synchronize()
                        c = ctr.get().astype(np.float64)
                        names = ["setup", "copy_wait", "compact", "mma_epi", "bar_epi", "append", "finish", "ticket"]
                        tot = c.sum()
                        prof = {n_: round(float(v / tot), 4) for n_, v in zip(names, c)}
                        same = np.array_equal(idx.get(), outs[schedules[0]][0])
                        rec = dict(row=row, H=H, table="profile", variant=variant, fractions=prof,
                                   total_cycles=float(tot), bitwise_same=bool(same))
                        results.append(rec)
                        print(json.dumps(rec), flush=True)
                    finally:
                        del os.environ["CAKE_RT_DSA_PROFILE"]
                os.environ["CAKE_RT_DSA_FAST"] = "1" if variants[0] == "fast" else "0"
            if "ticket" in outs and "static" in outs:
                same = all(np.array_equal(x, y) for x, y in zip(outs["ticket"], outs["static"]))
                print(f"  ticket == static bitwise: {same}")
                results.append(dict(row=row, H=H, ticket_eq_static=bool(same)))

            if row in a.side.split(",") and str(H) in a.side_heads.split(",") and mma == mmas[0]:
                side = cupy.cuda.Stream(non_blocking=True)
                for held in (0, 1, 32):
                    for sched in schedules:
                        idx = cupy.empty((T, topk), cupy.int32)
                        sc = cupy.empty((T, topk), cupy.float32)
                        r = dsa.prepare_dsa_indexer_det_topk(q, k, w, topk, indices=idx, scores=sc, workspace=ws,
                                                             schedule=sched)
                        r(stream=s)
                        s.synchronize()
                        ts = []
                        for _ in range(max(5, a.repeats // 2)):
                            if held:
                                launch(spin, held, 32, (np.uint64(int(30e6)), None), shared_mem=160 * 1024,
                                       stream=side)
                                time.sleep(0.002)
                            e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
                            e0.record(s)
                            r(stream=s)
                            e1.record(s)
                            e1.synchronize()
                            ts.append(cupy.cuda.get_elapsed_time(e0, e1))
                            side.synchronize()
                        same = np.array_equal(idx.get(), outs[sched][0]) and np.array_equal(
                            sc.get().view(np.uint32), outs[sched][1])
                        rec = dict(row=row, H=H, table="side", held=held, schedule=sched,
                                   ms=float(np.median(ts)), bitwise_same=bool(same))
                        results.append(rec)
                        print(json.dumps(rec), flush=True)
            del q, k, w, ws
            cupy.get_default_memory_pool().free_all_blocks()
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(dict(matmul_tflops=mm_tflops, results=results), fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
