import sys, numpy as np
sys.path.insert(0, "scripts")
from ssd_trace import dsa_traced_runs
rows = sys.argv[1].split(","); heads = [int(h) for h in sys.argv[2].split(",")]
for name, H, runner, recs, gpu_us in dsa_traced_runs(rows, heads, 2, "dsa_pass_count", (16,)):
    r = recs[-1]
    calls = r[:6]; act = r[8:14]
    print(f"{name} H={H}: units {runner.plan.nunits}, GPU {gpu_us:.1f} us; final selections entering pass p (p = 0..5): "
          f"{list(map(int, calls))}; active queries entering pass p: {list(map(int, act))}; "
          f"passes per final selection {calls.sum() / max(calls[0], 1):.2f}, per active query {act.sum() / max(act[0], 1):.2f}",
          flush=True)
