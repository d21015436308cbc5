"""Small DSA case for compute-sanitizer (memcheck / racecheck / synccheck) on the device machine.

    compute-sanitizer --tool racecheck python3 tests/dsa/sanitize_case.py
Runs dsa_scan on tiny inputs: ticket and static schedules, compactions, split blocks merged by the last
arriving part; H = 32 and H = 24 (blocks of 5 queries).
"""
import numpy as np


def main():
    import cupy

    from cake_rt.interop import BF16
    from cake_rt.ops import dsa

    rng = np.random.default_rng(5)
    ok = True
    for T, Tkv, H, D, topk in ((9, 700, 32, 128, 100), (11, 900, 24, 64, 300)):
        q = cupy.asarray(rng.standard_normal((T, H, D), dtype=np.float32).astype(BF16))
        k = cupy.asarray(rng.standard_normal((Tkv, D), dtype=np.float32).astype(BF16))
        w = cupy.asarray(rng.standard_normal((T, H), dtype=np.float32))
        outs = []
        for sched, ks in (("ticket", None), ("static", 10 ** 6), ("ticket", 128), ("static", 256)):
            i, s = dsa.dsa_indexer_det_topk(q, k, w, topk, schedule=sched, key_split=ks)
            outs.append((i.get(), s.get()))
        cupy.cuda.Device().synchronize()
        ok = ok and all(np.array_equal(outs[0][0], o[0]) and
                        np.array_equal(outs[0][1].view(np.uint32), o[1].view(np.uint32)) for o in outs)
    print("sanitize case done; bitwise equal across schedule/split:", ok)


if __name__ == "__main__":
    main()
