"""CPU: ``scripts/ssd-row`` (a suite row's call for a profiler) starts, and its row call is the trace scripts' own."""
import pathlib

SCRIPTS = pathlib.Path(__file__).resolve().parents[2] / "scripts"


def test_ssd_row_help(script_help):
    assert "row" in script_help("ssd-row")


def test_ssd_row_uses_the_trace_scripts_row_call():
    text = (SCRIPTS / "ssd-row").read_text()
    assert "from ssd_trace import suite_call" in text
    assert "suite_call(row, stream)" in (SCRIPTS / "ssd_trace.py").read_text()


def test_the_traced_kernel_is_the_module_the_call_loaded(load_script, monkeypatch):
    """``traced_rows`` reads the trace array of the module the row's call ran: under CAKE_RT_LINEINFO that call loads
    its program with -lineinfo, so the traced kernel is fetched with the same options (another module otherwise)."""
    import types

    import pytest

    cupy = pytest.importorskip("cupy")
    from cake_rt.bench import timing
    from cake_rt.launch import arch
    from cake_rt.launch import compile as cc
    from cake_rt.ops import ssd

    trace = load_script("ssd_trace.py")
    seen = []
    stream = types.SimpleNamespace(synchronize=lambda: None)
    monkeypatch.setattr(timing, "L2Flusher", lambda nbytes: None)
    monkeypatch.setattr(arch, "device_info", lambda device: types.SimpleNamespace(l2_bytes=1))
    monkeypatch.setattr(cupy.cuda, "Stream", lambda **kw: stream)
    monkeypatch.setattr(trace, "suite_call", lambda row, s: ({}, lambda: None))
    monkeypatch.setattr(ssd, "last_plan", lambda: types.SimpleNamespace(family="chunkpar", defines={"SSD_P": 64}))
    monkeypatch.setattr(cc, "_kernel_memo", {})
    monkeypatch.setattr(arch, "device_index", lambda device=None: 0)
    monkeypatch.setattr(cc, "_get_kernel_slow", lambda path, name, *, defines, options, device:
                        seen.append(tuple(options)))
    monkeypatch.setenv("CAKE_RT_LINEINFO", "1")
    next(trace.traced_rows(["seed"]))
    assert seen == [("-lineinfo",)]
