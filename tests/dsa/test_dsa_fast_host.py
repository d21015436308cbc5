"""CPU: host side of the CAKE_RT_DSA_FAST=1 variant (switch parsing, programs, shared-memory sizes, plan keys)."""
import pytest

from cake_rt.launch.compile import load_source
from cake_rt.ops import dsa


@pytest.mark.parametrize("value,expect", [("1", True), ("true", True), ("ON", True), ("0", False), ("", True),
                                          ("no", False), ("off", False), (None, True)])
def test_switch_parsing(monkeypatch, value, expect):
    if value is None:
        monkeypatch.delenv("CAKE_RT_DSA_FAST", raising=False)
    else:
        monkeypatch.setenv("CAKE_RT_DSA_FAST", value)
    assert dsa.fast_enabled() is expect
    cfg = dsa.select_config(32, 128, 2048, 232448, "sm_90a")  # fast=None follows the switch
    assert cfg.fast is expect
    assert ("DSA_FAST" in cfg.defines) is expect


@pytest.mark.parametrize("smem,target", [(232448, "sm_90a"), (232448, None), (166912, None), (101376, None)])
@pytest.mark.parametrize("H", [32, 64])
@pytest.mark.parametrize("D", [64, 128])
def test_fast_programs_fit_and_match_the_default_layout(smem, target, H, D):
    for topk in (1, 64, 700, 2048, 3000):
        base = dsa.select_config(H, D, topk, smem, target, fast=False)
        fast = dsa.select_config(H, D, topk, smem, target, fast=True)
        assert "DSA_FAST" not in base.defines and fast.defines["DSA_FAST"] == 1
        assert not base.fast and fast.fast
        # Same block shape, so the same work plan and workspace; at most one score tile more shared memory.
        assert (fast.H, fast.D, fast.BQ, fast.TILE, fast.wgmma) == (base.H, base.D, base.BQ, base.TILE, base.wgmma)
        assert fast.smem_scan <= smem and fast.CAP - fast.TILE >= topk and fast.CAP % dsa.SCAN_THREADS == 0
        extra = (fast.BQ * H // 32) * fast.TILE * 4 if fast.wgmma else 0
        assert fast.smem_scan == dsa._scan_smem(H, D, fast.BQ, fast.TILE, fast.CAP, fast.wgmma, True)
        assert fast.smem_scan - extra == dsa._scan_smem(H, D, fast.BQ, fast.TILE, fast.CAP, fast.wgmma)
        if fast.CAP == base.CAP:
            assert fast.smem_scan == base.smem_scan + extra


def test_default_program_text_has_no_fast_code_outside_guards():
    """Every line the fast variant adds sits inside `#if DSA_FAST...` / `#if defined(DSA_FAST)` regions, so the
    default program's preprocessed text is the verified one (also checked by cubin hashes, see the notes)."""
    src = load_source(dsa.KERNEL_PATH)
    for name in ("reg_kth_largest", "multi_kth_largest", "compact_fast", "finish_unit_multi", "compact_multi"):
        assert name in src
    depth, fast_depth = 0, []
    for line in src.splitlines():
        t = line.strip()
        if t.startswith("#if"):
            depth += 1
            if "DSA_FAST" in t:
                fast_depth.append(depth)
        elif t.startswith("#endif"):
            if fast_depth and fast_depth[-1] == depth:
                fast_depth.pop()
            depth -= 1
        elif t.startswith("#else") or t.startswith("#elif"):
            if fast_depth and fast_depth[-1] == depth:  # the #else of a fast guard is default code again
                fast_depth.pop()
        elif not fast_depth:
            for name in ("reg_kth_largest(", "multi_kth_largest(", "compact_fast(", "finish_unit_multi(",
                         "compact_multi(", "multi_ordered_keep", "reg_ordered_keep", "DsaMultiState"):
                assert name not in t, line


def test_plan_key_distinguishes_the_variant(monkeypatch):
    p = dsa._Problem(None, None, None, 8, 16, 32, 128, 4, None, None, None, True, 0)

    class _Info:
        target = "sm_90a"

    monkeypatch.setattr(dsa, "_device_facts", lambda dev: _Info())
    monkeypatch.setenv("CAKE_RT_DSA_FAST", "0")
    k0 = dsa._plan_key(p, None)
    monkeypatch.setenv("CAKE_RT_DSA_FAST", "1")
    k1 = dsa._plan_key(p, None)
    assert k0 != k1
    assert k0[:-1] == k1[:-1]
