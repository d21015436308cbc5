"""cake_rt.env: one rule for every CAKE_RT_* switch, and nothing else in the package reads the environment."""
import pathlib
import re

import pytest

from cake_rt import env


@pytest.mark.parametrize("value, want", [("1", True), ("TRUE", True), (" yes ", True), ("on", True),
                                         ("0", False), ("false", False), ("No", False), ("off", False), ("", False)])
def test_one_rule_for_on(monkeypatch, value, want):
    monkeypatch.setenv("CAKE_RT_QUIET", value)
    assert env.flag("CAKE_RT_QUIET") is want


def test_unset_is_off_and_garbage_is_named(monkeypatch):
    monkeypatch.delenv("CAKE_RT_LINEINFO", raising=False)
    assert env.flag("CAKE_RT_LINEINFO") is False
    monkeypatch.setenv("CAKE_RT_LINEINFO", "maybe")
    with pytest.raises(ValueError, match="CAKE_RT_LINEINFO"):
        env.flag("CAKE_RT_LINEINFO")


def test_unknown_switch_is_refused():
    with pytest.raises(KeyError, match="CAKE_RT_NOPE"):
        env.flag("CAKE_RT_NOPE")


def test_choice_and_byte_count(monkeypatch):
    monkeypatch.setenv("CAKE_RT_SSD_CHUNK_PARALLEL", " Never ")
    assert env.choice("CAKE_RT_SSD_CHUNK_PARALLEL", ("auto", "always", "never"), "auto") == "never"
    monkeypatch.setenv("CAKE_RT_SSD_WORKSPACE_CAP", "-1")
    with pytest.raises(ValueError, match="CAKE_RT_SSD_WORKSPACE_CAP"):
        env.byte_count("CAKE_RT_SSD_WORKSPACE_CAP", 7)
    monkeypatch.setenv("CAKE_RT_SSD_WORKSPACE_CAP", "")
    assert env.byte_count("CAKE_RT_SSD_WORKSPACE_CAP", 7) == 7


@pytest.mark.parametrize("target", ["sm_90a", "sm_80", "sm_86", "sm_100a"])
def test_a_bad_dsa_mma_value_is_named_on_every_target(monkeypatch, target):
    """CAKE_RT_DSA_MMA picks a program on Hopper only, but a value it does not know is an error wherever it is read."""
    from cake_rt.ops import dsa

    monkeypatch.setenv("CAKE_RT_DSA_MMA", "fast")
    with pytest.raises(ValueError, match="CAKE_RT_DSA_MMA"):
        dsa.wgmma_allowed(target)
    monkeypatch.setenv("CAKE_RT_DSA_MMA", "sync")
    assert dsa.wgmma_allowed(target) is False
    monkeypatch.delenv("CAKE_RT_DSA_MMA")
    assert dsa.wgmma_allowed(target) is (target == "sm_90a")


def test_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path))
    assert env.cache_dir() == tmp_path
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", "OFF")
    assert env.cache_dir() is None
    monkeypatch.delenv("CAKE_RT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert env.cache_dir() == tmp_path / "cake-rt"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "rel/cache")  # relative: invalid under the XDG spec, not the working directory's
    assert env.cache_dir() == tmp_path / "home" / ".cache" / "cake-rt"
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", "~/kernels")
    assert env.cache_dir() == tmp_path / "home" / "kernels"



def _no_home(monkeypatch):
    """No home directory to expand ``~`` to: HOME unset and no passwd entry for this uid (a container run with an
    arbitrary ``--user``, a service started with an empty environment)."""
    import pwd

    def unknown(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", unknown)


def test_a_cache_dir_under_an_unknown_home_is_bypassed_with_a_warning(monkeypatch, tmp_path):
    # pathlib raised RuntimeError ("Could not determine home directory") out of every compile for CAKE_RT_CACHE_DIR=~/x,
    # and the default became the relative ~/.cache/cake-rt: cubins written under the working directory.
    import warnings

    import cake_rt.launch.compile as cc

    _no_home(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cc, "_cubin_cache", {})
    monkeypatch.setattr(cc, "_warned_dirs", set())
    src = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] *= 3.0f; }'
    for value in ("~/cubins", None):
        if value is None:
            monkeypatch.delenv("CAKE_RT_CACHE_DIR", raising=False)
        else:
            monkeypatch.setenv("CAKE_RT_CACHE_DIR", value)
        assert str(env.cache_dir()).startswith("~")  # named as given, never raised out of
        cc._cubin_cache.clear()
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            assert cc.compile_cubin(src, name="k.cu", target="sm_80")[:4] == b"\x7fELF"
        assert any(issubclass(w.category, cc.CacheWarning) and "home directory" in str(w.message) for w in got), \
            [str(w.message) for w in got]
    assert list(tmp_path.iterdir()) == []  # nothing made under the working directory

def test_every_switch_the_package_names_is_documented():
    root = pathlib.Path(env.__file__).parent
    named = set()
    for f in root.rglob("*.py"):
        named |= set(re.findall(r"CAKE_RT_[A-Z0-9_]+", f.read_text()))
    # Switches the kernel rewrites delete are not part of env.py.
    leaving = set()
    assert named - leaving <= set(env.SWITCHES), named - leaving - set(env.SWITCHES)
    doc = env.__doc__
    assert all(name in doc for name in env.SWITCHES)


def test_the_users_docs_list_every_switch_and_no_other():
    """docs/index.md's table of environment variables and the README's settings name exactly the switches env.py
    reads."""
    docs = pathlib.Path(env.__file__).resolve().parents[1]
    table = re.findall(r"^\| `(CAKE_RT_[A-Z0-9_]+)` \|", (docs / "docs" / "index.md").read_text(), re.M)
    assert sorted(table) == sorted(env.SWITCHES)
    settings = (docs / "README.md").read_text().split("## Settings", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"CAKE_RT_[A-Z0-9_]+", settings)) == set(env.SWITCHES)


def test_lineinfo_reaches_the_building_blocks_and_the_bench_kernels(monkeypatch):
    """CAKE_RT_LINEINFO compiles every kernel with -lineinfo: the selftest's (which scripts/sanitize runs under it) and
    the bench's too, not the ops' alone."""
    pytest.importorskip("cupy")
    from cake_rt import selftest
    from cake_rt.bench import timing
    from cake_rt.launch import compile as cc

    seen = []
    from cake_rt.launch import arch

    monkeypatch.setattr(cc, "_kernel_memo", {})
    monkeypatch.setattr(arch, "device_index", lambda device=None: 0)
    monkeypatch.setattr(cc, "_get_kernel_slow", lambda path, name, *, defines, options, device:
                        seen.append((name, tuple(options))))
    monkeypatch.setenv("CAKE_RT_LINEINFO", "1")
    selftest._k("selftest_ticket")
    timing._CudaPieces()
    assert seen == [("selftest_ticket", ("-lineinfo",)), ("cake_bench_delay", ("-lineinfo",))]
    monkeypatch.delenv("CAKE_RT_LINEINFO")
    seen.clear()
    selftest._k("selftest_ticket")
    assert seen == [("selftest_ticket", ())]


def test_a_variable_that_is_not_a_switch_is_named_on_import_and_by_info(tmp_path):
    """A misspelt or retired switch (CAKE_RT_DSA_LINEINFO, now CAKE_RT_LINEINFO) would otherwise be ignored silently."""
    import os
    import subprocess
    import sys

    root = str(__import__("pathlib").Path(__file__).resolve().parents[1])
    base = {k: v for k, v in os.environ.items() if not k.startswith("CAKE_RT_")}
    base.update(PYTHONPATH=root, CAKE_RT_CACHE_DIR=str(tmp_path))
    run = lambda code, **extra: subprocess.run([sys.executable, "-W", "always", "-c", code], env={**base, **extra},  # noqa: E731
                                               capture_output=True, text=True, timeout=120)
    out = run("import cake_rt", CAKE_RT_DSA_LINEINFO="1", CAKE_RT_QUIET="1")
    assert out.returncode == 0, out.stderr
    assert "CAKE_RT_DSA_LINEINFO is not a switch" in out.stderr and "CAKE_RT_LINEINFO" in out.stderr
    assert "CAKE_RT_QUIET" not in out.stderr.split("switches:")[0]
    assert run("import cake_rt", CAKE_RT_QUIET="1").stderr == ""
    info = run("from cake_rt.cli import main; main(['info'])", CAKE_RT_SSD_VARIANT="x")
    assert "ignored      CAKE_RT_SSD_VARIANT" in info.stdout, info.stdout + info.stderr
