"""CPU: ``scripts/racecheck-pattern`` (the DSA score-slot handoff alone, for racecheck) stages every variant for
sm_90a, and its expected sums are the ones the kernel's selection threads must read."""
import pytest

from cake_rt.launch.compile import available_targets


def test_help(script_help):
    assert "racecheck" in script_help("racecheck-pattern")


@pytest.mark.skipif("sm_90a" not in available_targets(), reason="NVRTC here cannot compile sm_90a")
def test_stage_compiles_every_variant(load_script, tmp_path, monkeypatch):
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path / "cache"))
    m = load_script("racecheck-pattern")
    m.stage(tmp_path / "kit")
    assert sorted(p.stem for p in (tmp_path / "kit").glob("*.cubin")) == sorted(m.VARIANTS)


def test_expected_sums(load_script):
    m = load_script("racecheck-pattern")
    one, two = m.expected(1), m.expected(2)
    # thread 0 reads row 0 of each query of every tile, weighted by 1 + (g % 4)
    want = sum(((g * 7 + q * 3) % 1021) * (1 + (g & 3)) for g in range(m.NTILES) for q in range(2))
    assert one[0] == want and two[0] > one[0]
    assert max(two) < 2 ** 24  # exact in float32
