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
