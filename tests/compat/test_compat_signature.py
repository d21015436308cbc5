"""The drop-in's signature is mamba_ssm's, parameter for parameter and default for default (CPU: read from the
sources, so neither torch nor mamba_ssm needs to import). Skips where mamba_ssm's source is not around
(scripts/prepare-peers puts it in .peers/)."""
import ast
import importlib.util
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
REL = pathlib.Path("mamba_ssm/ops/triton/ssd_combined.py")


def _peer_source():
    for base in [ROOT / ".peers", *map(pathlib.Path, sys.path)]:
        if (base / REL).is_file():
            return base / REL
    spec = importlib.util.find_spec("mamba_ssm")
    if spec is not None and spec.submodule_search_locations:
        p = pathlib.Path(list(spec.submodule_search_locations)[0]).parent / REL
        if p.is_file():
            return p
    return None


def _signature(path, name):
    tree = ast.parse(pathlib.Path(path).read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args]
    defaults = [ast.unparse(d) for d in a.defaults]
    return names, defaults, [x.arg for x in a.kwonlyargs]


def test_same_signature_as_mamba_ssm():
    peer = _peer_source()
    if peer is None:
        pytest.skip("mamba_ssm's source not found (scripts/prepare-peers builds .peers/)")
    ours = _signature(ROOT / "cake_rt/compat/mamba_ssm.py", "mamba_chunk_scan_combined")
    theirs = _signature(peer, "mamba_chunk_scan_combined")
    assert ours == theirs


def test_torch_is_not_a_dependency():
    text = (ROOT / "pyproject.toml").read_text()
    deps = text.split("dependencies = [", 1)[1].split("]", 1)[0]
    assert "torch" not in deps and "cupy" not in deps  # CuPy comes with exactly one of the CUDA extras
