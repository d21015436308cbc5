"""CPU: ``scripts/compile-time`` times each listed program's cold compile and fails past ``--limit`` (for the programs
of ``--limit-ops``, the SSD ones by default)."""
import pytest

from cake_rt.launch.compile import available_targets


@pytest.mark.skipif("sm_80" not in available_targets(), reason="NVRTC without sm_80")
def test_compile_time_lists_each_program_and_applies_the_limit(capsys, load_script):
    main = load_script("compile-time").main
    args = ["sm_80", "--ops", "dsa", "--shapes", "heads=8,head_dim=64"]
    assert main(args + ["--limit", "1000", "--limit-ops", "dsa"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.strip().endswith("DSA_TILE=64") or "DSA_H=8" in ln]
    assert lines and all(" s  dsa dsa/indexer.cu" in ln for ln in lines)
    assert "0 of the dsa programs over 1000 s" in out
    assert main(args + ["--limit", "0", "--limit-ops", "dsa"]) == 1
    assert main(args + ["--limit", "0"]) == 0  # the limit is the SSD programs' (issue #13) unless asked
    assert main(["sm_80", "--ops", "dsa", "--shapes", "heads=8,head_dim=64,DSA_BQ=999"]) == 1  # nothing listed
