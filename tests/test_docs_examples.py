"""The documentation's complete examples run as written.

A complete example is a ```python block of README.md or docs/*.md whose first line is an import; the
other blocks are call signatures or fragments (names such as ``all_gather`` left to the reader). Every
complete example must parse (CPU) and run on a GPU with its assertions and prints (GPU; the ones that
import torch skip without it).
"""
import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def complete_examples():
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for n, m in enumerate(_BLOCK.finditer(path.read_text()), 1):
            code = m.group(1)
            if code.lstrip().startswith(("import ", "from ")):
                out.append(pytest.param(code, id=f"{path.name}-{n}"))
    return out


EXAMPLES = complete_examples()


def test_the_docs_have_complete_examples():
    ids = [p.id for p in EXAMPLES]
    assert any(i.startswith("ssd.md") for i in ids) and any(i.startswith("dsa.md") for i in ids), ids


@pytest.mark.parametrize("code", EXAMPLES)
def test_example_parses(code):
    ast.parse(code)


@pytest.mark.gpu
@pytest.mark.parametrize("code", EXAMPLES)
def test_example_runs(code):
    if re.search(r"^import torch|^\s*import torch\b|, torch\b", code, re.M):
        pytest.importorskip("torch")
    exec(compile(code, "<docs example>", "exec"), {"__name__": "__docs_example__"})


def test_design_names_every_driver_call_made_through_ctypes():
    """docs/design.md says which driver entry points go through ctypes on libcuda (the rest through CuPy's bindings)
    and that cuda.bindings is not used: the package's ``libcuda().<entry>`` calls are exactly the ones it names."""
    package = ROOT / "cake_rt"
    called, imports = set(), []
    for path in package.rglob("*.py"):
        text = path.read_text()
        called |= set(re.findall(r"libcuda\(\)\.(cu\w+)", text))
        imports += re.findall(r"^\s*(?:import|from) cuda\b.*", text, re.M)
    design = (ROOT / "docs" / "design.md").read_text()
    para = design.split("The two driver entry points CuPy does not wrap", 1)[1].split("\n- ", 1)[0]
    assert called and set(re.findall(r"`(cu[A-Z]\w+)`", para)) == called, (called, para)
    assert not imports and "`cuda.bindings` (cuda-python) is not used" in para, imports


def test_the_recorded_results_the_docs_cite_exist():
    """Every ``bench/results`` file the README and docs/benchmarks.md name (a full name, a name with ``*`` or
    ``<row>`` in it, or a record's prefix, ``RECORD=bench/results/h200_2026-12-04a``) is there."""
    results = ROOT / "bench" / "results"
    names = set(results.iterdir())
    missing = []
    for doc in ("README.md", "docs/benchmarks.md", "docs/index.md", "docs/design.md", "docs/multi-gpu.md"):
        for span in re.findall(r"`([^`]+)`|\]\(([^)]+)\)", (ROOT / doc).read_text()):
            for cited in re.findall(r"(?:bench/results/)?((?:h200|dsa_h200|ssd_h200)_[\w.<>*-]+)", " ".join(span)):
                pattern = re.sub(r"<[^>]+>|\*", "*", cited) + ("*" if "." not in cited else "")
                if "*" in pattern:
                    pattern = re.escape(pattern).replace(r"\*", ".*")
                    found = any(re.fullmatch(pattern, p.name) for p in names)
                else:
                    found = (results / cited).exists()
                if not found:
                    missing.append(f"{doc}: {cited}")
    assert not missing, missing
