"""CPU: ``scripts/ssd-phase-trace`` patches the chunk-parallel kernel by text anchors; the patched source must still
find every anchor in today's kernel and compile for sm_90a (no GPU needed)."""
import pathlib

import pytest

from cake_rt.launch.compile import available_targets, compile_report, load_source
from cake_rt.ops import ssd

KERNELS = pathlib.Path(ssd.__file__).resolve().parents[1] / "kernels"


def test_every_stamp_finds_its_anchor(load_script):
    trace = load_script("ssd-phase-trace")
    out = "".join(patch((KERNELS / rel).read_text()) for rel, patch in trace.PATCHES.items())
    for k, name in enumerate(trace.STAMPS):
        assert f"ssd_tr({k});" in out or f"ssd_tr_by({k}, SSD_THREADS);" in out, name


@pytest.mark.skipif("sm_90a" not in available_targets(), reason="NVRTC without sm_90a")
def test_the_patched_kernel_compiles(patched_kernels, load_script):
    tmp_path = patched_kernels(load_script("ssd-phase-trace").PATCHES, "ssd", "common")
    kfile = tmp_path / "ssd" / "ssd_combined.cu"
    defs = next(d for _, d in ssd.programs("sm_90a") if d["SSD_WG"] and d["SSD_FAMILY"] == 1)
    text = load_source(kfile)
    assert "ssd_trace[" in text
    rep = compile_report(text, name="ssd_combined.cu", target="sm_90a", defines=defs)
    assert set(rep) == {"ssd_chunkpar"}


@pytest.mark.parametrize("script", ["ssd-phase-trace", "ssd-step-trace"])  # the DSA ones parse with argparse
def test_the_trace_scripts_print_their_help(script):
    # run_patched's -h / --help: the script's docstring, before any copy or GPU work
    import subprocess
    import sys

    path = pathlib.Path(__file__).resolve().parents[2] / "scripts" / script
    for flag in ("-h", "--help"):
        r = subprocess.run([sys.executable, str(path), flag], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() and r.stdout.strip().splitlines()[0] in path.read_text(), r.stdout
