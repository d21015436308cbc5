"""CPU: every DSA program compiles for every supported target without spills (no GPU needed)."""
import pytest

from cake_rt.launch.compile import available_targets, compile_report, load_source
from cake_rt.ops import dsa

# (smem opt-in, where it occurs): H100/H200, A100, sm_86/sm_89.
DEVICES = {"sm_90a": 232448, "sm_100a": 232448, "sm_80": 166912, "sm_86": 101376, "sm_89": 101376}


def _programs(target):
    smem = DEVICES[target]
    seen = {}
    for H in (32, 64):
        for D in (64, 128):
            for topk in (1, 64, 2048):
                for tgt in {None, target}:  # sm_90a: the wgmma program and the mma.sync one
                    for fast in (False, True):  # the default program and the CAKE_RT_DSA_FAST=1 variant
                        cfg = dsa.select_config(H, D, topk, smem, tgt, fast=fast)
                        seen[tuple(sorted(cfg.defines.items()))] = cfg
    return list(seen.values())


@pytest.mark.parametrize("target", available_targets())
def test_dsa_programs_compile_without_spills(target):
    src = load_source(dsa.KERNEL_PATH)
    for cfg in _programs(target):
        rep = compile_report(src, name="indexer.cu", target=target, defines=cfg.defines)
        assert set(rep) == {"dsa_scan", "dsa_merge"}, rep
        for name, r in rep.items():
            assert r["spill_stores"] == 0 and r["spill_loads"] == 0, (target, cfg, name, r)
            assert r["stack_bytes"] == 0, (target, cfg, name, r)
            assert 0 < r["registers"] <= 255, (target, cfg, name, r)
        assert cfg.smem_scan <= DEVICES[target] and cfg.smem_merge <= DEVICES[target]
    if target == "sm_90a":
        assert any(c.wgmma for c in _programs(target))
        assert any(c.wgmma and c.fast for c in _programs(target))


@pytest.mark.parametrize("target", available_targets())
def test_spin_helper_compiles(target):
    rep = compile_report(load_source("dsa/spin.cu"), name="spin.cu", target=target)
    assert "dsa_hold_sm" in rep
