"""Bound the cold-code cost of DSA rows: the bench's sample (L2 flushed) against the same sample with the program's
code put back in L2 by a call of the same program on other arrays between the flush and the timed call (code warm,
data cold), and with the same call run once before (code and data warm). Alternated in one process."""
import sys, os, types, statistics
sys.path.insert(0, os.getcwd())
import cupy
import cake_rt
from cake_rt.bench import cases
from cake_rt.bench.suites import load_suite
from cake_rt.bench.timing import Timer, L2Flusher

suite = load_suite("dsa")
rows = sys.argv[1:] or ["A3:32", "A3:64", "A2:32", "A2:64", "A1:32", "A1:64"]
stream = cupy.cuda.Stream(non_blocking=True)
flusher = L2Flusher(cupy.cuda.Device().attributes["L2CacheSize"])
for spec in rows:
    name, H = spec.split(":")
    row = next(r for r in suite["rows"] if r["name"] == name)
    item = types.SimpleNamespace(heads=int(H), defaults=suite["defaults"], params=row)
    H, D, topk, layout, q, k, w, meta = cases._dsa_setup(item, {})
    ind, sc = cases._dsa_outputs(layout.T, topk)
    run = cake_rt.prepare_dsa_indexer_det_topk(q, k, w, topk, **meta, indices=ind, scores=sc, stream=stream)
    q2, k2, w2 = q.copy(), k.copy(), w.copy()
    ind2, sc2 = cases._dsa_outputs(layout.T, topk)
    run2 = cake_rt.prepare_dsa_indexer_det_topk(q2, k2, w2, topk, **meta, indices=ind2, scores=sc2, stream=stream)
    modes = {
        "cold": lambda s: flusher(s),
        "code warm": lambda s: (flusher(s), run2(stream=s)),
        "all warm": lambda s: (flusher(s), run(stream=s)),
    }
    timer = Timer(stream, repeats=1, l2_bytes=1)
    got = {m: [] for m in modes}
    with stream:
        for m, f in modes.items():
            timer.flush = f
            for _ in range(3):
                timer.sample(lambda: run(stream=stream), delay_ms=0.2)
        for r in range(24):
            for m, f in (list(modes.items()) if r % 2 == 0 else list(modes.items())[::-1]):
                timer.flush = f
                got[m].append(timer.sample(lambda: run(stream=stream), delay_ms=0.2)[0] * 1e3)
    stream.synchronize()
    print(f"{name} H={H}: " + "  ".join(f"{m} {statistics.median(v):.2f} us (min {min(v):.2f})" for m, v in got.items()),
          flush=True)
