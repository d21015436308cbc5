"""Map one build's count ranges (ssd_cpu_tilebudget_ranges.json) onto another build of the same programs
(thirty-eighth session, arm tilebudget3; docs/ssd.md "The wgmma descriptors' high words and the prep copy").

    python bench/results/ssd_cpu_tilebudget_mapranges.py DIR_FROM DIR_TO RANGES_JSON TREE OUT_JSON

DIR_FROM / DIR_TO: `ssd_cpu_tilebudget_count.py build` folders. The two `nvdisasm -gi` listings are aligned
(difflib, registers, predicates and labels normalized); an instruction of DIR_TO takes the weight (times a warp runs
it per tile) of the DIR_FROM instruction it matches, a one-for-one replacement its counterpart's, and an inserted block
the weight of the instruction before it. A block whose neighbours have different weights (a range's edge, a loop's
head) is printed with `CHECK`: read those, and every change of control flow, by hand (`view`-ing the listing with the
weights). OUT_JSON: {name: {part: [[lo, hi, weight], ...]}}, the form of one tree's entry in the ranges file."""
import difflib
import json
import re
import sys

INS = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*$")


def load(path):
    out = []
    for t in open(path):
        if t.lstrip().startswith("//"):
            continue
        m = INS.match(t)
        if m:
            out.append((int(m.group(1), 16), m.group(2)))
    return out


def norm(t):
    t = t.replace(".reuse", "")
    t = re.sub(r"\bU?R\d+\b", "R", t)
    t = re.sub(r"\bU?P\d\b", "P", t)
    t = re.sub(r"\bB\d\b", "B", t)
    t = re.sub(r"\(\.L_x_\d+\)", "L", t)
    return t


def main():
    md, ad, rj, tree, outp = sys.argv[1:6]
    ranges = json.load(open(rj))[tree]
    res = {}
    for name in ranges:
        res[name] = {}
        mi, ai = load(f"{md}/{name}.gi.sass"), load(f"{ad}/{name}.gi.sass")
        ops = difflib.SequenceMatcher(None, [norm(t) for _, t in mi], [norm(t) for _, t in ai], autojunk=False).get_opcodes()
        for part in ranges[name]:
            w = [0.0] * len(mi)
            for lo, hi, f in ranges[name][part]:
                for k, (a, _) in enumerate(mi):
                    if int(lo, 16) <= a <= int(hi, 16):
                        w[k] += f
            aw = [0.0] * len(ai)
            print(f"== {name} {part}")
            for tag, i1, i2, j1, j2 in ops:
                if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                    for d in range(i2 - i1):
                        aw[j1 + d] = w[i1 + d]
                    continue
                near = set(w[max(i1 - 1, 0):i2 + 1])
                for j in range(j1, j2):
                    aw[j] = w[i1 - 1] if i1 > 0 else 0.0
                if any(near):
                    a1 = f"{ai[j1][0]:05x}..{ai[j2 - 1][0]:05x}" if j2 > j1 else "-"
                    print(f"  {tag} from {mi[i1][0]:05x} ({i2 - i1}) to {a1} ({j2 - j1}); weights near {sorted(near)}"
                          + ("  CHECK" if len(near) > 1 else ""))
            runs = []
            for (a, _), x in zip(ai, aw):
                if x and runs and runs[-1][2] == x and runs[-1][3] == a - 16:
                    runs[-1][1], runs[-1][3] = f"{a:05x}", a
                elif x:
                    runs.append([f"{a:05x}", f"{a:05x}", x, a])
            res[name][part] = [[lo, hi, x] for lo, hi, x, _ in runs]
            print(f"  weighted: from {sum(w):.1f}, to {sum(aw):.1f}")
    json.dump(res, open(outp, "w"))


if __name__ == "__main__":
    main()
