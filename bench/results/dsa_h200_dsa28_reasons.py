"""Stall reasons per source line for the top product / selection lines: python reasons.py FULL.cu LI.sass NCU.csv LINE..."""
import csv, re, sys, collections
src_path, sass_path, csv_path = sys.argv[1:4]
want = [int(x) for x in sys.argv[4:]]
src = open(src_path).read().split("\n")
chains, pend = {}, []
for l in open(sass_path):
    m = re.match(r'\s*//## File ".*", line (\d+)(?: inlined at ".*", line (\d+))?', l)
    if m:
        pend.append(int(m.group(1))); continue
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*)", l)
    if m:
        off = int(m.group(1), 16); chains[off] = pend if pend else chains.get(off - 16, []); pend = []
rows = list(csv.reader(open(csv_path)))
hi = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
hdr = rows[hi]; ci = {h: i for i, h in enumerate(hdr)}
data = [r for r in rows[hi + 1:] if len(r) == len(hdr)]
base = int(data[0][0], 16)
reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
acc = {w: collections.Counter() for w in want}
for r in data:
    off = int(r[0], 16) - base
    ch = chains.get(off, [])
    if ch and ch[0] in acc:
        for h in reasons:
            acc[ch[0]][h[6:]] += int(r[ci[h]] or 0)
for w in want:
    t = sum(acc[w].values())
    print(f"L{w} {src[w-1].strip()[:60]}: {t}: " + ", ".join(f"{k} {v}" for k, v in acc[w].most_common(5)))
