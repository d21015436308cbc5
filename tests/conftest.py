"""Shared pytest configuration: tests marked ``gpu`` are skipped, with a reason, when no CUDA GPU is usable;
``load_script`` gives a test a file of ``scripts/`` as a module, ``patched_kernels`` a trace script's patched copy of
the kernels, ``fake_python`` a PATH whose python3 only prints its command line."""
import functools
import importlib.machinery
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import pytest


@functools.lru_cache(maxsize=1)
def _gpu_reason():
    """Return None when a CUDA GPU can run kernels here, else the reason it cannot."""
    try:
        import cupy
    except Exception as exc:  # CuPy missing or broken: no GPU path at all
        return f"CuPy is not importable ({exc.__class__.__name__}: {exc})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"no CUDA device ({exc.__class__.__name__}: {exc})"
    if n < 1:
        return "no CUDA device"
    return None


def gpu_count():
    if _gpu_reason() is not None:
        return 0
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


def pytest_collection_modifyitems(config, items):
    reason = _gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"GPU test skipped: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def script_help():
    """``script_help(name)``: the stdout of ``scripts/<name> --help`` run in a fresh interpreter (it must exit 0)."""

    def run(name: str) -> str:
        path = pathlib.Path(__file__).resolve().parents[1] / "scripts" / name
        out = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    return run


@pytest.fixture
def fake_python(tmp_path):
    """``fake_python(suite_sleep_s=0)``: a PATH whose ``python3`` only prints ``fake python3`` and its arguments (a
    ``-m pytest`` run sleeps ``suite_sleep_s`` first), for testing the device scripts' command lines on the CPU."""

    def make(suite_sleep_s: float = 0) -> str:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        fake = bin_dir / "python3"
        fake.write_text('#!/bin/sh\ncase "$*" in *"-m pytest"*) sleep %s ;; esac\necho "fake python3 $*"\n'
                        % suite_sleep_s)
        fake.chmod(0o755)
        return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"

    return make


@pytest.fixture
def load_script():
    """``load_script(name)``: the file ``scripts/<name>`` (no ``.py`` needed) loaded as a module, ``main`` not run."""

    def load(name: str):
        path = pathlib.Path(__file__).resolve().parents[1] / "scripts" / name
        loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), str(path))
        mod = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
        loader.exec_module(mod)
        return mod

    return load


@pytest.fixture
def patched_kernels(tmp_path):
    """``patched_kernels(patches, *parts)``: the kernel folders ``parts`` (e.g. "ssd", "common": a kernel includes
    ../common, so the layout is kept) copied under ``tmp_path`` with ``patches`` (kernel file relative to the kernels'
    root -> its text patch, a trace script's ``PATCHES``) applied; returns ``tmp_path``."""

    def make(patches, *parts):
        root = pathlib.Path(__file__).resolve().parents[1] / "cake_rt" / "kernels"
        for part in parts:
            shutil.copytree(root / part, tmp_path / part)
        for rel, patch in patches.items():
            f = tmp_path / rel
            f.write_text(patch(f.read_text()))
        return tmp_path

    return make
