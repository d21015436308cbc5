"""CPU: ``scripts/ssd-phase-trace`` patches the chunk-parallel kernel by text anchors; the patched source must still
find every anchor in today's kernel and compile for sm_90a (no GPU needed)."""
import pathlib

import pytest

from cake_rt.launch.compile import available_targets, compile_report, load_source
from cake_rt.ops import ssd

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ssd-phase-trace"


def _patch():
    ns = {"__name__": "ssd_phase_trace"}
    exec(compile(SCRIPT.read_text(), str(SCRIPT), "exec"), ns)
    return ns["patch"], ns["STAMPS"]


def test_every_stamp_finds_its_anchor():
    patch, stamps = _patch()
    src = (pathlib.Path(ssd.__file__).resolve().parents[1] / "kernels" / "ssd" / "ssd_combined.cu").read_text()
    out = patch(src)
    for k in range(len(stamps)):
        assert f"ssd_tr({k});" in out, stamps[k]


@pytest.mark.skipif("sm_90a" not in available_targets(), reason="NVRTC without sm_90a")
def test_the_patched_kernel_compiles(tmp_path, monkeypatch):
    patch, _ = _patch()
    kdir = pathlib.Path(ssd.__file__).resolve().parents[1] / "kernels" / "ssd"
    for f in kdir.iterdir():
        (tmp_path / f.name).write_text(f.read_text())
    (tmp_path / "ssd_combined.cu").write_text(patch((kdir / "ssd_combined.cu").read_text()))
    common = tmp_path.parent / "common"
    common.mkdir(exist_ok=True)
    for f in (kdir.parent / "common").iterdir():
        (common / f.name).write_text(f.read_text())
    path, defs = next((p, d) for p, d in ssd.programs("sm_90a") if d.get("SSD_WG"))
    text = load_source(tmp_path / "ssd_combined.cu")
    assert "ssd_trace[" in text
    rep = compile_report(text, name="ssd_combined.cu", target="sm_90a", defines=defs)
    assert {"ssd_chunkpar", "ssd_exact"} <= set(rep)
