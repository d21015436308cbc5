"""The chunk-parallel grid a plan launches is co-resident for the program it launches (GPU).

The planner measures the cooperative capacity on the chunk-parallel program of one item a tile (``_plan_uncached``)
and then launches that grid on a variant of it: a phase-3 split (SSD_ROWS 2 or 4, SSD_COLS) or the walk schedule
(SSD_WALK). The shared memory of a split is the same and the walk's a little larger, but the registers ptxas gives
each variant are its own: a variant of lower occupancy would make ``PackedLaunch`` refuse the grid, and a
``family="auto"`` call would raise a ``CooperativeLaunchError`` instead of falling back to the exact scan (the
architecture contract: auto falls back where a cooperative launch is impossible). On the CPU the sm_90a variants of
the walk cases read 128 registers each (launch bounds of two 256-thread CTAs an SM), so this is expected to pass.
"""
import pytest

from cake_rt.ops import ssd as ops

pytestmark = pytest.mark.gpu


def _variants(defs: dict, chunk: int):
    for rows in ops.ROW_PARTS:
        if rows <= chunk // ops.SUB:
            yield {**defs, "SSD_ROWS": rows, "SSD_COLS": ops.col_parts(defs["SSD_N"], rows)}
    if defs["SSD_WG"] and defs["SSD_HB"] == 1 and defs["SSD_N"] <= 128:
        yield {**defs, "SSD_WALK": 1}


@pytest.mark.parametrize("case", sorted(ops._WALK_CASES | {(0, 2, 2, 64, 64, 256, 4), (2, 2, 2, 64, 64, 256, 4),
                                                           (1, 2, 2, 64, 128, 256, 8)}))
def test_every_variant_holds_the_grid_measured_on_the_one_item_program(case):
    from cake_rt.launch.arch import device_info
    from cake_rt.launch.compile import get_kernel
    from cake_rt.launch.grid import cooperative_capacity

    info = device_info()
    try:
        base = ops.program_defines(*case, target=info.target, family="chunkpar",
                                   smem=(info.smem_per_block_optin, info.smem_per_sm))
    except ValueError:
        pytest.skip(f"no program of {case} fits this GPU's shared memory")
    itemsize = 4 if case[0] == 2 else 2

    def capacity(defs):
        k = get_kernel(ops.KERNEL_PATH, "ssd_chunkpar", defines=defs)
        return cooperative_capacity(k, ops.cta_threads(defs), ops.program_smem(itemsize, defs))

    measured = capacity(base)
    for defs in _variants(base, case[5]):
        got = capacity(defs)
        assert got >= measured, (case, {k: v for k, v in defs.items() if k in ("SSD_ROWS", "SSD_COLS", "SSD_WALK")},
                                 got, measured)
