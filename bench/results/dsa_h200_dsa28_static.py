"""Static SASS instruction count of the product's tile loop for NCOL = PAIRS: python static.py FULL.cu LI.sass"""
import re, sys, collections
src = open(sys.argv[1]).read().split("\n")
call = next(i for i, l in enumerate(src, 1) if "product_loop<PAIRS>(un" in l)
loop = next(i for i, l in enumerate(src, 1) if "for (int it = 0; it < ntiles; ++it) {" in l and i > next(j for j, m in enumerate(src, 1) if "CAKE_DEVICE void product_loop" in m))
endl = next(i for i, l in enumerate(src, 1) if l.strip() == "++g;" and i > loop)
chains, pend, text = {}, [], {}
for l in open(sys.argv[2]):
    m = re.match(r'\s*//## File ".*", line (\d+)(?: inlined at ".*", line (\d+))?', l)
    if m:
        pend.append(int(m.group(1))); pend += [int(m.group(2))] if m.group(2) else []; continue
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*)", l)
    if m:
        off = int(m.group(1), 16); chains[off] = pend if pend else chains.get(off - 16, []); pend = []; text[off] = m.group(2)
cnt = collections.Counter()
for off, ch in chains.items():
    if call in ch and any(loop < x <= endl for x in ch):
        site = max((x for x in ch if loop < x <= endl), default=0)
        cnt[src[site - 1].strip()[:50]] += 1
tot = sum(cnt.values())
print("tile loop body instructions:", tot)
for k, v in cnt.most_common(12): print(f"  {v:4d}  {k}")
