"""Rules of the architecture contract (``/work/shared/spec/architecture.md``) that no other test held: each test here
fails when its rule is broken (review31's sweep of the contract; the others are listed in docs/reliability.md)."""
import ast
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "cake_rt"


def test_no_package_module_imports_the_top_level_bench_folder():
    """"A package module never imports the top-level ``bench/`` folder: a user's ``pip install cake-rt`` (not
    editable) must get a working ``cake-rt bench``." The package's own ``cake_rt.bench`` is imported as that (absolute or
    relative), never as a top-level ``bench`` module, and no module reaches the repository's folder by path."""
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            bad += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names if n.split(".")[0] == "bench"]
        # the repository's folder by path: a parent of the package, then bench (bench/results, bench/peers, ...)
        for m in re.finditer(r"parents?\[\d\]\s*/\s*[\"']bench|\.\./bench|[\"']bench/(results|peers|ab)", text):
            bad.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
    assert not bad, bad


def test_kernel_sources_include_no_toolkit_headers():
    """"Keep kernel sources self-contained (no CUDA toolkit headers)": every ``#include`` of a kernel file is a quoted
    path inside ``cake_rt/kernels/`` (inlined by ``compile.load_source``), never an angle-bracket header (cuda_bf16.h,
    cooperative_groups.h, ...), whose text must match the NVRTC version and costs ~0.8 s a compile."""
    bad = []
    for path in sorted((PACKAGE / "kernels").rglob("*")):
        if path.suffix not in (".cu", ".cuh", ".h"):
            continue
        for no, line in enumerate(path.read_text().splitlines(), 1):
            m = re.match(r"\s*#\s*include\s*(.*)", line)
            if m and not re.fullmatch(r'"[^"<>]+"\s*(//.*)?', m.group(1).strip()):
                bad.append(f"{path.relative_to(ROOT)}:{no}: {line.strip()}")
            elif m:
                name = m.group(1).strip().split('"')[1]
                if not ((path.parent / name).is_file() or (PACKAGE / "kernels" / name).is_file()):
                    bad.append(f"{path.relative_to(ROOT)}:{no}: {name} is not a file of the package")
    assert not bad, bad


STATES_SCRIPT = r'''
from cake_rt.launch import streams

owners = [bytearray(64) for _ in range(streams.MAX_STREAM_STATES + 9)]
first = streams.stream_state(0, id(owners[0]))
streams.begin_call([first])  # a call of the first stream still in flight when its state is evicted
made = [first] + [streams.stream_state(0, id(o)) for o in owners[1:]]
assert len(streams.stream_states()) == streams.MAX_STREAM_STATES, len(streams.stream_states())
assert all(st.retired for st in made[:9]) and not any(st.retired for st in made[9:])
assert streams.retired_count() == 1  # the first waits for its call; the others had none: freed
streams._drop_inflight([first])  # its call ends (end_call's last step; no event to record here)
assert streams.collect() == 0
print("ok")
'''


def test_per_stream_states_are_bounded():
    """"Per-stream state is released when its stream is gone, or bounded": a process that calls on more streams than
    ``MAX_STREAM_STATES`` keeps that many states (the least recently used ones retired), and an evicted state whose call
    is still in flight waits for it before it is freed."""
    r = subprocess.run([sys.executable, "-c", STATES_SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
