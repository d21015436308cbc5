"""ncu's warp-stall samples of the walk's math warpgroup summed by step of the output tile (thirty-ninth session;
docs/ssd.md "Where the walk's warps wait").

    PYTHONPATH=<tree at 075e57c> python bench/results/ssd_cpu_tilebudget_count.py build DIR
    python bench/results/ssd_h200_stalls_by_step.py DIR bench/results/h200_2026-12-05d_ncu_stalls_csv.txz

DIR: the count script's build of main 075e57c's walk programs (the kernels ncu sampled, compiled by the same NVRTC
with line info: the script first checks that every sampled instruction's opcode is the build's at that offset). Each
math-warpgroup instruction in `arm2`'s ranges takes the count script's step (its source line's, an asynchronous
product's issue and wait to the product); its samples are summed by step and stall reason."""
import collections
import csv
import io
import json
import pathlib
import sys
import tarfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import ssd_cpu_tilebudget_count as tc  # noqa: E402

RANGES = pathlib.Path(__file__).with_name("ssd_cpu_tilebudget_ranges.json")
TOP = ("barrier", "wait", "selected", "short_sb", "long_sb", "no_inst", "not_selected", "membar", "mio")


def norm(t):
    """The instruction's predicate and opcode (the listings print operands and branch targets differently)."""
    return " ".join(t.strip().rstrip(";").split()[:2] if t.strip().startswith("@") else t.strip().split()[:1])


def source_rows(text):
    """One kernel's `ncu --page source --csv --print-source sass` text: ({column: index}, the instruction rows, the
    stall-reason columns (all samples; the not-issued ones left out))."""
    rows = list(csv.reader(io.StringIO(text)))
    hdr = rows[1]
    return ({h: i for i, h in enumerate(hdr)}, [r for r in rows[2:] if len(r) == len(hdr)],
            [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h])


def steps_of(d, name, ranges):
    """{offset: step} for the math ranges, as the count script assigns them; {offset: text} for every instruction."""
    seq, steps = tc.assign_steps(d, name, ranges)
    return ({addr: st for ((addr, _, _), _), st in zip(seq, steps)},
            {addr: text for addr, text, _ in tc.parse(d / f"{name}.gi.sass")})


def main():
    d = pathlib.Path(sys.argv[1])
    ranges = json.loads(RANGES.read_text())["arm2"]
    with tarfile.open(sys.argv[2]) as tf:
        for row, name in (("nemotron-h", "nemo"), ("m2-2.7b", "m2")):
            ix, data, reasons = source_rows(tf.extractfile(f"walk_{row}_sass.csv").read().decode())
            base = int(data[0][0], 16)
            step, text = steps_of(d, name, ranges[name]["math"])
            bad = [r for r in data if norm(text.get(int(r[0], 16) - base, "")) != norm(r[1])]
            if bad:
                raise SystemExit(f"{row}: {len(bad)} sampled instructions differ from the build (first: {bad[0][:2]})")
            by = collections.defaultdict(collections.Counter)
            for r in data:
                s = step.get(int(r[0], 16) - base)
                if s is not None:
                    by[s].update({k[6:]: int(r[ix[k]] or 0) for k in reasons})
            total = sum(sum(c.values()) for c in by.values())
            print(f"== {row}: the math warpgroup's tile loop, {total} samples; by step (share of the loop's), by reason")
            print(f"  {'step':38s} {'share':>6s} " + " ".join(f"{k:>12s}" for k in TOP))
            for s, c in sorted(by.items(), key=lambda x: -sum(x[1].values())):
                n = sum(c.values())
                print(f"  {s:38s} {100 * n / total:5.1f}% " + " ".join(f"{c[k]:12d}" for k in TOP))


if __name__ == "__main__":
    main()
