"""CPU: ``scripts/dsa-row`` (a DSA suite row's eager call, for a profiler) runs the bench's inputs of the row it names."""
import sys
import types

import pytest

def test_dsa_row_help(script_help):
    out = script_help("dsa-row")
    assert "row" in out and "--heads" in out


def test_dsa_row_calls_the_entry_with_the_rows_inputs(load_script, monkeypatch, capsys):
    cupy = pytest.importorskip("cupy")
    import cake_rt
    from cake_rt.bench import cases

    script = load_script("dsa-row")
    seen = {}

    def setup(item, opts):
        seen["item"] = item
        layout = types.SimpleNamespace(T=4, Tkv=30466, segments=1)
        return item.heads, 128, 2048, layout, "q", "k", "w", {"cu_seqlens_q": "cq"}

    calls = []
    monkeypatch.setattr(cases, "_dsa_setup", setup)
    monkeypatch.setattr(cake_rt, "dsa_indexer_det_topk", lambda *a, **kw: calls.append((a, kw)))
    monkeypatch.setattr(cupy.cuda, "Device", lambda *a: types.SimpleNamespace(synchronize=lambda: None))
    monkeypatch.setattr(sys, "argv", ["dsa-row", "A2", "--heads", "32", "--calls", "3"])
    assert script.main() == 0
    assert seen["item"].params["name"] == "A2" and seen["item"].heads == 32
    assert calls == [(("q", "k", "w", 2048), {"cu_seqlens_q": "cq"})] * 3
    assert "A2 H=32" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["dsa-row", "NOPE"])
    with pytest.raises(SystemExit):
        script.main()
