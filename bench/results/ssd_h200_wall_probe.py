"""Variants (argv[1]): base, torch, triton, both, peers (both real SSD peers loaded, called once and timed as
arms), peersonly (loaded and called once, not timed), hostidle (an arm of 1.2 ms of host work and no GPU work).
Eager wall time from an idle stream (the bench's Timer.sample(idle=True)) minus GPU time, in a process with or
without torch / Triton loaded: is the SSD records' ~95 us of extra wall the call's or the process's?"""
import ctypes, os, statistics, sys
sys.path.insert(0, os.path.join(os.environ.get("MAIN", "."), "scripts"))
import cupy
variant = sys.argv[1]
st = cupy.cuda.Stream(non_blocking=True)
if variant in ("torch", "both"):
    import torch
    t = torch.zeros(1024, device="cuda")
    with torch.cuda.stream(torch.cuda.ExternalStream(st.ptr)):
        t += 1
    torch.cuda.synchronize()
if variant in ("triton", "both"):
    import torch, triton, triton.language as tl

    @triton.jit
    def _inc(p, n, B: tl.constexpr):
        i = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(p + i, tl.load(p + i, mask=i < n) + 1, mask=i < n)
    tt = torch.zeros(4096, device="cuda")
    with torch.cuda.stream(torch.cuda.ExternalStream(st.ptr)):
        _inc[(4,)](tt, 4096, B=1024)
    torch.cuda.synchronize()
import cake_rt
from cake_rt.bench.timing import Timer
from ssd_trace import suite_call

l2 = cupy.cuda.runtime.getDeviceProperties(0)["l2CacheSize"]
timer = Timer(st, repeats=20, warmup=3, l2_bytes=l2, budget_s=1.0, min_repeats=20)
a = cupy.zeros(1 << 20, cupy.float32)


def tiny():
    with st:
        a.__iadd__(1)


rows = os.environ.get("ROWS", "seed,short").split(",")
arms = [("tiny", tiny)] + [(r, suite_call(r, st)[1]) for r in rows]
if variant.startswith("peers"):
    import threading
    from cake_rt.bench import cases
    from cake_rt.bench.peers import ssd_peer_call
    from ssd_trace import suite_params
    p = suite_params("short")
    inp = cases.ssd_inputs(p, 1234)
    for peer in ("mamba_ssm-triton", "vllm-triton"):
        f = ssd_peer_call(peer, inp, p, st)
        f()
        st.synchronize()
        if variant == "peers":
            arms.append((peer, f))
    print("threads:", [t.name for t in threading.enumerate()], "tasks:", len(os.listdir("/proc/self/task")),
          "switch interval", sys.getswitchinterval(), flush=True)
if variant == "hostidle":  # an arm that keeps the GPU idle for a peer's ~1.2 ms of host work, and launches nothing
    import time

    def host_idle():
        t = time.perf_counter() + 1.2e-3
        while time.perf_counter() < t:
            pass
    arms.append(("host idle 1.2 ms", host_idle))
flags = ctypes.c_uint(0)
ctypes.CDLL("libcuda.so.1").cuCtxGetFlags(ctypes.byref(flags))  # after the peers: did anything change them?
res = timer.time_arms(arms, wall=True)
out = []
for n, _ in arms:
    r = res[n]
    out.append(f"{n} gpu {r['median']*1e3:.1f} wall {r['wall']['median']*1e3:.1f} gap {(r['wall']['median']-r['median'])*1e3:.1f} "
               f"host {r['host']['median']*1e3:.1f}")
print(f"{variant:7s} ctx flags {flags.value:#x}: " + "; ".join(out), flush=True)
