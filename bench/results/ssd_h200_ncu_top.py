"""Summarize ncu's SASS source page (--page source --csv --print-source sass) of the sm_90a SSD walk kernel: warp
stall samples by reason for the math warpgroup's code (after USETMAXREG.TRY_ALLOC), the producer's (after
USETMAXREG.DEALLOC) and the out-of-line tail (the mbarrier retry loops both use), then the top instructions.

    python3 bench/results/ssd_h200_ncu_top.py SASS.csv [--top 40]
"""
import argparse
import csv
import collections

ap = argparse.ArgumentParser()
ap.add_argument("csv")
ap.add_argument("--top", type=int, default=40)
a = ap.parse_args()
rows = list(csv.reader(open(a.csv)))
hdr, data = rows[1], rows[2:]
col = {n: i for i, n in enumerate(hdr)}
reasons = [n for n in hdr if n.startswith("stall_") and "(Not Issued)" not in n]
region, regions = "prologue", []
last_exit = max(k for k, r in enumerate(data) if r[col["Source"]].strip().endswith("EXIT"))
for k, r in enumerate(data):
    s = r[col["Source"]]
    if "USETMAXREG.TRY_ALLOC" in s:
        region = "math"
    elif "USETMAXREG.DEALLOC" in s:
        region = "producer"
    elif k > last_exit:
        region = "tail (wait loops)"
    regions.append(region)
num = lambda v: int(v.replace(",", "")) if v not in ("", "-") else 0  # noqa: E731
total = sum(num(r[col["Warp Stall Sampling (All Samples)"]]) for r in data)
print(f"total samples {total}")
for reg in ("prologue", "math", "producer", "tail (wait loops)"):
    sel = [r for r, g in zip(data, regions) if g == reg]
    n = sum(num(r[col["Warp Stall Sampling (All Samples)"]]) for r in sel)
    by = collections.Counter({x: sum(num(r[col[x]]) for r in sel) for x in reasons})
    print(f"\n{reg}: {len(sel)} instructions, {n} samples ({100 * n / max(total, 1):.1f}%)")
    for x, v in by.most_common(8):
        if v:
            print(f"  {x:24s} {v:8d} {100 * v / max(n, 1):5.1f}%")
print(f"\ntop {a.top} instructions by samples (region, address, samples, executed, instruction, top reasons):")
order = sorted(range(len(data)), key=lambda k: -num(data[k][col["Warp Stall Sampling (All Samples)"]]))
for k in order[:a.top]:
    r = data[k]
    top = sorted(((num(r[col[x]]), x) for x in reasons), reverse=True)[:2]
    print(f"{regions[k][:8]:8s} {r[col['Address']][-6:]} {num(r[col['Warp Stall Sampling (All Samples)']]):6d} "
          f"{num(r[col['Instructions Executed']]):9d}  {r[col['Source']].strip()[:60]:60s} "
          + " ".join(f"{x}={v}" for v, x in top if v))
