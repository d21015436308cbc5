"""Spills of the walk-at-three-chains programs (branch walk3: main + ssd_cpu_walk3_arm.diff; walk3c: main +
ssd_cpu_walk3c_arm.diff) by register split, per setmaxnreg region of the SASS (CPU, NVRTC 13.0). Run from the arm's
tree root:

    PYTHONPATH=. python ssd_cpu_walk3_census.py 128,256,64 168/144/56,184/136/56

Prints, per chunk size (the bf16 walk program of that chunk) and split walker / tiles / producer: ptxas's bytes of spill
stores / loads, then those of the walker's region, the tile code's (walk3: its two copies; walk3c: its one copy) and
the producer's, from cuobjdump's STL / LDL (4, 8 or 16 bytes each). Where walker and tiles get the same count, both land
in the tiles' column.
CUOBJDUMP names cuobjdump (default: on PATH)."""
import os
import re
import subprocess
import sys
import tempfile

from cake_rt.launch.compile import _full_text, _run_nvrtc, fresh_text, load_source
from cake_rt.ops import ssd as ops

src = load_source(ops.KERNEL_PATH)
chunks = [int(q) for q in sys.argv[1].split(",")]
splits = [tuple(int(v) for v in s.split("/")) for s in sys.argv[2].split(",")]
cuobjdump = os.environ.get("CUOBJDUMP", "cuobjdump")
for q in chunks:
    d = next(d for _, d in ops.programs("sm_90a") if d.get("SSD_WALK") and d["SSD_Q"] == q and d["SSD_T"] == 0)
    for w, t, p in splits:
        defs = {**d, "SSD_WALKER_REGS": w, "SSD_TILE_REGS": t, "SSD_LOAD_REGS": p}
        cubin, log = _run_nvrtc(fresh_text(_full_text(src, defs)), "ssd_combined.cu", "sm_90a", (), verbose=True)
        tot = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log.split("ssd_chunkpar")[-1])
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(cubin)
            f.flush()
            sass = subprocess.run([cuobjdump, "-sass", f.name], check=True, capture_output=True, text=True).stdout
        region, b = "pre", {}
        for line in sass.splitlines():
            if "USETMAXREG" in line:
                # (walk3c: the walker lowers its count to the tiles' after its walk, a DEALLOC to t)
                region = "tiles" if f"0x{t:x} ;" in line else "producer" if "DEALLOC" in line else "walker"
                continue
            m = re.search(r"\b(STL|LDL)(\.LU)?(\.64|\.128)?\b", line)
            if m:
                k = (region, m.group(1))
                b[k] = b.get(k, 0) + {None: 4, ".64": 8, ".128": 16}[m.group(3)]
        cols = " ".join(f"{r} {b.get((r, 'STL'), 0)}/{b.get((r, 'LDL'), 0)}" for r in ("walker", "tiles", "producer",
                                                                                         "pre"))
        print(f"chunk {q} split {w}/{t}/{p}: ptxas {tot.group(1)}/{tot.group(2)} | {cols}", flush=True)
