"""Warp-stall samples per source line (innermost and the chain), per role: python lines.py FULL.cu LI.sass NCU.csv [N]"""
import csv, re, sys, collections
src_path, sass_path, csv_path = sys.argv[1:4]
N = int(sys.argv[4]) if len(sys.argv) > 4 else 40
src = open(src_path).read().split("\n")
prod_lo = next(i for i, l in enumerate(src, 1) if l.strip() == "if (tid < NT) {")
sel_lo = next(i for i, l in enumerate(src, 1) if l.strip() == "} else {" and i > prod_lo)
sel_hi = next(i for i, l in enumerate(src, 1) if l.strip() == "#else" and i > sel_lo)
chains, pend = {}, []
for l in open(sass_path):
    m = re.match(r'\s*//## File ".*", line (\d+)(?: inlined at ".*", line (\d+))?', l)
    if m:
        pend.append((int(m.group(1)), int(m.group(2)) if m.group(2) else None)); continue
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*)", l)
    if m:
        off = int(m.group(1), 16)
        chains[off] = pend if pend else chains.get(off - 16, [])
        pend = []
rows = list(csv.reader(open(csv_path)))
hi = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
hdr = rows[hi]; ci = {h: i for i, h in enumerate(hdr)}
data = [r for r in rows[hi + 1:] if len(r) == len(hdr)]
base = int(data[0][0], 16)
agg = collections.Counter(); tot = collections.Counter(); sass = collections.defaultdict(collections.Counter)
for r in data:
    off = int(r[0], 16) - base
    s = int(r[ci["Warp Stall Sampling (All Samples)"]] or 0)
    ch = chains.get(off, [])
    lines = [a for a, b in ch] + [b for a, b in ch if b]
    inner = ch[0][0] if ch else 0
    chain_lines = []
    for a, b in ch:
        chain_lines.append(a)
        if b: chain_lines.append(b)
    top = max((x for x in chain_lines if prod_lo <= x < sel_hi), default=None)
    tops = [x for x in chain_lines if prod_lo <= x < sel_hi]
    role = "other" if not tops else ("product" if prod_lo <= tops[-1] < sel_lo else "select")
    key = (role, inner, tuple(chain_lines[1:4]))
    agg[key] += s; tot[role] += s
    sass[key][r[1].strip().split(" ")[0]] += s
print(dict(tot))
for role in ("product", "select", "other"):
    print(f"--- {role}: {tot[role]}")
    for v, k in sorted(((v, k) for k, v in agg.items() if k[0] == role), reverse=True)[:N]:
        if not v: break
        txt = src[k[1] - 1].strip()[:70] if k[1] else "?"
        via = " <- ".join(str(x) for x in k[2])
        top3 = ",".join(f"{a}:{b}" for a, b in sass[k].most_common(2))
        print(f"  {v:7d} {100.0*v/max(1,tot[role]):5.1f}%  L{k[1]} {txt}   [{via}] {{{top3}}}")
