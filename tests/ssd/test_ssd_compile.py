"""Every SSD program the GPU tests and the bench suite use (``cake_rt.ops.ssd.programs``) compiles with NVRTC
for sm_90a and sm_80 (no GPU needed), with its resource report read from ptxas: its family's kernel alone, its
spills under a ceiling (ptxas keeps long-lived values of the kernels in local memory: on sm_90a, where the math
warpgroup runs at 216 registers, up to 132 bytes of spill stores and 252 of loads, the dstate-256 programs most; the
split programs are in the list with the others, every SSD_ROWS a chunk allows (with its SSD_COLS); the ceiling is ``MAX_SPILL`` bytes of stores and twice that of loads, 136 / 272 on sm_90a and 64 / 128 on sm_80: a change
that spills more fails here), no ``wgmma`` that ptxas serialized (C7512: every product waits for the one before),
no static shared memory
(the host sizes it), the dynamic layout fits the target's opt-in limit, and the kernel's parameters are the
arguments the host packs for it (``ops.ssd._packed``: the tensor maps of the sm_90a programs last)."""
import numpy as np
import pytest

from cake_rt.launch.compile import available_targets, compile_report, load_source
from cake_rt.ops import ssd as ops

TARGETS = ("sm_90a", "sm_80")
MAX_SPILL = {"sm_90a": 136, "sm_80": 64}  # bytes of spill stores; loads: twice that
CASES = [(target, i) for target in TARGETS for i in range(len(ops.programs(target)))]


@pytest.mark.parametrize("target, index", CASES)
def test_program_compiles_without_spills(target, index):
    path, defs = ops.programs(target)[index]
    rep = compile_report(load_source(path), name="ssd_combined.cu", target=target, defines=defs)
    assert set(rep) == {ops.KERNELS[defs["SSD_FAMILY"]]}
    for name, r in rep.items():
        assert r["spill_stores"] <= MAX_SPILL[target] and r["spill_loads"] <= 2 * MAX_SPILL[target], (defs, name, r)
        assert r["shared_bytes"] == 0, (defs, name, r)  # all shared memory is dynamic (sized by the host)
        assert r["wgmma_serialized"] is None, (defs, name, r)  # each wgmma waiting for the last: the products' time
    itemsize = 4 if defs["SSD_T"] == 2 else 2
    optin = ops._SMEM[target][0]
    wg = bool(defs["SSD_WG"])
    assert wg == (target == "sm_90a" and itemsize == 2)  # the warpgroup path: sm_90a, 16-bit inputs
    assert ops.program_smem(itemsize, defs) <= optin
    (r,) = rep.values()
    assert r["params"] == packed_sizes(defs), (defs, r["params"])


# sm_86 / sm_89 (99 KiB of shared memory a block: the shapes that fit, in smaller layouts) and sm_100a (the mma.sync
# path: no wgmma there) run the programs of the same source; compiled here, a sample of their lists under sm_80's
# ceiling: the first program of each (family, input dtype), and of each family at chunk 256.
OTHER_TARGETS = [t for t in ("sm_86", "sm_89", "sm_100a") if t in available_targets()]


def other_target_programs(target) -> list:
    out, seen = [], set()
    for path, d in ops.programs(target):
        for key in ((d["SSD_FAMILY"], "T", d["SSD_T"]), (d["SSD_FAMILY"], "Q", d["SSD_Q"]) if d["SSD_Q"] == 256 else None):
            if key is not None and key not in seen:
                seen.add(key)
                out.append((path, d))
                break
    return out


@pytest.mark.parametrize("target", OTHER_TARGETS)
def test_programs_compile_on_the_other_targets(target):
    progs = other_target_programs(target)
    assert {d["SSD_FAMILY"] for _, d in progs} == {0, 1} and {d["SSD_T"] for _, d in progs} == {0, 1, 2}
    assert {d["SSD_FAMILY"] for _, d in progs if d["SSD_Q"] == 256} == {0, 1}
    assert not any(d["SSD_WG"] for _, d in progs)
    optin = ops._SMEM.get(target, ops._SMEM["sm_90a"])[0]
    for path, defs in progs:
        rep = compile_report(load_source(path), name="ssd_combined.cu", target=target, defines=defs)
        assert set(rep) == {ops.KERNELS[defs["SSD_FAMILY"]]}
        for name, r in rep.items():
            assert r["spill_stores"] <= MAX_SPILL["sm_80"] and r["spill_loads"] <= 2 * MAX_SPILL["sm_80"], (defs, r)
            assert r["shared_bytes"] == 0, (defs, name, r)
        assert ops.program_smem(4 if defs["SSD_T"] == 2 else 2, defs) <= optin


def test_programs_of_a_small_shared_memory_target_skip_the_shapes_that_do_not_fit():
    """sm_86 / sm_89 hold 99 KiB a block: the list keeps the cases that fit (what ``cake-rt warmup --target sm_86``
    compiles), where a shape that fits nowhere raised for the whole list."""
    for target in ("sm_86", "sm_89"):
        progs = ops.programs(target)
        assert progs and all(ops.program_smem(4 if d["SSD_T"] == 2 else 2, d) <= ops._SMEM[target][0]
                             for _, d in progs)
        assert not any(d["SSD_N"] == 256 and d["SSD_Q"] == 256 and d["SSD_T"] != 2 for _, d in progs)
        assert len(progs) < len(ops.programs("sm_80"))


def packed_sizes(defs: dict) -> list:
    """The bytes of each argument ``ops.ssd._packed`` gives the program's kernel (no GPU: PackedLaunch recorded)."""
    from types import SimpleNamespace

    from cake_rt.launch.grid import Blob, Slot
    from cake_rt.launch.tensormap import MAP_BYTES

    got = []

    def record(kernel, grid, block, args, **kw):
        got.extend(args)

    p = SimpleNamespace(scalars=(np.int32(0),) * 5 + (np.float32(0),) * 2)  # nseg .. flags, lo, hi (ops.ssd._validate)
    maps = object() if defs["SSD_WG"] else None
    coop = defs["SSD_FAMILY"] == 1
    saved = ops.PackedLaunch
    ops.PackedLaunch = record
    try:
        ops._packed(p, None, 1, 0, 256, coop, maps, *((np.int32(1),) if coop else ()))
    finally:
        ops.PackedLaunch = saved
    return [8 if isinstance(a, Slot) else MAP_BYTES if isinstance(a, Blob) else a.itemsize for a in got]
