"""ncu's warp-stall samples of the walk's kernel summed by part of the program (thirty-ninth session; docs/ssd.md
"Where the walk's warps wait").

    python bench/results/ssd_h200_stalls_by_part.py bench/results/h200_2026-12-05d_ncu_stalls_csv.txz

The archive holds `ncu --page source --csv --print-source sass` of nemotron-h's and m2-2.7b's walk programs (main
075e57c's kernels, lineinfo). An instruction's address less the program's first is mapped onto the parts of
ssd_cpu_tilebudget_ranges.json's tree `arm2` (the same kernels: `math`, the math warpgroup's tile loop; `producer`,
its loads); the rest is `other` (the walk, set-up, the drawing thread's waits). Prints each part's samples by stall
reason, then its instructions with the most samples."""
import collections
import json
import pathlib
import sys
import tarfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ssd_h200_stalls_by_step import source_rows  # noqa: E402

RANGES = pathlib.Path(__file__).with_name("ssd_cpu_tilebudget_ranges.json")


def main():
    ranges = json.loads(RANGES.read_text())["arm2"]
    with tarfile.open(sys.argv[1]) as tf:
        for row, name in (("nemotron-h", "nemo"), ("m2-2.7b", "m2")):
            ix, data, reasons = source_rows(tf.extractfile(f"walk_{row}_sass.csv").read().decode())
            base = int(data[0][0], 16)

            def part(addr):
                for p, rg in ranges[name].items():
                    if any(int(lo, 16) <= addr <= int(hi, 16) for lo, hi, _ in rg):
                        return p
                return "other"

            by = collections.defaultdict(collections.Counter)
            lines = collections.defaultdict(list)
            for r in data:
                addr = int(r[0], 16) - base
                p = part(addr)
                per = {k[6:]: int(r[ix[k]] or 0) for k in reasons}
                by[p].update(per)
                lines[p].append((sum(per.values()), addr, r[1].strip(), per))
            total = sum(sum(c.values()) for c in by.values())
            print(f"== {row}: {total} samples")
            for p in ("math", "producer", "other"):
                c = by[p]
                n = sum(c.values())
                print(f"  {p:8s} {n:6d} ({100 * n / total:.0f}%): "
                      + ", ".join(f"{k} {100 * v / n:.0f}%" for k, v in c.most_common(8)))
                for s, addr, src, per in sorted(lines[p], key=lambda x: -x[0])[:8]:
                    top = ", ".join(f"{k} {v}" for k, v in sorted(per.items(), key=lambda x: -x[1])[:2])
                    print(f"      {s:5d}  {addr:05x}  {src[:64]:64s} {top}")


if __name__ == "__main__":
    main()
