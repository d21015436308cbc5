"""CPU: ``scripts/ssd-step-trace`` patches phase 3 of the chunk-parallel kernel by text anchors; the patched sources
must still find every anchor in today's kernel and compile for sm_90a (no GPU needed)."""
import pathlib

import pytest

from cake_rt.launch.compile import available_targets, compile_report, load_source
from cake_rt.ops import ssd

KERNELS = pathlib.Path(ssd.__file__).resolve().parents[1] / "kernels"


def test_every_stamp_finds_its_anchor(load_script):
    trace = load_script("ssd-step-trace")
    tile = trace.patch_tile((KERNELS / "ssd" / "ssd_tile.cuh").read_text())
    kernel = trace.patch_kernel((KERNELS / "ssd" / "ssd_combined.cu").read_text())
    for slot in (trace.M_S, trace.P_PREP, trace.P_S):
        assert f"ssd_st(tr, {slot});" in tile
    for slot in (trace.M_T0, trace.M_T1):
        assert f"ssd_st(tr, {slot});" in kernel
    for base in (trace.M_RB, trace.P_RB):  # every row-block and step stamp of both roles
        for k in range(4):
            assert f"ssd_st(tr, {base} + {20} * i + {k});" in tile
    assert tile.count("ssd_st(tr, ") >= 3 + 2 * 4 + 4 + 4  # ... and the producer's per-step copies
    assert "produce_bx_tr<HB, NBUF, SSD_N>(tr, i, j," in tile
    assert kernel.count("ssd_step_rec(1)") == 2 and kernel.count("ssd_step_rec(0)") == 2  # phase 3 and the walk's tiles


@pytest.mark.skipif("sm_90a" not in available_targets(), reason="NVRTC without sm_90a")
def test_the_patched_kernel_compiles(patched_kernels, load_script):
    trace = load_script("ssd-step-trace")
    tmp_path = patched_kernels({"ssd/ssd_tile.cuh": trace.patch_tile, "ssd/ssd_combined.cu": trace.patch_kernel},
                               "ssd", "common")
    text = load_source(tmp_path / "ssd" / "ssd_combined.cu")
    assert "ssd_steps[" in text
    for rows in (1, 4):  # the long rows' program and short's (a row block a phase-3 item)
        defs = ssd.program_defines(0, 2, 2, 64, 128, 256, 8, "sm_90a", family="chunkpar", rows=rows)
        rep = compile_report(text, name="ssd_combined.cu", target="sm_90a", defines=defs)
        assert set(rep) == {"ssd_chunkpar"}
    # the walk schedule's output tiles (nemotron-h's walk program)
    defs = {**ssd.program_defines(0, 2, 2, 64, 128, 128, 16, "sm_90a", family="chunkpar"), "SSD_WALK": 1}
    assert set(compile_report(text, name="ssd_combined.cu", target="sm_90a", defines=defs)) == {"ssd_chunkpar"}
