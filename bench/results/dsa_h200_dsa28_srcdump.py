"""For the sm_90a DSA program of each H (D = 128) of this tree: its program text as NVRTC compiles it (FULL_<arm>_H<H>.cu,
the lines ncu's source counters and -lineinfo name) and its SASS with the line chains (LI_<arm>_H<H>.sass, nvdisasm -gi -c,
of the cubin the cache holds under the environment's CAKE_RT_LINEINFO).  python srcdump.py OUTDIR ARM H..."""
import os
import pathlib
import subprocess
import sys
import tempfile

from cake_rt.launch import compile as C
from cake_rt.ops import dsa

out, arm = pathlib.Path(sys.argv[1]), sys.argv[2]
nvd = os.path.join(os.environ.get("NVDISASM_PATH", "/tmp/nvdis/nvidia/cu13/bin"), "nvdisasm")
cuobj = os.environ.get("CUOBJDUMP", "/tmp/cuobj/nvidia/cu13/bin/cuobjdump")
src = C.load_source(dsa.KERNEL_PATH)
for H in (int(x) for x in sys.argv[3:]):
    cfg = dsa._try_config(H, 128, dsa.TARGET_SMEM["sm_90a"], True)
    opts = C.debug_options()
    cubin = C.compile_cubin(src, name="indexer.cu", target="sm_90a", defines=cfg.defines, options=opts)
    (out / f"FULL_{arm}_H{H}.cu").write_text(C._full_text(src, cfg.defines))
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin); f.flush()
        sass = subprocess.run([nvd, "-gi", "-c", f.name], capture_output=True, text=True, check=True).stdout
        res = subprocess.run([cuobj, "-res-usage", f.name], capture_output=True, text=True).stdout
    (out / f"LI_{arm}_H{H}.sass").write_text(sass)
    print(arm, H, cfg.defines, "lineinfo" if opts else "plain", len(sass.splitlines()), "sass lines;",
          " ".join(l.strip() for l in res.splitlines() if "REG" in l)[:200])
