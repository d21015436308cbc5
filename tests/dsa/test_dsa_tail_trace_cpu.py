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
        if k not in t.TWICE_ONLY:
            assert f"dsa_tt({k});" in text, k
    assert not any(f"dsa_tt_last({k});" in text for k in range(t.NSTAMP)) and "dsa_again" not in text
    for k in (t.V_MERGE, t.V_UNIT, t.V_NTILES, t.V_SMID, t.V_PART_KEPT, t.V_MERGE_PATH, t.V_FLOOR_BIN, t.V_ABOVE, t.V_DIGITS):
        assert f"dsa_tv({k}," in text
    assert f"dsa_tv(merging ? {t.V_MERGE_N} : {t.V_PART_N}," in text
    assert "dsa_tail_pass[blockIdx.x] = p;" in text  # reg_kth_largest's last pass


def test_merge_twice_runs_the_merge_again(patched_kernels, load_script):
    """--merge-twice: the merge's second pass after the first (the histograms zeroed by the second only), its stamps
    overwriting the first pass's, the first pass's end stamped once."""
    t = load_script("dsa-tail-trace")
    root = patched_kernels(t.PATCHES_TWICE, "dsa", "common")
    merge = (root / "dsa" / "merge.cuh").read_text()
    text = "".join((root / rel).read_text() for rel in t.PATCHES_TWICE)
    for k in range(t.NSTAMP):
        call = f"dsa_tt_last({k});" if k in t.MERGE_STAMPS else f"dsa_tt({k});"
        assert call in text, k
        if k in t.MERGE_STAMPS:
            assert f"dsa_tt({k});" not in text, k
    assert "if (merging && dsa_again) {" in merge and "dsa_again = true;" in merge
    assert "load_split_hist(s, gh, qq, merging && dsa_again);" in merge
    assert merge.count("arrive_last(arrivals, un, flag)") == 1


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
        rec[c, t.V_SMID] = 7 + c  # SMs 6, 7, 8
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
    # every finish lasts 2 us: all three are the slow tenth (at or above the p90); the merging CTA's loop ends last
    assert list(st["parts: loop end from call start"]) == [12500, 12600, 12700]
    assert list(st["  the slow tenth of finishes: SM (smid)"]) == [6, 7, 8]
    assert st["merging CTAs: loop end from call start"] == [12700]
    assert np.allclose(st["merging CTAs: their own part's finish"], 2000)
    # --merge-twice: the first pass ends at 19,800 ns, the second's steps count from there
    rec[2, t.M_END1], rec[2, t.CK + t.M_END1] = 19800, 2 * (19800 - 1000)
    rec[2, t.M_COPIED], rec[2, t.CK + t.M_COPIED] = 20300, 2 * (20300 - 1000)
    tw = t.analyse([rec], twice=True)
    assert np.allclose(tw["merge, first pass: arrival to its end"], 19800 - 15800)
    assert np.allclose(tw["merge, second pass: to its end"], 21700 - 19800)
    assert np.allclose(tw["merge: parts' keys in"], 500)


def test_the_traced_program_is_the_one_the_runner_launches(load_script, monkeypatch):
    """``dsa_traced_runs`` reads the stamps of the module the prepared runner launches: its plan's program variant
    (``DsaConfig.program_defines``: several windows, the split parts' running floor), whose ``__device__`` buffer is
    another module's than the plain program's."""
    import types

    cupy = pytest.importorskip("cupy")
    import cake_rt
    from cake_rt.bench import cases, timing
    from cake_rt.launch import arch
    from cake_rt.launch import compile as cc
    from cake_rt.ops import dsa

    class Loaded(Exception):
        pass

    def get_kernel(path, name, *, defines, device):
        seen.append(defines)
        raise Loaded

    trace = load_script("ssd_trace.py")
    cfg = dsa._try_config(32, 128, dsa.TARGET_SMEM["sm_90a"], True)
    monkeypatch.setattr(timing, "L2Flusher", lambda nbytes: None)
    monkeypatch.setattr(arch, "device_info", lambda device: types.SimpleNamespace(l2_bytes=1))
    monkeypatch.setattr(cupy.cuda, "Stream", lambda **kw: None)
    monkeypatch.setattr(cupy, "empty", lambda *a, **k: None)
    monkeypatch.setattr(cases, "_dsa_setup", lambda item, kw: (None, None, 2048, None, np.zeros((4, 1)), None, None, {}))
    monkeypatch.setattr(cc, "get_kernel", get_kernel)
    seen = []
    for windows, running_floor in ((False, False), (False, True), (True, False)):
        plan = types.SimpleNamespace(windows=windows, running_floor=running_floor)
        monkeypatch.setattr(cake_rt, "prepare_dsa_indexer_det_topk",
                            lambda *a, plan=plan, **k: types.SimpleNamespace(config=cfg, plan=plan))
        with pytest.raises(Loaded):
            next(trace.dsa_traced_runs(["A3"], [32], 1, "dsa_tail", (1, 1)))
    assert seen == [cfg.program_defines(False), cfg.program_defines(False, True), cfg.program_defines(True)]
    assert seen[1]["DSA_RFLOOR"] == 1 and seen[2]["DSA_WINDOWS"] == 1


def test_the_report_keeps_the_first_run_apart(load_script, capsys):
    """The phases of runs 2 .. N (the steady state) are printed, the first run's median beside each."""
    t = load_script("dsa-tail-trace")
    first = {"rate": [2.0], "part's finish": [7000.0, 7200.0], "tiles a unit": [10]}
    later = {"rate": [2.0], "part's finish": [3000.0, 3100.0, 2900.0], "tiles a unit": [10, 10, 10]}
    t.report("A3 H=32", first, later, 26.0)
    out = capsys.readouterr().out
    assert "runs 2.. (first run apart)" in out
    line = next(x for x in out.splitlines() if "part's finish" in x)
    assert "3000" in line and "n=3" in line and line.rstrip().endswith("| 7100")
    t.report("A3 H=32", first, None, 26.0)
    line = next(x for x in capsys.readouterr().out.splitlines() if "part's finish" in x)
    assert "7100" in line and "|" not in line
