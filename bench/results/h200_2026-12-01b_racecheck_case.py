import sys, numpy as np, cupy
from cake_rt.interop import BF16
from cake_rt.ops import dsa as op
T, Tkv, H, D, topk = map(int, sys.argv[1:6])
scheds = [(s.split(":")[0], None if s.split(":")[1] == "none" else int(s.split(":")[1])) for s in sys.argv[6:]]
rng = np.random.default_rng(5)
q = cupy.asarray(rng.standard_normal((T, H, D), dtype=np.float32).astype(BF16))
k = cupy.asarray(rng.standard_normal((Tkv, D), dtype=np.float32).astype(BF16))
w = cupy.asarray(rng.standard_normal((T, H), dtype=np.float32))
outs = []
for sched, split in scheds:
    i, s = op.dsa_indexer_det_topk(q, k, w, topk, schedule=sched, key_split=split)
    outs.append((i.get(), s.get().view(np.uint32)))
print(sys.argv[1:], "equal:", all(np.array_equal(outs[0][0], o[0]) and np.array_equal(outs[0][1], o[1]) for o in outs))
