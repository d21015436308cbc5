"""Round 66 (docs/dsa.md): the analysis of scripts/dsa-tail-trace --dump records (h100_2026-12-07c_main_tail_dump.tgz,
unpacked into a folder; arm dumps the same way). CPU:
    python3 bench/results/h100_2026-12-07c_tail_analysis.py DIR [ARM_DIR]
Prints, per row: each run's part-finish median and how many finishes took over 5 us (the first run against the
others); the phases of the first run against runs 2..; where the parts that arrive last (the merging CTAs) lose their
time (product end, tile loop end); whether the product's time follows the key range (unit) or the SM across runs.
With ARM_DIR, the steady-state phases of main's and the arm's records side by side."""
import glob
import importlib.machinery
import importlib.util
import os
import sys

import numpy as np

ld = importlib.machinery.SourceFileLoader("t", os.path.join(os.path.dirname(__file__), "..", "..", "scripts",
                                                              "dsa-tail-trace"))
t = importlib.util.module_from_spec(importlib.util.spec_from_loader("t", ld))
ld.exec_module(t)


def rate_of(r):
    return np.median((r[:, t.CK + t.S_FIN_END] - r[:, t.CK + t.T_START]) / (r[:, t.S_FIN_END] - r[:, t.T_START]))


def per_run(R):
    for k, run in enumerate(R):
        r = run[run[:, t.T_START] > 0]
        rate, t0 = rate_of(r), r[:, t.T_START].min()
        fin = (r[:, t.CK + t.S_PART_END] - r[:, t.CK + t.S_LOOP_END]) / rate
        mg = r[:, t.V_MERGE] == 1
        print("  run %d: span %.1f us, part's finish median %.0f ns (p90 %.0f), over 5 us: %d of %d, merging CTAs "
              "arrive at %.1f us" % (k, (r[:, t.S_FIN_END].max() - t0) / 1e3, np.median(fin), np.percentile(fin, 90),
                                     (fin > 5000).sum(), len(fin), np.median(r[mg, t.S_ARRIVED] - t0) / 1e3))


def first_vs_later(R):
    a0, a1 = t.analyse(list(R[:1])), t.analyse(list(R[1:]))
    for k in a1:
        if k != "rate" and "smid" not in k and len(a1[k]):
            v0 = np.median(a0[k]) if len(a0.get(k, [])) else float("nan")
            print("  %-64s first run %8.0f   runs 2.. %8.0f" % (k, v0, np.median(a1[k])))


def last_arrivals(R):
    cols = []
    for run in R:
        r = run[run[:, t.T_START] > 0]
        rate, t0 = rate_of(r), r[:, t.T_START].min()
        ck = lambda k: (r[:, t.CK + k] - r[:, t.CK + t.T_START]) / rate + (r[:, t.T_START] - t0)  # noqa: E731
        cols.append(np.stack([ck(t.P_Q), ck(t.P_END), ck(t.S_LOOP_END), ck(t.S_ARRIVED), r[:, t.V_MERGE]], 1))
    pq, pe, le, ar, mg = np.concatenate(cols).T
    for name, sel in (("all parts", mg > 0), ("merging (last)", mg == 1)):
        print("  %-15s us from the call's start: q in %.2f, product end %.2f, tile loop end %.2f, arrival %.2f"
              % (name, *(np.median(v[sel]) / 1e3 for v in (pq, pe, le, ar))))


def unit_or_sm(R):
    by_sm, by_unit = {}, {}
    for run in R:
        r = run[run[:, t.T_START] > 0]
        d = (r[:, t.CK + t.P_END] - r[:, t.CK + t.P_Q]) / rate_of(r)
        for s, u, v in zip(r[:, t.V_SMID] - 1, r[:, t.V_UNIT], d):
            by_sm.setdefault(int(s), []).append(v)
            by_unit.setdefault(int(u), []).append(v)

    def corr(d):
        m = np.array([v for v in d.values() if len(v) == len(R)])
        return np.mean([np.corrcoef(m[:, i], m[:, j])[0, 1] for i in range(m.shape[1]) for j in range(i + 1, m.shape[1])])
    u = np.array([np.mean(by_unit[k]) for k in sorted(by_unit)])
    print("  the product's time (q in to its last tile), run-to-run correlation by unit (its key range) %.2f, by SM "
          "%.2f; by unit %.1f-%.1f us (p10-p90)" % (corr(by_unit), corr(by_sm), *np.percentile(u, [10, 90]) / 1e3))
    nparts = len(u) // 4
    if nparts:
        print("  query 0's units against query 1's (the same key ranges), us:")
        print("    " + " ".join("%.1f" % (x / 1e3) for x in u[:nparts]))
        print("    " + " ".join("%.1f" % (x / 1e3) for x in u[nparts:2 * nparts]))


def main():
    d = sys.argv[1]
    arm = sys.argv[2] if len(sys.argv) > 2 else None
    for f in sorted(glob.glob(os.path.join(d, "*.npz"))):
        R = np.load(f)["recs"]
        print("==", os.path.basename(f))
        per_run(R)
        first_vs_later(R)
        last_arrivals(R[1:])
        unit_or_sm(R[1:])
        if arm and os.path.exists(os.path.join(arm, os.path.basename(f))):
            A = np.load(os.path.join(arm, os.path.basename(f)))["recs"]
            a, b = t.analyse(list(R[1:])), t.analyse(list(A[1:]))
            print("  runs 2.., main against the arm:")
            for k in a:
                if k != "rate" and "smid" not in k and k in b and len(a[k]) and len(b[k]):
                    print("    %-62s main %8.0f   arm %8.0f" % (k, np.median(a[k]), np.median(b[k])))


if __name__ == "__main__":
    main()
