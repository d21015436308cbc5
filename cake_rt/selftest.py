"""Self-test of the building blocks (``cake-rt selftest``; the GPU tests call the same checks).

Each check compiles a tiny kernel from ``kernels/common/selftest.cu``, runs it on fresh random inputs
with poisoned outputs, and compares against a NumPy computation. Returns ``(ok, detail)``.
"""
from __future__ import annotations

import numpy as np

from .interop import BF16

_SRC = "common/selftest.cu"


def _k(name):
    from .launch.compile import get_kernel

    return get_kernel(_SRC, name)


def check_convert(n=4097, seed=0):
    import cupy

    from .launch.grid import launch

    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * np.exp(rng.uniform(-20, 20, n))).astype(np.float32)
    x[:4] = [0.0, -0.0, np.inf, -np.inf]
    d = cupy.asarray(x)
    ob = cupy.full(n, np.nan, np.float32)
    oh = cupy.full(n, np.nan, np.float32)
    pk = cupy.full(n, 0xDEADBEEF, np.uint32)
    launch(_k("selftest_convert"), (n + 255) // 256, 256, (d, ob, oh, pk, np.int32(n)))
    ok = convert_matches(x, ob.get(), oh.get(), pk.get())
    return ok, "bf16/fp16 round-to-nearest conversions and bf16x2 packing match NumPy/ml_dtypes bit for bit"


def convert_matches(x, ob, oh, pk) -> bool:
    """``selftest_convert``'s outputs (``x`` rounded to bf16 / fp16 and back to float32, ``x`` and ``-x`` packed as
    bf16x2) equal NumPy's bit for bit: compared as words, since a value comparison takes -0.0 for 0.0."""
    want_b = x.astype(BF16).astype(np.float32)
    with np.errstate(over="ignore"):
        want_h = x.astype(np.float16).astype(np.float32)
    lo = x.astype(BF16).view(np.uint16).astype(np.uint32)
    hi = (-x).astype(BF16).view(np.uint16).astype(np.uint32)
    return (np.array_equal(np.asarray(ob, np.float32).view(np.uint32), want_b.view(np.uint32))
            and np.array_equal(np.asarray(oh, np.float32).view(np.uint32), want_h.view(np.uint32))
            and np.array_equal(pk, lo | (hi << 16)))


def check_mma(seed=1):
    import cupy

    from .launch.grid import launch

    rng = np.random.default_rng(seed)
    details, ok = [], True
    for kname, dt in (("selftest_mma_bf16", BF16), ("selftest_mma_fp16", np.float16),
                      ("selftest_ldmatrix_mma_bf16", BF16)):
        a = rng.standard_normal((16, 16)).astype(dt)
        bt = rng.standard_normal((8, 16)).astype(dt)  # B stored as [n][k]
        c = rng.standard_normal((16, 8)).astype(np.float32)
        if kname.startswith("selftest_ldmatrix"):
            c[:] = 0.0  # this kernel starts from zero accumulators
        d = cupy.asarray(c)
        launch(_k(kname), 1, 32, (cupy.asarray(a.view(np.uint16)), cupy.asarray(bt.view(np.uint16)), d))
        want = a.astype(np.float64) @ bt.astype(np.float64).T + c
        err = np.abs(d.get() - want).max() / max(1e-30, np.abs(want).max())
        ok &= bool(err < 1e-5)
        details.append(f"{kname}: max rel err {err:.2e}")
    return ok, "; ".join(details)


def check_grid_barrier(rounds=1000):
    import cupy

    from .launch.grid import cooperative_grid_size, launch_cooperative
    from .launch.tickets import TicketWords

    k = _k("selftest_grid_barrier")
    grid = cooperative_grid_size(k, 1 << 30, 128, 0)  # the occupancy cap itself
    words = TicketWords(2)
    counters = cupy.zeros(rounds, np.uint32)
    errors = cupy.zeros(1, np.uint32)
    launch_cooperative(k, grid, 128, (words.array, counters, errors, np.int32(rounds)))
    c = counters.get()
    e = int(errors.get()[0])
    w = words.read()
    ok = e == 0 and bool(np.all(c == grid)) and int(w[0]) == 0 and int(w[1]) == 0
    return ok, (f"{grid} CTAs (occupancy cap) x {rounds} barrier rounds: errors={e}, "
                f"count word={int(w[0])}, exit word={int(w[1])}")


def check_ticket(nunits=10007, grid=300, calls=100):
    import cupy

    from .launch.grid import launch
    from .launch.tickets import TicketWords

    k = _k("selftest_ticket")
    words = TicketWords(1)
    claims = cupy.zeros(nunits, np.uint32)
    for _ in range(calls):
        launch(k, grid, 64, (words.array, claims, np.int32(nunits)))
    c = claims.get()
    w = int(words.read()[0])
    ok = bool(np.all(c == calls)) and w == 0
    return ok, f"{calls} calls x {nunits} units over {grid} CTAs: every unit claimed once per call, word={w}"


def check_float_key(n=5000, seed=2):
    import cupy

    from .launch.grid import launch

    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * np.exp(rng.uniform(-30, 30, n))).astype(np.float32)
    x[:6] = [np.nan, -np.inf, np.inf, 0.0, -0.0, -np.nan]
    keys = cupy.full(n, 0xFFFFFFFF, np.uint32)
    back = cupy.full(n, 1.0, np.float32)
    launch(_k("selftest_float_key"), (n + 127) // 128, 128, (cupy.asarray(x), keys, back, np.int32(n)))
    k = keys.get().astype(np.int64)
    fin = ~np.isnan(x)
    order_ok = True
    xs, ks = x[fin], k[fin]
    idx = np.argsort(xs, kind="stable")
    order_ok &= bool(np.all(np.diff(ks[idx]) >= 0))
    order_ok &= bool(np.all((np.diff(xs[idx]) > 0) == (np.diff(ks[idx]) > 0)))
    nan_ok = bool(np.all(k[~fin] == 0)) and bool(np.all(k[fin] > 0))
    zero_ok = k[3] == k[4]
    rt_ok = bool(np.array_equal(np.where(x[fin] == 0, 0, x[fin]), np.where(x[fin] == 0, 0, back.get()[fin])))
    return order_ok and nan_ok and zero_ok and rt_ok, "order-preserving keys: monotone, NaN lowest, -0 == +0"


def check_wgmma(seed=3):
    import cupy

    from .launch.arch import device_info
    from .launch.grid import launch

    if device_info().target != "sm_90a":
        return True, f"skipped: wgmma needs sm_90a (this device builds for {device_info().target})"
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((64, 64)).astype(BF16)
    b = rng.standard_normal((64, 64)).astype(BF16)
    d = cupy.full((64, 64), np.nan, np.float32)
    launch(_k("selftest_wgmma_bf16"), 1, 128,
           (cupy.asarray(a.view(np.uint16)), cupy.asarray(b.view(np.uint16)), d))
    want = a.astype(np.float64) @ b.astype(np.float64).T
    got = d.get()
    err = float(np.abs(got - want).max() / np.abs(want).max()) if np.all(np.isfinite(got)) else float("inf")
    return err < 1e-5, f"wgmma m64n64k16 x4 (128B-swizzled K-major smem operands): max rel err {err:.2e}"


CHECKS = {
    "convert": check_convert,
    "mma": check_mma,
    "grid_barrier": check_grid_barrier,
    "ticket": check_ticket,
    "float_key": check_float_key,
    "wgmma": check_wgmma,
}


def run_selftest(verbose: bool = False) -> int:
    failed = 0
    for name, fn in CHECKS.items():
        try:
            ok, detail = fn()
        except Exception as exc:  # report and continue: the self-test lists every failure
            ok, detail = False, f"{exc.__class__.__name__}: {exc}"
        failed += not ok
        print(f"[{'ok' if ok else 'FAIL'}] {name}: {detail}")
    for name, modname in (("ssd_combined", "cake_rt.ops.ssd"), ("dsa_indexer_det_topk", "cake_rt.ops.dsa")):
        try:
            import importlib

            mod = importlib.import_module(modname)
            fn = getattr(mod, "selftest", None)
        except Exception as exc:
            print(f"[FAIL] {name}: import failed: {exc}")
            failed += 1
            continue
        if fn is None:
            print(f"[skip] {name}: no selftest in {modname}")
            continue
        try:
            ok, detail = fn()
        except Exception as exc:
            ok, detail = False, f"{exc.__class__.__name__}: {exc}"
        failed += not ok
        print(f"[{'ok' if ok else 'FAIL'}] {name}: {detail}")
    print("selftest: " + ("all checks passed" if not failed else f"{failed} check(s) failed"))
    return 1 if failed else 0
