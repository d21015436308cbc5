"""ncu's warp-stall samples of an SSD kernel summed by source line through the inlining chain (fortieth session;
docs/ssd.md "The exact scan's waits by line").

    python bench/results/ssd_stalls_by_line.py CSV_TXZ CUBIN_DIR ROW:KERNEL [ROW:KERNEL ...]

CSV_TXZ holds `ncu --page source --csv --print-source sass` of each row's kernel as `k_ROW_sass.csv`
(bench/results/h100_2026-12-05e_ncu_stalls_csv.txz: main 166c64e's kernels, line info). CUBIN_DIR is a cake-rt cache
of the same programs built with line info (`CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=DIR cake-rt warmup ssd --target
sm_90a` on that tree); the program whose SASS matches the sampled one best is taken, and each instruction is given its
inlining chain (`nvdisasm -gi`). Line numbers are those of the program's full text (the defines, then
cake_rt/kernels/ssd/ssd_combined.cu with its includes inlined: cake_rt.launch.compile.load_source). Environment: DEPTH
(the chain levels below the kernel body to key by, default 2), TOP (lines printed, default 25), ROLE (math or
producer: only the instructions whose chain does / does not touch a PRODUCER range, `LO-HI,...` of full-text lines),
NVDISASM (default: nvdisasm on PATH)."""
import collections
import glob
import os
import pathlib
import re
import subprocess
import sys
import tarfile

from cake_rt.launch.compile import _unpack_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ssd_h200_stalls_by_step import norm, source_rows  # noqa: E402

NVDISASM = os.environ.get("NVDISASM", "nvdisasm")


def chains(elf: bytes) -> dict:
    """kernel -> [(SASS text, inlining chain of full-text lines, innermost first)]."""
    path = f"/tmp/ssd_stalls_by_line_{os.getpid()}.elf"
    with open(path, "wb") as fh:
        fh.write(elf)
    out = subprocess.run([NVDISASM, "-gi", "-c", path], capture_output=True, text=True, check=True).stdout
    os.unlink(path)
    res, fn, cur, fresh = {}, None, [], True
    for line in out.splitlines():
        m = re.match(r"\s*\.text\.(\S+):", line)
        if m:
            fn = m.group(1)
            res[fn] = []
            continue
        m = re.search(r'//## File "[^"]+", line (\d+)', line)
        if m:
            if fresh:
                cur, fresh = [], False
            if not cur or cur[-1] != int(m.group(1)):
                cur.append(int(m.group(1)))
            mi = re.search(r'inlined at "[^"]+", line (\d+)', line)
            if mi and int(mi.group(1)) != cur[-1]:
                cur.append(int(mi.group(1)))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m and fn:
            fresh = True
            res[fn].append((m.group(2).strip(), tuple(cur)))
    return res


def main():
    txz, cubins, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
    depth, top, role = int(os.environ.get("DEPTH", 2)), int(os.environ.get("TOP", 25)), os.environ.get("ROLE")
    prod = [tuple(map(int, r.split("-"))) for r in os.environ.get("PRODUCER", "").split(",") if r]
    programs = []
    for f in sorted(glob.glob(os.path.join(cubins, "*.cubin"))):
        data, _ = _unpack_file(open(f, "rb").read())
        if data is not None:
            programs.append((f, chains(data)))
    with tarfile.open(txz) as tf:
        for pair in pairs:
            row, kern = pair.split(":")
            ix, data, reasons = source_rows(tf.extractfile(f"k_{row}_sass.csv").read().decode())
            ops = [norm(r[ix["Source"]]) for r in data]
            best = max(((sum(a == norm(t) for a, (t, _) in zip(ops, p[kern])), f, p[kern])
                        for f, p in programs if kern in p and abs(len(p[kern]) - len(data)) <= 64),
                       key=lambda b: b[0])
            same, f, ins = best
            print(f"== {row} ({kern}): {os.path.basename(f)}, {same} of {len(data)} opcodes alike"
                  + (f", {role} instructions" if role else ""))
            total, by = collections.Counter(), collections.defaultdict(collections.Counter)
            for r, (_, ch) in zip(data, ins):
                isprod = any(lo <= n <= hi for n in ch for lo, hi in prod)
                if (role == "math" and isprod) or (role == "producer" and not isprod):
                    continue
                key = tuple(reversed(ch[-depth - 1:-1])) if len(ch) > 1 else ch
                for h in reasons:
                    v = int(r[ix[h]] or 0)
                    if v:
                        total[h] += v
                        by[key][h] += v
            n = sum(total.values())
            print(f"  {n} samples: " + ", ".join(f"{h[6:]} {100 * v / n:.0f}%" for h, v in total.most_common(8)))
            for key, c in sorted(by.items(), key=lambda kv: -sum(kv[1].values()))[:top]:
                print(f"  {100 * sum(c.values()) / n:5.1f}%  {'>'.join(map(str, key)):14s} "
                      + ", ".join(f"{h[6:]} {v}" for h, v in c.most_common(3)))


if __name__ == "__main__":
    main()
