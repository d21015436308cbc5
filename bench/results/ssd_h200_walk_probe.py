"""Times the exact scan on suite rows (family forced by CAKE_RT_SSD_CHUNK_PARALLEL=never), cold L2, median of N calls:
run from a tree (PYTHONPATH) whose ssd_exact may be the walker ablation (no output tiles)."""
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["MAIN"], "scripts"))
import cupy
from ssd_trace import suite_call
from cake_rt.bench.timing import L2Flusher
from cake_rt.launch.arch import device_info
from cake_rt.ops import ssd as ops

rows = sys.argv[1].split(";")
n = int(sys.argv[2]) if len(sys.argv) > 2 else 12
st = cupy.cuda.Stream(non_blocking=True)
flush = L2Flusher(device_info(0).l2_bytes)
out = {}
for row in rows:
    name, _, over = row.partition(":")
    import ssd_trace
    base = ssd_trace.suite_params
    extra = {k: int(v) for k, v in (kv.split("=") for kv in over.split(",") if kv)}
    ssd_trace.suite_params = lambda r, base=base, extra=extra: {**base(r), **extra}
    p, call = suite_call(name, st)
    ssd_trace.suite_params = base
    call(); st.synchronize()
    plan = ops.last_plan()
    ts = []
    for i in range(n):
        flush(st)
        e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
        e0.record(st); call(); e1.record(st); e1.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(e0, e1) * 1000.0)
    ts.sort()
    out[row] = {"family": plan.family, "median_us": ts[len(ts) // 2], "min_us": ts[0], "max_us": ts[-1]}
    print(f"{os.environ.get('ARM', '?'):5s} {row:12s} {plan.family:8s} median {ts[len(ts)//2]:9.1f} us  (min {ts[0]:.1f}, max {ts[-1]:.1f})", flush=True)
print(json.dumps(out))
