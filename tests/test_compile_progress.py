"""The compile-progress line and the NVRTC target check of launch/compile.py (CPU only: NVRTC is faked)."""
import time

import pytest

from cake_rt.launch import compile as cc


def _slow_nvrtc(seconds):
    def run(text, name, target, options, *, verbose):
        time.sleep(seconds)
        return b"\x7fELF-fake-cubin", ""
    return run


def test_a_slow_compile_says_what_and_for_which_target(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("CAKE_RT_QUIET", raising=False)
    monkeypatch.setattr(cc, "_run_nvrtc", _slow_nvrtc(1.4))
    cc.compile_cubin("// slow program\n", name="slow.cu", target="sm_90a", defines={"X_P": 64})
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "compiling slow.cu" in err[0] and "X_P=64" in err[0] and "sm_90a" in err[0] and str(tmp_path) in err[0]


def test_a_fast_or_quiet_compile_prints_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cc, "_run_nvrtc", _slow_nvrtc(0.0))
    cc.compile_cubin("// fast program\n", name="fast.cu", target="sm_90a")
    monkeypatch.setenv("CAKE_RT_QUIET", "1")
    monkeypatch.setattr(cc, "_run_nvrtc", _slow_nvrtc(1.3))
    cc.compile_cubin("// quiet program\n", name="quiet.cu", target="sm_90a")
    assert capsys.readouterr().err == ""


def test_an_nvrtc_too_old_for_the_target_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cc, "available_targets", lambda: ("sm_80", "sm_86", "sm_89", "sm_90a"))
    with pytest.raises(cc.CompileError, match="cannot compile for sm_100a.*newer NVRTC"):
        cc.compile_cubin("// new gpu\n", name="new.cu", target="sm_100a")
