"""Decide the speed switches from one device run's evidence (used by scripts/device-verify.sh).

A variant is chosen only when the GPU tests passed on both paths, its outputs were bitwise equal to the
other path, and it was faster on the rows it targets. Prints the reasoning and writes `export` lines.
CAKE_RT_DSA_FAST: the main suite runs the default (1), the switch run the first program (0).
CAKE_RT_SSD_EXACT_NARROW: the main suite runs the default (0), the switch run `force`.
    python3 scripts/decide_switches.py WORKDIR > exports.sh
"""
import json
import pathlib
import sys


def _load(p):
    try:
        return json.loads(pathlib.Path(p).read_text())
    except Exception as exc:
        print(f"# cannot read {p}: {exc}", file=sys.stderr)
        return None


def decide_dsa(work):
    rc = (work / "dsa_fast_rc").read_text().strip() if (work / "dsa_fast_rc").exists() else "missing"
    data = _load(work / "dsa_variants.json")
    if rc != "0" or data is None:
        return False, f"fast-variant tests rc={rc}"
    res = data["results"]
    same = [r["same"] for r in res if "same" in r]
    if not same or not all(same):
        return False, f"bitwise equality to the default failed ({same.count(False)} of {len(same)})"
    t = {}
    for r in res:
        if r.get("entry") == "prepared" and "ms" in r and r.get("delay_us", 0) > 0:
            t[(r["row"], r["H"], r["variant"])] = r["ms"]
    gains = []
    for (row, H, v), ms in t.items():
        if v == "default" and (row, H, "fast") in t:
            gains.append((row, H, ms, t[(row, H, "fast")]))
    if not gains:
        return False, "no timings"
    big = [g for g in gains if g[0] in ("S1", "C1")]
    better = sum(g[2] for g in big) > sum(g[3] for g in big)
    summary = ", ".join(f"{r} H={h}: {d:.3f} -> {f:.3f} ms" for r, h, d, f in gains)
    return better, ("faster" if better else "not faster") + f" ({summary})"


def decide_ssd(work):
    rc = (work / "ssd_narrow_rc").read_text().strip() if (work / "ssd_narrow_rc").exists() else "missing"
    base, narrow = _load(work / "ssd_wide.json"), _load(work / "ssd_narrow.json")
    if rc != "0" or base is None or narrow is None:
        return False, f"narrow-exact tests rc={rc}"
    b = {r["row"]: r.get("exact") for r in base}
    n = {r["row"]: r.get("exact") for r in narrow}
    pairs = [(row, b[row], n.get(row)) for row in b if isinstance(b[row], float) and isinstance(n.get(row), float)]
    if not pairs:
        return False, "no timings"
    better = all(nv < bv for _, bv, nv in pairs)
    summary = ", ".join(f"{row}: {bv:.3f} -> {nv:.3f} ms" for row, bv, nv in pairs)
    return better, ("faster on every row" if better else "not faster on every row") + f" ({summary})"


def main():
    work = pathlib.Path(sys.argv[1])
    dsa_on, why_dsa = decide_dsa(work)
    ssd_on, why_ssd = decide_ssd(work)
    print(f"# CAKE_RT_DSA_FAST: {'on' if dsa_on else 'off'}: {why_dsa}")
    print(f"# CAKE_RT_SSD_EXACT_NARROW: {'on' if ssd_on else 'off'}: {why_ssd}")
    print(f"export CAKE_RT_DSA_FAST={1 if dsa_on else 0}")
    print(f"export CAKE_RT_SSD_EXACT_NARROW={1 if ssd_on else 0}")


if __name__ == "__main__":
    main()
