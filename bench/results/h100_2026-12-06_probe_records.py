"""Which of the ticket buffer's words sets A3's placement effect: the ticket word (kept where each runner's buffer
lies) or the split records (moved into one separate zeroed buffer, runner i's at page offset REC[i])."""
import runpy, sys
import cupy
import cake_rt.ops.dsa as dsa

REC = [int(v, 0) for v in sys.argv[1].split(",")]
big = cupy.zeros(6 << 20, cupy.uint8)
base = (big.data.ptr + (2 << 20) - 1) // (2 << 20) * (2 << 20)
orig = dsa._launch_args
seen = {}

def patched(dp, qkw, indices, scores, workspace, tickets, schedule):
    a = orig(dp, qkw, indices, scores, workspace, tickets, schedule)
    if a is None or not a[4]:
        return a
    i = seen.setdefault(a[3], len(seen))
    rec = base + REC[i % len(REC)]
    print(f"runner {i}: ticket word +{a[3] % (2 << 20):#x}, records +{rec % (2 << 20):#x}", flush=True)
    return a[:4] + (rec,) + a[5:]

dsa._launch_args = patched
sys.argv = ["scripts/dsa-placement", "A3", "--heads", "32", "--runners", "6"]
runpy.run_path("scripts/dsa-placement", run_name="__main__")
