"""Host time of one steady-state call (microseconds): SSD eager, DSA eager, DSA prepared.

The driver's launch entry points are replaced by no-ops, so what is timed is the Python path alone
(validation, planning, caches, argument packing, stream handling, event records): the quantity the
performance issues bound (SSD eager <= 25 us, DSA eager <= 30 us, DSA prepared <= 10 us). Public API only,
so the same script measures an older tree. Needs a GPU (arrays, streams, events are real).

    python3 scripts/host_time.py [--calls N]
"""
import argparse
import statistics
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000)
    args = ap.parse_args()
    import cupy
    from cupy_backends.cuda.api import driver

    import cake_rt
    from cake_rt.interop import BF16

    rng = np.random.default_rng(0)
    s = cupy.cuda.Stream(non_blocking=True)

    # SSD: batch 1, 2048 tokens in 4 sequences, 8 heads x 64, dstate 64, chunk 64, D, z, dt_bias, final states
    L, Hh, P, N = 2048, 8, 64, 64
    x = cupy.asarray(rng.standard_normal((1, L, Hh, P)).astype(np.float32).astype(BF16))
    z = cupy.asarray(rng.standard_normal((1, L, Hh, P)).astype(np.float32).astype(BF16))
    B = cupy.asarray(rng.standard_normal((1, L, 1, N)).astype(np.float32).astype(BF16))
    C = cupy.asarray(rng.standard_normal((1, L, 1, N)).astype(np.float32).astype(BF16))
    dt = cupy.asarray(rng.standard_normal((1, L, Hh)).astype(np.float32))
    A = cupy.asarray(-rng.uniform(1, 8, Hh).astype(np.float32))
    Dv = cupy.asarray(rng.standard_normal(Hh).astype(np.float32))
    bias = cupy.asarray(rng.standard_normal(Hh).astype(np.float32))
    cu = np.array([0, 300, 1000, 1500, L], np.int32)
    y = cupy.empty_like(x)

    def ssd():
        return cake_rt.ssd_combined(x, dt, A, B, C, 64, D=Dv, z=z, dt_bias=bias, cu_seqlens=cu, dt_softplus=True,
                                    return_final_states=True, out=y, stream=s)

    # DSA: T = 1024 queries, 4096 keys in 2 segments, H = 32, D = 128, topk 16, caller outputs and workspace
    T, Tkv = 1024, 4096
    q = cupy.asarray(rng.integers(-3, 4, (T, 32, 128)).astype(BF16))
    k = cupy.asarray(rng.integers(-3, 4, (Tkv, 128)).astype(BF16))
    w = cupy.asarray(rng.standard_normal((T, 32)).astype(np.float32))
    meta = dict(cu_seqlens_q=np.array([0, 512, T], np.int32), cu_seqlens_k=np.array([0, 2048, Tkv], np.int32))
    need = int(cake_rt.dsa_indexer_workspace_bytes(q, k, w, 16, **meta))
    ws = cupy.empty(max(need, 1), dtype=cupy.uint8)
    ie, se = cupy.empty((T, 16), np.int32), cupy.empty((T, 16), np.float32)
    ip, sp = cupy.empty((T, 16), np.int32), cupy.empty((T, 16), np.float32)
    runner = cake_rt.prepare_dsa_indexer_det_topk(q, k, w, 16, **meta, indices=ip, scores=sp, workspace=ws)

    def dsa_eager():
        return cake_rt.dsa_indexer_det_topk(q, k, w, 16, **meta, indices=ie, scores=se, workspace=ws, stream=s)

    def dsa_prepared():
        return runner(stream=s)

    for fn in (ssd, dsa_eager, dsa_prepared):  # warm: compile, plan, caches (real launches)
        fn()
    s.synchronize()

    real = (driver.launchKernel, driver.launchCooperativeKernel)
    driver.launchKernel = lambda *a: None
    driver.launchCooperativeKernel = lambda *a: None
    rows = []
    try:
        for name, fn in (("ssd eager", ssd), ("dsa eager", dsa_eager), ("dsa prepared", dsa_prepared)):
            ts = []
            for _ in range(args.calls):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
            ts.sort()
            rows.append((name, 1e6 * statistics.median(ts), 1e6 * ts[int(0.9 * len(ts))]))
    finally:
        driver.launchKernel, driver.launchCooperativeKernel = real
    s.synchronize()
    print(f"{'call':<14} {'median us':>10} {'p90 us':>8}   (launch stubbed, {args.calls} calls)")
    for name, med, p90 in rows:
        print(f"{name:<14} {med:>10.1f} {p90:>8.1f}")


if __name__ == "__main__":
    main()
