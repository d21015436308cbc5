"""CPU: ``scripts/ssd-ab-summary`` reads an A/B call's bench runs (``ab_<arm>_<n>.json``) and prints, per row, every
arm's run medians and base / arm from their means and from their minimums; the peers' records and failed rows are not
read."""
import json


def _run(path, medians, peer_ms=9.0):
    records = [{"row": row, "arm": "ours", "ms": {"median": ms}, "extra": {"family": fam}}
               for row, (ms, fam) in medians.items()]
    records.append({"row": "seed", "arm": "mamba_ssm-triton", "ms": {"median": peer_ms}, "extra": {}})
    records.append({"row": "short", "arm": "ours", "error": "failed", "extra": {}})
    path.write_text(json.dumps({"records": records}))


def test_summary_gives_each_arm_against_base(tmp_path, capsys, load_script):
    _run(tmp_path / "ab_base_1.json", {"seed": (0.20, "chunkpar"), "b8": (0.60, "exact")})
    _run(tmp_path / "ab_base_4.json", {"seed": (0.22, "chunkpar"), "b8": (0.50, "exact")})
    _run(tmp_path / "ab_fused_arm_2.json", {"seed": (0.10, "chunkpar"), "b8": (0.55, "exact")})
    _run(tmp_path / "ab_fused_arm_3.json", {"seed": (0.11, "chunkpar"), "b8": (0.55, "exact")})
    load_script("ssd-ab-summary").main(str(tmp_path))
    out = capsys.readouterr().out.splitlines()
    seed = next(ln for ln in out if ln.startswith("seed"))
    b8 = next(ln for ln in out if ln.startswith("b8"))
    assert "['chunkpar']" in seed and "base ['0.2000', '0.2200']" in seed and "fused_arm ['0.1000', '0.1100']" in seed
    assert "base/fused_arm 2.000 (mins 2.000)" in seed  # means 0.21 / 0.105; mins 0.20 / 0.10
    assert "base/fused_arm 1.000 (mins 0.909)" in b8  # means 0.55 / 0.55; mins 0.50 / 0.55
    assert not any(ln.startswith("short") for ln in out)  # a failed row is not a sample
