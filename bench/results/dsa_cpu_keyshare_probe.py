#!/usr/bin/env python3
"""Does an A row's time depend on how many CTAs read the same keys at once? (issue #12, A3; docs/dsa.md round 58)

A3 (4 queries of one segment, 41,986 keys each, the same keys) runs 132 one-query parts of 10 tiles: four CTAs read
every key tile, and all 132 count into their queries' split histograms at once. The arms below keep a part's shape
(one query, 10 tiles; its finish and the merge per query are the same code) and change how many parts run beside it
and whether they share keys:

    a3         the suite row: T = 4, default plan (33 parts x 4 queries, 132 CTAs)
    t1_ks1280  the last query alone, key_split 1280 (33 parts of 10 tiles: 33 CTAs busy, no key shared)
    t2_ks1280  the last two queries, key_split 1280 (66 CTAs, each key tile read twice)
    dist4      four one-query segments of 41,986 distinct keys each (132 CTAs, no key shared; 4x the DRAM bytes)
    t1_def     the last query alone, default plan (parts of 3 tiles on 110 CTAs)
    a3_ks2560  T = 4, key_split 2560 (17 parts of 20 tiles a query: 68 CTAs)

Prepared runners, cold L2 (the bench's Timer), arms alternated in rounds; prints the median (p20-p80) GPU us.
Also checks that t1's and t2's rows equal a3's last rows bit for bit (the same query, the same keys).

    python3 bench/results/dsa_cpu_keyshare_probe.py [--heads 32,64] [--repeats 24] [--only ARM]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", default="32,64")
    ap.add_argument("--repeats", type=int, default=24)
    ap.add_argument("--only", default="", help="ARM: run that arm's call 3 times, time nothing (for ncu)")
    a = ap.parse_args()
    import cupy
    import numpy as np

    import cake_rt
    from cake_rt.bench.arrays import random_normal
    from cake_rt.bench.timing import Timer

    D, topk, L, T = 128, 2048, 41986, 4
    stream = cupy.cuda.Stream(non_blocking=True)
    l2 = cupy.cuda.Device().attributes["L2CacheSize"]
    print(f"GPU: {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    ok = True
    for H in (int(h) for h in a.heads.split(",")):
        seed = 1234 + 17 * H  # the suite's A3 inputs (cake_rt.bench.cases._dsa_setup)
        q = random_normal((T, H, D), "bfloat16", seed=seed + 1)
        k = random_normal((L, D), "bfloat16", seed=seed + 2)
        w = random_normal((T, H), "float32", seed=seed + 3, scale=H ** -0.5)
        k4 = random_normal((4 * L, D), "bfloat16", seed=seed + 4)
        seg = {"cu_seqlens_q": np.arange(5, dtype=np.int32), "cu_seqlens_k": (np.arange(5) * L).astype(np.int32)}
        arms = {
            "a3": (q, k, w, {}, None),
            "t1_ks1280": (q[3:], k, w[3:], {}, 1280),
            "t2_ks1280": (q[2:], k, w[2:], {}, 1280),
            "dist4": (q, k4, w, seg, None),
            "t1_def": (q[3:], k, w[3:], {}, None),
            "a3_ks2560": (q, k, w, {}, 2560),
        }
        if a.only:
            arms = {a.only: arms[a.only]}
        runners, outs = {}, {}
        for name, (qq, kk, ww, meta, ks) in arms.items():
            n = qq.shape[0]
            ind = cupy.full((n, topk), -7, dtype=cupy.int32)
            sc = cupy.full((n, topk), np.nan, dtype=cupy.float32)
            run = cake_rt.prepare_dsa_indexer_det_topk(qq, kk, ww, topk, **meta, indices=ind, scores=sc,
                                                       stream=stream, key_split=ks)
            run(stream=stream)
            runners[name], outs[name] = run, (ind, sc)
        stream.synchronize()
        if a.only:
            for _ in range(2):
                runners[a.only](stream=stream)
            stream.synchronize()
            continue
        ref_i, ref_s = (cupy.asnumpy(x) for x in outs["a3"])
        for name, rows in (("t1_ks1280", slice(3, 4)), ("t2_ks1280", slice(2, 4)), ("t1_def", slice(3, 4)),
                           ("a3_ks2560", slice(0, 4))):
            i, s = (cupy.asnumpy(x) for x in outs[name])
            same = np.array_equal(i, ref_i[rows]) and np.array_equal(s.view(np.uint32), ref_s[rows].view(np.uint32))
            ok &= same
            print(f"H={H} {name}: rows equal a3's: {same}")
        with stream:
            timer = Timer(stream, repeats=a.repeats, l2_bytes=l2, min_repeats=a.repeats, budget_s=60.0)
            times = timer.time_arms([(n, lambda r=r: r(stream=stream)) for n, r in runners.items()], wall=False)
        for name in arms:
            t = times[name]
            units = getattr(getattr(runners[name], "plan", None), "units", None)
            nu = len(units) if units is not None else "?"
            print(f"H={H} {name:>10}: {t['median'] * 1e3:7.2f} us ({t['p20'] * 1e3:.2f}-{t['p80'] * 1e3:.2f})  "
                  f"units {nu}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
