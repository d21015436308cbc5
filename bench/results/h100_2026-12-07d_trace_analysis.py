"""Round 67 (docs/dsa.md): the A rows' per-tile records (scripts/dsa-product-trace --first-units --ctas 132 --dump),
runs 2.. of each file: per tile, when the product had a tile ready (the later warpgroup's FULL arrival), how long after
it the selection's step ended (~180 cycles: the selection waited for the product; more: the product waited), the key
rows' waits; and each CTA's selection loop end in ns from the earliest tile-0 top (the clock converted through the
%globaltimer stamp beside wg0's FULL).

    python3 bench/results/h100_2026-12-07d_trace_analysis.py DIR/pt/A3_H32.npz ...
"""
import sys

import numpy as np

PW = 8
P_TOP, P_ROWS, P_COMMIT, P_LANDED, P_EMPTY_B, P_EMPTY_E, P_SUM, P_FULL = range(PW)
S_FULL_B, S_FULL_E, S_COMPACT_E, S_APPEND_E, S_EMPTY = range(20, 25)
V_NTILES, V_GT = 26, 28


def per_tile(path):
    d = np.load(path)
    r = d["recs"][1:].astype(np.int64)
    nt = r.shape[2]
    ok = (r[:, :, :, S_EMPTY] > 0).all(axis=2) & (r[:, :, 0, V_NTILES] == nt)
    r = r[ok]
    base = r[:, 0, P_TOP][:, None]
    ready = np.maximum(r[:, :, P_FULL], r[:, :, PW + P_FULL])
    med = lambda a: np.median(a, axis=0).astype(int).tolist()
    print(path, "bench GPU time of the traced call", round(float(d["gpu_us"]), 2), "us;", len(r), "CTA runs of", nt, "tiles")
    print("  product ready (cycles from tile 0's top)   ", med(ready - base))
    print("  selection step end - product ready          ", med(r[:, :, S_COMPACT_E] - ready))
    print("  selection append end (cycles from tile 0)   ", med(r[:, :, S_APPEND_E] - base))
    print("  wg0 / wg1 key rows wait                     ", med(r[:, :, P_ROWS] - r[:, :, P_TOP]), "/",
          med(r[:, :, PW + P_ROWS] - r[:, :, PW + P_TOP]))


def key_wait_period(path):
    r = np.load(path)["recs"][1:].astype(np.int64)
    nt = r[0, :, 0, V_NTILES]
    w = (r[:, :, :, P_ROWS] - r[:, :, :, P_TOP]).astype(float).mean(axis=0)[nt == nt.max()][:, 1:].sum(axis=1)
    w -= w.mean()
    ac = [np.corrcoef(w[:-lag], w[lag:])[0, 1] for lag in range(1, 8)]
    print("  a CTA's summed key waits, autocorrelation over CTAs at lags 1-7", np.round(ac, 2).tolist())


def loop_ends(path):
    R = np.load(path)["recs"].astype(np.int64)
    out = []
    for run in range(1, R.shape[0]):
        r = R[run]
        nt = r[:, 0, V_NTILES]
        ends, starts = [], []
        for c in range(r.shape[0]):
            n = nt[c]
            if n < 2:
                continue
            rate = (r[c, n - 1, P_FULL] - r[c, 0, P_FULL]) / (r[c, n - 1, V_GT] - r[c, 0, V_GT])
            ends.append(r[c, n - 1, V_GT] + (r[c, n - 1, S_EMPTY] - r[c, n - 1, P_FULL]) / rate)
            starts.append(r[c, 0, V_GT] + (r[c, 0, P_TOP] - r[c, 0, P_FULL]) / rate)
        e = np.array(ends) - min(starts)
        out.append((np.median(e), np.percentile(e, 90), e.max()))
    o = np.array(out)
    print("  selection loop end, ns from the first tile-0 top: median / p90 / max (mean of runs)",
          np.round(o.mean(axis=0)).astype(int).tolist(), "; max by run", np.round(o[:, 2]).astype(int).tolist())


for p in sys.argv[1:]:
    per_tile(p)
    key_wait_period(p)
    loop_ends(p)
