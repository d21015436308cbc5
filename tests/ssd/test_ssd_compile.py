"""Every SSD program family compiles with NVRTC for sm_80 and sm_90a (no GPU needed), with its resource
report read from ptxas: no spills on sm_90a, at most a few bytes on sm_80, and the shared-memory layout
the host asks for fits the opt-in limit."""
import pytest

from cake_rt.launch.compile import compile_report, load_source
from cake_rt.ops.ssd import smem_bytes

# (x dtype code, dt dtype code, state dtype code, headdim, dstate, chunk): the suite's programs, the
# largest tiles, each dtype.
PROGRAMS = [
    (0, 2, 2, 64, 128, 256),   # bf16 suite rows
    (0, 2, 2, 64, 128, 128),   # nemotron-h / varlen
    (1, 1, 1, 128, 64, 64),    # fp16, fp16 dt and states
    (2, 2, 2, 128, 256, 256),  # fp32 inputs, largest tiles
    (0, 0, 0, 128, 256, 64),   # bf16 everything, largest state
]


@pytest.mark.parametrize("target, max_spill", [("sm_90a", 0), ("sm_80", 64)])
@pytest.mark.parametrize("prog", PROGRAMS)
def test_programs_compile(target, max_spill, prog):
    t, dtt, sd, P, N, Q = prog
    nbuf = 1 if (t == 2 and N == 256) else 2  # as cake_rt.ops.ssd._nbuf
    src = load_source("ssd/ssd_combined.cu")
    rep = compile_report(src, name="ssd_combined.cu", target=target,
                         defines=dict(SSD_T=t, SSD_DT=dtt, SSD_SD=sd, SSD_P=P, SSD_N=N, SSD_Q=Q, SSD_NBUF=nbuf))
    assert set(rep) == {"ssd_exact", "ssd_chunkpar"}
    for name, r in rep.items():
        assert r["spill_stores"] <= max_spill and r["spill_loads"] <= max_spill, (name, r)
        assert r["registers"] <= 255
        assert r["shared_bytes"] == 0  # all shared memory is dynamic (sized by the host)
    itemsize = 4 if t == 2 else 2
    assert smem_bytes(itemsize, N, Q, True, nbuf) <= 232448


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_single_buffer_exact_programs_compile(target):
    # the exact scan runs single-buffered when there are more work items than SMs
    src = load_source("ssd/ssd_combined.cu")
    rep = compile_report(src, name="ssd_combined.cu", target=target,
                         defines=dict(SSD_T=0, SSD_DT=2, SSD_SD=2, SSD_P=64, SSD_N=128, SSD_Q=128, SSD_NBUF=1))
    assert rep["ssd_exact"]["spill_stores"] <= 64


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_four_warp_exact_programs_compile(target):
    # SSD_WN=1: 4-warp CTAs (no column split); registers must allow two resident 128-thread CTAs per SM
    src = load_source("ssd/ssd_combined.cu")
    for Q in (128, 256):
        rep = compile_report(src, name="ssd_combined.cu", target=target,
                             defines=dict(SSD_T=0, SSD_DT=2, SSD_SD=2, SSD_P=64, SSD_N=128, SSD_Q=Q, SSD_NBUF=1,
                                          SSD_WN=1))
        r = rep["ssd_exact"]
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0, r
        assert (r["registers"] + 7) // 8 * 8 * 128 * 2 <= 65536, r
