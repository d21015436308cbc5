"""CPU: ``scripts/ssd-walk-trace`` patches the walk schedule of the chunk-parallel kernel by text anchors; the patched
source must still find every anchor in today's kernel and compile for sm_90a (no GPU needed)."""
import pathlib

import pytest

from cake_rt.launch.compile import available_targets, compile_report, load_source
from cake_rt.ops import ssd

KERNELS = pathlib.Path(ssd.__file__).resolve().parents[1] / "kernels"


def test_every_stamp_finds_its_anchor(load_script):
    trace = load_script("ssd-walk-trace")
    text = trace.patch_kernel((KERNELS / "ssd" / "ssd_combined.cu").read_text())
    for slot in (trace.M_START, trace.M_SLOT, trace.M_PREV, trace.M_COUNT, trace.M_STATE, trace.P_START, trace.P_END):
        assert f"wtr_chunk(cc, {slot});" in text
    for slot in (trace.T_CLK0, trace.T_CLK1, trace.T_GT0, trace.T_GT1, trace.T_TILES, trace.T_GT_START):
        assert f"wtr_cta({slot}, " in text
    assert f"wtr_cta({trace.T_WAIT_WORD}, wtr_clock() - q0, true);" in text
    assert f"wtr_cta({trace.T_WAIT_ITEM}, wtr_clock() - q0, true);" in text


def test_analysis_of_a_made_up_record(load_script):
    import numpy as np

    trace = load_script("ssd-walk-trace")
    items, nch, grid, ghz = 2, 4, 3, 2.0
    W = np.zeros((trace.MAXCTA, trace.MAXC, trace.SLOTS), np.int64)
    for w in range(items):
        for c in range(nch):  # a chunk every 2000 cycles (1000 ns at 2 GHz): 100 slot, 300 stores, 200 count, 1000 state
            t0 = 10_000 + 2000 * c
            W[w, c, [trace.M_START, trace.M_SLOT, trace.M_PREV, trace.M_COUNT, trace.M_STATE]] = \
                [t0, t0 + 100, t0 + 400, t0 + 600, t0 + 1600]
            W[w, c, [trace.P_START, trace.P_END]] = [t0 - 1000, t0 + 200]
    T = np.zeros((trace.MAXCTA, trace.TILE_SLOTS), np.int64)
    for c in range(grid):  # the walkers' tiles from 5 us, everyone's end at 105 us; the clock's rate 2 GHz
        T[c, trace.T_GT0] = 5000 if c < items else 0
        T[c, trace.T_GT1] = 105_000
        T[c, trace.T_CLK1] = 2 * (T[c, trace.T_GT1] - T[c, trace.T_GT0])
        T[c, trace.T_TILES] = 7 + c
    r = trace.analyze(W, T, items, nch, grid)
    assert r["ghz"] == pytest.approx(ghz)
    s = r["steps"]
    assert s["slot wait"][0] == pytest.approx(50) and s["round_T(S_prev) stored"][0] == pytest.approx(150)
    assert s["prep saved, counted"][0] == pytest.approx(100) and s["state pass"][0] == pytest.approx(500)
    assert s["a chunk"][0] == pytest.approx(1000) and s["to the next chunk"][0] == pytest.approx(200)
    assert s["producer lead (loads' end - state pass's start)"][0] == pytest.approx(-200)
    assert list(r["walk_end_us"]) == [5.0, 5.0] and list(r["end_us"]) == [105.0] * 3 and list(r["tiles"]) == [7, 8, 9]


@pytest.mark.skipif("sm_90a" not in available_targets(), reason="NVRTC without sm_90a")
def test_the_patched_kernel_compiles(patched_kernels, load_script):
    trace = load_script("ssd-walk-trace")
    tmp_path = patched_kernels({"ssd/ssd_combined.cu": trace.patch_kernel}, "ssd", "common")
    text = load_source(tmp_path / "ssd" / "ssd_combined.cu")
    assert "walk_tr[" in text
    for chunk, upg in ((128, 16), (256, 80)):  # nemotron-h's and m2-2.7b's walk programs
        defs = {**ssd.program_defines(0, 2, 2, 64, 128, chunk, upg, "sm_90a", family="chunkpar"), "SSD_WALK": 1}
        rep = compile_report(text, name="ssd_combined.cu", target="sm_90a", defines=defs)
        assert set(rep) == {"ssd_chunkpar"}
