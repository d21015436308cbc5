"""Compile the programs the robustness GPU tests, the foundation GPU tests and scripts/host_time.py use into
the disk cache (``$CAKE_RT_CACHE_DIR``), for sm_90a by default. No GPU needed.

    CAKE_RT_CACHE_DIR=... python3 scripts/prewarm_robustness.py [target] [smem_optin]
"""
import sys

from cake_rt.launch.compile import compile_cubin, load_source
from cake_rt.ops import dsa, ssd


def main():
    target = sys.argv[1] if len(sys.argv) > 1 else "sm_90a"
    smem = int(sys.argv[2]) if len(sys.argv) > 2 else 232448
    compile_cubin(load_source("common/selftest.cu"), name="selftest.cu", target=target)
    compile_cubin(load_source("bench/spin.cu"), name="spin.cu", target=target)
    # DSA: H = 32, D = 128 (tests and host timing)
    cfg = dsa.config_for(32, 128, smem, target)
    compile_cubin(load_source(dsa.KERNEL_PATH), name="indexer.cu", target=target, defines=cfg.defines)
    # SSD: the programs of the op's list with bf16 x/B/C, fp32 dt and states, headdim 64 (exact and chunkpar)
    for path, defs in ssd.programs(target):
        if (defs["SSD_T"], defs["SSD_DT"], defs["SSD_SD"], defs["SSD_P"]) == (0, 2, 2, 64):
            compile_cubin(load_source(path), name="ssd_combined.cu", target=target, defines=defs)
    print("prewarmed robustness programs for", target)


if __name__ == "__main__":
    main()
