"""CPU: the host's mirror of the kernel's shared-memory layout (``ops/dsa.py _layout``: a block's dynamic shared memory
and the merge buffer's keys) equals ``layout.cuh``'s ``Layout`` for every program configuration, read by NVRTC from the
header itself (a probe of static_asserts; no GPU needed). A mirror that drifts would size a launch too small (memcheck
would see it only on the shapes it runs) or the merge buffer past its room."""
import pytest

from cake_rt.launch.compile import available_targets, compile_report, load_source
from cake_rt.ops import dsa

TARGETS = [t for t in ("sm_90a", "sm_80", "sm_86") if t in available_targets()]

_PROBE = """
static_assert(dsa::Layout::bytes + (dsa::WG ? 1024 : 0) == {smem}, "dynamic shared memory: host {smem}");
static_assert(dsa::Layout::merge_keys == {merge_keys}, "merge buffer keys: host {merge_keys}");
static_assert(dsa::Layout::bytes <= {optin}, "the block fits the device");
static_assert(dsa::RFLOOR_TILES == {rfloor_tiles}, "a part that raises its floor: host {rfloor_tiles} tiles or more");
extern "C" __global__ void layout_probe(int* out) {{ out[0] = dsa::Layout::bytes; }}
"""


def _configs(target):
    """Every distinct configuration the host picks for ``target`` (H 8 .. 128, D 64 / 128; on sm_90a the mma.sync
    loop too, the CAKE_RT_DSA_MMA=sync program)."""
    smem = dsa.TARGET_SMEM[target]
    loops = (True, False) if target == "sm_90a" else (False,)
    seen = {}
    for wg in loops:
        for H in range(8, 129, 8):
            for D in (64, 128):
                cfg = dsa._try_config(H, D, smem, wg)
                if cfg is not None:
                    seen.setdefault(tuple(sorted(cfg.defines.items())), (cfg, smem))
    return list(seen.values())


@pytest.mark.parametrize("target", TARGETS)
def test_host_layout_mirrors_the_kernel(target):
    header = load_source("dsa/layout.cuh")
    configs = _configs(target)
    assert len(configs) >= 16
    for cfg, optin in configs:
        src = header + _PROBE.format(smem=cfg.smem_scan, merge_keys=cfg.merge_keys, optin=optin,
                                    rfloor_tiles=dsa.RFLOOR_TILES)
        # a mismatch is a CompileError whose NVRTC log names the static_assert
        rep = compile_report(src, name="layout_probe.cu", target=target, defines=cfg.defines)
        assert set(rep) == {"layout_probe"}, (cfg, rep)
