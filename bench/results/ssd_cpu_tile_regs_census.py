from cake_rt.ops import ssd
from cake_rt.launch.compile import compile_report, load_source
src = load_source(ssd.KERNEL_PATH)
for name, case in [("nemotron walk", (0, 2, 2, 64, 128, 128, 16)), ("m2 walk", (0, 2, 2, 64, 128, 256, 80))]:
    for nowalker in (0, 1):
        for mr, lr in [(200, 56), (168, 56), (152, 56), (144, 56), (136, 56), (128, 56)]:
            d = {**ssd.program_defines(*case, target="sm_90a", family="chunkpar"), "SSD_MATH_REGS": mr, "SSD_LOAD_REGS": lr,
                 "SSD_WALK": 1, "SSD_CENSUS_NO_WALKER": nowalker}
            try:
                r = compile_report(src, name="ssd_combined.cu", target="sm_90a", defines=d)["ssd_chunkpar"]
                print(f"{name:14s} {'tiles only' if nowalker else 'as shipped'} math {mr} load {lr}: spill st {r['spill_stores']} ld {r['spill_loads']} stack {r['stack_bytes']}", flush=True)
            except Exception as e:
                print(f"{name:14s} nowalker {nowalker} math {mr}: {str(e).splitlines()[-2][:160]}", flush=True)
