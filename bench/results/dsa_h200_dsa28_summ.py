"""dsa28: median (min, n) of all samples of every bench run per arm, prepared (ARM=eager: the eager rows), the speedup
of each arm against base, and the geometric mean of the speedups over the sixteen rows (S1 S2 C1 Z2cp Z3cp A1 A2 A3, H = 32 and 64).
The last line names the best arm (largest geometric mean), the one the call sanitizes and tests.
    python summ.py W"""
import glob, json, math, os, statistics, sys

W = sys.argv[1]
kind = os.environ.get("ARM", "prepared")
ORDER = ["S1", "S2", "C1", "Z2cp", "Z3cp", "A1", "A2", "A3"]
ARMS = ("base", "arm")
samples = {}
for f in sorted(glob.glob(os.path.join(W, "dsa_*_*.json"))):
    arm = os.path.basename(f).split("_")[1]
    for r in json.load(open(f))["records"]:
        if r.get("arm") != kind or not r.get("ms"):
            continue
        samples.setdefault(arm, {}).setdefault((r["row"], r["heads"]), []).extend(r["ms"]["samples"])
names = [a for a in ARMS if a in samples]
base = samples.get("base", {})
print(f"{kind}: median of all samples (min, n), ms; speedup = base / arm")
print("row H | " + " | ".join(names))
logs = {a: [] for a in names}
for H in (32, 64):
    for row in ORDER:
        b = base.get((row, H))
        cells = []
        for a in names:
            s = samples[a].get((row, H))
            if not s:
                cells.append("-")
                continue
            m = statistics.median(s)
            sp = ""
            if b and a != "base":
                x = statistics.median(b) / m
                logs[a].append(math.log(x))
                sp = f" {x:.3f}x"
            cells.append(f"{m:.4g} ({min(s):.4g}, n={len(s)}){sp}")
        print(f"{row} {H} | " + " | ".join(cells))
gm = {a: math.exp(sum(v) / len(v)) for a, v in logs.items() if len(v) == 2 * len(ORDER)}
if gm:
    print("geomean over the sixteen rows: " + ", ".join(f"{a} {x:.4f}x" for a, x in gm.items()))
    print("BEST " + max(gm, key=gm.get))
