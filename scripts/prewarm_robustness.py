"""Compile the programs the robustness GPU tests, the foundation GPU tests and scripts/host_time.py use into
the disk cache (``$CAKE_RT_CACHE_DIR``), for sm_90a by default. No GPU needed. Uses only names that exist
before and after the reliability changes, so it can fill the cache of an older tree too.

    CAKE_RT_CACHE_DIR=... python3 scripts/prewarm_robustness.py [target] [smem_optin]
"""
import sys

from cake_rt.launch.compile import compile_cubin, load_source
from cake_rt.ops import dsa


def main():
    target = sys.argv[1] if len(sys.argv) > 1 else "sm_90a"
    smem = int(sys.argv[2]) if len(sys.argv) > 2 else 232448
    compile_cubin(load_source("common/selftest.cu"), name="selftest.cu", target=target)
    compile_cubin(load_source("dsa/spin.cu"), name="spin.cu", target=target)
    # DSA: H = 32, D = 128, topk = 16 (tests and host timing), default program (fast variant)
    cfg = dsa.select_config(32, 128, 16, smem, target)
    compile_cubin(load_source(dsa.KERNEL_PATH), name="indexer.cu", target=target, defines=cfg.defines)
    # SSD: bf16 x/B/C, fp32 dt and states, headdim 64, dstate 64, chunk 64, double buffers (exact and chunkpar)
    defs = {"SSD_T": 0, "SSD_DT": 2, "SSD_SD": 2, "SSD_P": 64, "SSD_N": 64, "SSD_Q": 64, "SSD_NBUF": 2}
    compile_cubin(load_source("ssd/ssd_combined.cu"), name="ssd_combined.cu", target=target, defines=defs)
    print("prewarmed robustness programs for", target)


if __name__ == "__main__":
    main()
