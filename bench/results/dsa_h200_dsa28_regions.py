"""Warp-stall samples of dsa_scan per role and source region (round 22's table, from the source counters):
    python regions.py FULL.cu LI.sass NCU.csv
Each SASS address's line chain (innermost first, nvdisasm -g) names its role (the line of the role's branch in
dsa_scan: product `if (tid < NT) {`, selection the `} else {` after it) and its region (the first rule whose text is
in a line of the chain). Barrier samples on the selection's first instruction after its FULL wait (the compaction's
call line, innermost) are the FULL wait's. Per region: samples, share of the role, the top stall reasons."""
import collections
import csv
import re
import sys

src_path, sass_path, csv_path = sys.argv[1:4]
src = open(src_path).read().split("\n")
prod_lo = next(i for i, l in enumerate(src, 1) if l.strip() == "if (tid < NT) {")
sel_lo = next(i for i, l in enumerate(src, 1) if l.strip() == "} else {" and i > prod_lo)
sel_hi = next(i for i, l in enumerate(src, 1) if l.strip() == "#else" and i > sel_lo)
chains, pend = {}, []
for l in open(sass_path):
    m = re.match(r'\s*//## File ".*", line (\d+)(?: inlined at ".*", line (\d+))?', l)
    if m:
        pend.append(int(m.group(1)))
        if m.group(2):
            pend.append(int(m.group(2)))
        continue
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*)", l)
    if m:
        off = int(m.group(1), 16)
        chains[off] = pend if pend else chains.get(off - 16, [])
        pend = []
PRODUCT = [  # (region, any of these in a line of the chain), first match wins
    ("head sum (+ weight loads)", ("head_sum",)),
    ("wgmma wait", ("wgmma_wait",)),
    ("wgmma issue (descriptors, HGMMA)", ("wgmma_m64n", "wgmma_desc", "wgmma_fence()", "wgmma_commit")),
    ("EMPTY wait (selection holds the ring)", ("mbarrier_wait_parity(empty",)),
    ("key rows FULL wait", ("mbarrier_wait_parity(full",)),
    ("TURN wait", ("named_sync(BAR_TURN",)),
    ("key-row copy (one thread)", ("copy_key_rows", "tma_load", "load_key_rows", "cp_async_commit")),
    ("FULL arrive", ("BAR_FULL",)),
    ("unit barrier (next_unit)", ("next_unit",)),
    ("unit start (q, weights)", ("load_q", "wsm[i]", "BAR_MMA", "cp_async_wait", "fence_proxy", "BAR_TURN + 0")),
]
SELECT = [
    ("waiting at FULL for the product", ("named_sync(BAR_FULL",)),
    ("compactions (compact_full)", ("compact_full",)),
    ("appends", ("append_tile", "append_rows")),
    ("EMPTY release", ("mbarrier_arrive(empty",)),
    ("final selection / split finish / merge", ("finish_and_merge", "finish_unit", "finish_split_unit")),
    ("unit barrier (next_unit)", ("next_unit",)),
]
rows = list(csv.reader(open(csv_path)))
hi = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
hdr = rows[hi]
ci = {h: i for i, h in enumerate(hdr)}
data = [r for r in rows[hi + 1:] if len(r) == len(hdr)]
base = int(data[0][0], 16)
reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
tot = collections.Counter()
agg = collections.defaultdict(collections.Counter)  # (role, region) -> reason -> samples
for r in data:
    off = int(r[0], 16) - base
    s = int(r[ci["Warp Stall Sampling (All Samples)"]] or 0)
    if not s:
        continue
    ch = chains.get(off, [])
    tops = [x for x in ch if prod_lo <= x < sel_hi]
    role = "other" if not tops else ("product" if prod_lo <= tops[-1] < sel_lo else "select")
    texts = [src[x - 1].strip() for x in ch]
    rules = PRODUCT if role == "product" else SELECT if role == "select" else []
    region = next((name for name, keys in rules if any(k in t for t in texts for k in keys)), "other (loop control, predicates)")
    rs = {h[6:]: int(r[ci[h]] or 0) for h in reasons}
    if role == "select" and texts and "compact_full(" in texts[0] and rs.get("barrier", 0):
        b = rs.pop("barrier")
        agg[(role, "waiting at FULL for the product")]["barrier"] += b
        tot[role] += b
        s -= b
        rs = {k: v * s / max(1, sum(rs.values())) for k, v in rs.items()}
    for k, v in rs.items():
        agg[(role, region)][k] += v
    tot[role] += s
print("samples per role:", dict(tot))
for role in ("product", "select"):
    print(f"--- {role}: {tot[role]}")
    regs = sorted(((sum(c.values()), reg) for (ro, reg), c in agg.items() if ro == role), reverse=True)
    for v, reg in regs:
        c = agg[(role, reg)]
        why = ", ".join(f"{k} {100.0 * n / max(1, v):.0f}%" for k, n in c.most_common(3))
        print(f"  {100.0 * v / max(1, tot[role]):5.1f}%  {int(v):8d}  {reg:42s} [{why}]")
