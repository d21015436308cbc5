import time
from cake_rt.ops import ssd
from cake_rt.launch.compile import compile_report, load_source
src = load_source(ssd.KERNEL_PATH)
for name, case, walk in [("nemotron", (0, 2, 2, 64, 128, 128, 16), 0), ("nemotron walk", (0, 2, 2, 64, 128, 128, 16), 1), ("m2 walk", (0, 2, 2, 64, 128, 256, 80), 1)]:
    for mr, lr in [(216, 40), (184, 40), (168, 40), (152, 40), (152, 56)]:
        if walk and lr == 40: lr = 56 if mr <= 200 else 40
        d = {**ssd.program_defines(*case, target="sm_90a", family="chunkpar"), "SSD_MATH_REGS": mr, "SSD_LOAD_REGS": lr}
        if walk: d["SSD_WALK"] = 1
        try:
            r = compile_report(src, name="ssd_combined.cu", target="sm_90a", defines=d)["ssd_chunkpar"]
            print(f"{name:14s} math {mr} load {lr}: spill st {r['spill_stores']} ld {r['spill_loads']} stack {r['stack_bytes']}", flush=True)
        except Exception as e:
            print(f"{name:14s} math {mr} load {lr}: {str(e).splitlines()[-2][:160]}", flush=True)
