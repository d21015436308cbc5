"""The bench's own kernel (the side-stream spinner) compiles for every target, without spills; its
shared-memory request holds one SM per CTA (CPU only: NVRTC needs no GPU)."""
import pytest

from cake_rt.bench.spinner import holder_smem_bytes
from cake_rt.launch.compile import SUPPORTED_TARGETS, compile_report, load_source


@pytest.mark.parametrize("target", SUPPORTED_TARGETS)
def test_spinner_compiles(target):
    rep = compile_report(load_source("bench/spin.cu"), name="spin.cu", target=target)
    r = rep["cake_bench_spin"]
    assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["stack_bytes"] == 0
    assert r["shared_bytes"] == 0  # all of its shared memory is the dynamic request made at launch
    assert r["registers"] <= 32


def test_holder_smem_more_than_half_an_sm():
    assert holder_smem_bytes(232448, 233472) == 232448  # H200: 227 KiB opt-in of 228 KiB per SM
    assert holder_smem_bytes(101376, 102400) == 101376  # sm_86/89: 99 of 100 KiB
    with pytest.raises(RuntimeError, match="half"):
        holder_smem_bytes(48 * 1024, 100 * 1024)
