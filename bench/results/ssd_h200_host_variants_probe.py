"""Host time of the SSD eager call behind a delay kernel (the bench's host column, Timer.host_steady), by variant:
coop (as shipped), plain (the same launch through cuLaunchKernel: timing only, the grid is co-resident anyway),
nolaunch (no launch at all), nostates (no returned final states). Alternating rounds, medians of each batch set."""
import os, sys, statistics
sys.path.insert(0, os.path.join(os.environ["MAIN"], "scripts"))
import cupy
import cake_rt
from cupy_backends.cuda.api import driver
from cake_rt.bench import cases
from cake_rt.bench.timing import Timer, host_probe_us
from ssd_trace import suite_params

st = cupy.cuda.Stream(non_blocking=True)
real_coop, real_plain = driver.launchCooperativeKernel, driver.launchKernel
def plain(f, gx, gy, gz, bx, by, bz, sm, h, args):
    real_plain(f, gx, gy, gz, bx, by, bz, sm, h, args, 0)
for row in os.environ.get("ROWS", "seed,short,nemotron-h,m2-2.7b-b8").split(","):
    p = suite_params(row)
    inp = cases.ssd_inputs(p, 1234)
    y = cupy.empty_like(inp["x"])
    cu = None if inp.get("cu_seqlens") is None else cupy.asnumpy(inp["cu_seqlens"])
    def mk(states):
        return lambda: cake_rt.ssd_combined(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], int(p["chunk"]), D=inp["D"],
                                            z=inp["z"], dt_bias=inp["dt_bias"], cu_seqlens=cu, dt_softplus=True,
                                            return_final_states=states, out=y, stream=st)
    f, f0 = mk(True), mk(False)
    for _ in range(3):
        f(); f0()
    st.synchronize()
    plan = cake_rt.ssd_plan(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], int(p["chunk"]), D=inp["D"], z=inp["z"],
                            dt_bias=inp["dt_bias"], cu_seqlens=cu, dt_softplus=True, return_final_states=True)
    timer = Timer(st, budget_s=0.5)
    res = {k: [] for k in ("coop", "plain", "nolaunch", "nostates")}
    for rnd in range(4):
        for name in res:
            fn = f0 if name == "nostates" else f
            if name == "plain":
                driver.launchCooperativeKernel = plain
            elif name == "nolaunch":
                driver.launchCooperativeKernel = lambda *a: None
                driver.launchKernel = lambda *a: None
            try:
                h = timer.host_steady(fn, host_ms=0.05, gpu_ms=0.05 if name == "nolaunch" else 0.2)
            finally:
                driver.launchCooperativeKernel, driver.launchKernel = real_coop, real_plain
            res[name].append((h["median"] * 1000.0, h["probe_us"]))
    st.synchronize()
    print(f"{row:11s} ({plan.family}): " + "; ".join(
        f"{k} {statistics.median(v[0] for v in vs):.1f} us (rounds {', '.join(f'{a:.1f}' for a, _ in vs)}; probe {statistics.median(v[1] for v in vs):.1f})"
        for k, vs in res.items()), flush=True)
