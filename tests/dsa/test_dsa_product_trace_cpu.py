"""CPU: ``scripts/dsa-product-trace`` patches the sm_90a tile loop by text anchors; the patched source must still find
every anchor in today's kernel and compile for sm_90a at H = 32 and 64 without spills (no GPU needed; the compile test
covers ``scripts/dsa-tail-trace``'s patches too), and its statistics must read a synthetic trace."""
import pathlib

import numpy as np
import pytest

from cake_rt.launch.compile import available_targets, compile_cubin, compile_report, load_source
from cake_rt.ops import dsa

KERNELS = pathlib.Path(dsa.__file__).resolve().parents[1] / "kernels"


def test_every_stamp_finds_its_anchor(load_script):
    trace = load_script("dsa-product-trace")
    out = trace.patch_tile((KERNELS / "dsa" / "tile_sm90.cuh").read_text())
    for k in range(trace.PW):
        assert f"dsa_st(tr, tb + {k});" in out
    for k in range(trace.S_FULL_B, trace.S_EMPTY + 1):
        assert f"dsa_st(tr, {k});" in out
    for k in (trace.V_IT, trace.V_NTILES, trace.V_NCOL):
        assert f"dsa_put(tr, {k}," in out
    assert f"dsa_gt(tr, {trace.V_GT});" in out


@pytest.mark.skipif("sm_90a" not in available_targets(), reason="NVRTC without sm_90a")
@pytest.mark.parametrize("script, patches, array", [("dsa-product-trace", "PATCHES", "dsa_trace"),
                                                   ("dsa-tail-trace", "PATCHES", "dsa_tail"),
                                                   ("dsa-tail-trace", "PATCHES_TWICE", "dsa_tail")])
@pytest.mark.parametrize("H", [32, 64])
def test_the_patched_kernel_compiles(patched_kernels, load_script, script, patches, array, H):
    """Both DSA trace scripts' patched kernels, the tail trace's --merge-twice form too (scripts/dsa-tail-trace's other
    tests: test_dsa_tail_trace_cpu.py)."""
    tmp_path = patched_kernels(getattr(load_script(script), patches), "dsa", "common")
    defs = next(d for _, d in dsa.programs("sm_90a") if d.get("DSA_WGMMA") and d["DSA_H"] == H and d["DSA_D"] == 128)
    text = load_source(tmp_path / "dsa" / "indexer.cu")
    assert f"{array}[" in text
    rep = compile_report(text, name="indexer.cu", target="sm_90a", defines=defs)
    assert set(rep) == {"dsa_scan"}
    r = rep["dsa_scan"]
    assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["stack_bytes"] == 0, r
    cubin = compile_cubin(text, name="indexer.cu", target="sm_90a", defines=defs)
    assert f"\x00{array}\x00".encode() in cubin, "the host looks the trace array up by its unmangled name"


def test_the_statistics_of_a_synthetic_trace(load_script):
    """Two units of 6 tiles, a fixed 1000-cycle period, warpgroup 1 300 cycles behind warpgroup 0."""
    t = load_script("dsa-product-trace")
    rec = np.zeros((t.TILES, t.SLOTS), np.int64)
    for g in range(12):
        base = 10_000 + 1000 * g
        for w, off in ((0, 0), (1, 300)):
            b = t.PW * w
            for k, dt in enumerate((0, 10, 60, 400, 410, 450, 700, 710)):
                rec[g, b + k] = base + off + dt
        for k, dt in zip(range(t.S_FULL_B, t.S_EMPTY + 1), (900, 1020, 1030, 1500, 1510)):
            rec[g, k] = base + dt
        rec[g, t.V_IT], rec[g, t.V_NTILES], rec[g, t.V_NCOL] = g % 6, 6, 128
        rec[g, t.V_GT] = 1_000 + 500 * g  # 2 cycles a ns
    st = t.analyse([rec])
    assert st["tiles"] == 5 and st["ncol"] == [128]  # the second unit past its first tile
    assert st["rate"] == pytest.approx(2.0)
    assert np.all(st["wg0: period (commit to commit)"] == 1000)
    assert np.all(st["wg1: wgmma issue"] == 50) and np.all(st["wg0: head sum"] == 250)
    assert np.all(st["chain: wg0 commit to wg1 commit"] == 300)
    assert np.all(st["chain: both wgmma in flight (overlap)"] == 40)  # wg1 commits at 360, wg0 lands at 400
    # With the CTA's first unit counted too (rows of one unit a CTA): both units past their first tile.
    assert t.analyse([rec], first_units=True)["tiles"] == 10


def test_the_traced_ctas_follow_the_option(load_script, monkeypatch):
    """--ctas sizes the trace buffer and bounds the stamping CTAs (the split tails' rows trace every CTA)."""
    t = load_script("dsa-product-trace")
    monkeypatch.setattr(t, "CTAS", 132)
    out = t.patch_tile((KERNELS / "dsa" / "tile_sm90.cuh").read_text())
    assert f"dsa_trace[132 * {t.TILES} * {t.SLOTS}]" in out and "blockIdx.x < 132" in out
    assert t.parse(["A3", "--ctas", "132", "--warm", "--dump", "d"]).ctas == 132
