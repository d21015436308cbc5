"""CPU: ``scripts/dsa-tail-trace`` patches the sm_90a kernel (layout, indexer, tile loop, merge) by text anchors; the
patched source must find every anchor in today's kernel (its compile test is test_dsa_product_trace_cpu.py's, for both
trace scripts), and its statistics must read a synthetic trace."""
import numpy as np
import pytest


def test_help(script_help):
    assert "timeline" in script_help("dsa-tail-trace")


def test_every_stamp_finds_its_anchor(patched_kernels, load_script):
    t = load_script("dsa-tail-trace")
    root = patched_kernels(t.PATCHES, "dsa", "common")
    text = "".join((root / rel).read_text() for rel in t.PATCHES)
    for k in range(t.NSTAMP):
        assert f"dsa_tt({k});" in text, k
    for k in (t.V_MERGE, t.V_UNIT, t.V_NTILES, t.V_PART_KEPT, t.V_MERGE_PATH):
        assert f"dsa_tv({k}," in text
    assert f"dsa_tv(merging ? {t.V_MERGE_N} : {t.V_PART_N}," in text


def test_the_statistics_of_a_synthetic_trace(load_script):
    """Three CTAs at 2 cycles a ns: parts of 10 us of tiles; the third arrives last and merges for 6 us."""
    t = load_script("dsa-tail-trace")
    rec = np.zeros((t.MAX_CTAS, t.SLOTS), np.int64)
    for c in range(3):
        gt = {t.T_START: 1000 + 100 * c, t.P_UNIT: 1100 + 100 * c, t.P_Q: 3100 + 100 * c, t.P_END: 13100 + 100 * c,
              t.S_UNIT: 1100 + 100 * c, t.S_LOOP_END: 13500 + 100 * c, t.S_PART_END: 15500 + 100 * c,
              t.S_ARRIVED: 15600 + 100 * c}
        if c == 2:
            gt.update({t.M_COPIED: 17800, t.M_SELECTED: 20800, t.M_END: 21700, t.S_FIN_END: 21800})
        else:
            gt[t.S_FIN_END] = 15700 + 100 * c
        for k, v in gt.items():
            rec[c, k] = v
            rec[c, t.CK + k] = 2 * (v - 1000)
        rec[c, t.V_MERGE] = 1 if c == 2 else 2
        rec[c, t.V_NTILES] = 10
        rec[c, t.V_PART_N], rec[c, t.V_PART_KEPT] = 1281, 101 + 10 * c  # counts + 1
    rec[2, t.V_MERGE_N], rec[2, t.V_MERGE_PATH] = 3001, 1
    st = t.analyse([rec])
    assert st["call span (first start to last end)"] == [20800]
    assert st["rate"][0] == pytest.approx(2.0)
    assert np.allclose(st["tiles (product)"], 10000) and np.allclose(st["q and weights in (product)"], 2000)
    assert np.allclose(st["merge: exact selection"], 3000) and np.allclose(st["merge: parts' keys in"], 2000)
    assert st["merging CTAs: arrival from call start"] == [14800]
    assert len(st["unit end (not merging)"]) == 2
    assert list(st["part: candidates (keys, first query)"]) == [1280] * 3
    assert list(st["part: keys written from its floor"]) == [100, 110, 120]
    assert list(st["merge: keys in its buffer (first query)"]) == [3000]
    assert list(st["merge: streamed (1: one batch, 2: streamed)"]) == [1]
