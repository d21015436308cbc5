"""CPU: every DSA program the GPU tests and the bench compile (``dsa.programs``) builds for sm_90a and sm_80
without spills and with no `wgmma` serialized by ptxas (no GPU needed)."""
import pytest

from cake_rt.launch.compile import available_targets, compile_report, load_source
from cake_rt.ops import dsa

TARGETS = [t for t in ("sm_90a", "sm_80") if t in available_targets()]


@pytest.mark.parametrize("target", TARGETS)
def test_dsa_programs_compile_without_spills(target):
    progs = dsa.programs(target)
    heads = {d["DSA_H"] for _, d in progs}
    assert {8, 16, 24, 32, 48, 64, 128} <= heads
    assert any(d.get("DSA_WGMMA") for _, d in progs) == (target == "sm_90a")
    for path, defines in progs:
        rep = compile_report(load_source(path), name="indexer.cu", target=target, defines=defines)
        assert set(rep) == {"dsa_scan"}, rep
        r = rep["dsa_scan"]
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0, (target, defines, r)
        assert r["wgmma_serialized"] is None, (target, defines, r)
        assert r["stack_bytes"] == 0, (target, defines, r)
        assert 0 < r["registers"] <= 255, (target, defines, r)


# sm_86 / sm_89 (99 KiB of shared memory a block: other blocks and capacities) and sm_100a (the mma.sync loop: no wgmma
# there) run the programs of the same source; compiled here, a sample of their lists: the bench geometries (H 32 / 64,
# D 128; H 32 in both window variants) and the extreme head counts at D 64.
OTHER_TARGETS = [t for t in ("sm_86", "sm_89", "sm_100a") if t in available_targets()]
OTHER_SHAPES = {(32, 128), (64, 128), (8, 64), (128, 64)}


@pytest.mark.parametrize("target", OTHER_TARGETS)
def test_dsa_programs_compile_on_the_other_targets(target):
    progs = [(p, d) for p, d in dsa.programs(target) if (d["DSA_H"], d["DSA_D"]) in OTHER_SHAPES
             and ("DSA_WINDOWS" not in d or d["DSA_H"] == 32)]
    assert {(d["DSA_H"], d["DSA_D"]) for _, d in progs} == OTHER_SHAPES and len(progs) == 5
    assert not any(d.get("DSA_WGMMA") for _, d in progs)
    for path, defines in progs:
        rep = compile_report(load_source(path), name="indexer.cu", target=target, defines=defines)
        assert set(rep) == {"dsa_scan"}, rep
        r = rep["dsa_scan"]
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["stack_bytes"] == 0, (target, defines, r)
        assert 0 < r["registers"] <= 255, (target, defines, r)


def test_programs_match_the_configs():
    # per configuration the program of one-window units, the one of several windows (DSA_WINDOWS) and, on the wgmma
    # loop, the one-window program with the split parts' running floor (DSA_RFLOOR), nothing else
    for target in ("sm_90a", "sm_80"):
        progs = dsa.programs(target)
        for path, defines in progs:
            assert path == dsa.KERNEL_PATH
            cfg = dsa._try_config(defines["DSA_H"], defines["DSA_D"], dsa.TARGET_SMEM[target],
                                  bool(defines.get("DSA_WGMMA")))
            assert defines == cfg.program_defines(bool(defines.get("DSA_WINDOWS")), bool(defines.get("DSA_RFLOOR")))
            assert defines in cfg.program_variants()
        plain = [d for _, d in progs if "DSA_WINDOWS" not in d and "DSA_RFLOOR" not in d]
        assert [dict(d, DSA_WINDOWS=1) for d in plain] == [d for _, d in progs if "DSA_WINDOWS" in d]
        assert [dict(d, DSA_RFLOOR=1) for d in plain if "DSA_WGMMA" in d] == [d for _, d in progs if "DSA_RFLOOR" in d]
        assert any("DSA_RFLOOR" in d for _, d in progs) == (target == "sm_90a")


def test_a_plan_picks_the_program_of_its_windows():
    cfg = dsa._try_config(64, 128, dsa.TARGET_SMEM["sm_90a"], True)
    for T, Tkv, windows in ((8192, 8192, False), (4096, 65536, False), (8192, 131072, True), (4, 200_000, False)):
        plan = dsa.plan_units(T, Tkv, None, None, None, True, 2048, cfg.BQ, cfg.TILE, 132)
        assert plan.windows == windows, (T, Tkv)  # (4 queries: split over the SMs, parts of one window)
        assert ("DSA_WINDOWS" in cfg.program_defines(plan.windows, plan.running_floor)) == windows


def test_a_plan_picks_the_running_floor_where_a_one_query_part_has_enough_tiles():
    # The suite's split tails: 4 queries over 132 SMs, one-query parts of ceil(4 x tiles / 132) tiles: A3 (41,986 keys)
    # 10, A2 8, A1 6. Only parts of RFLOOR_TILES or more raise their floor; the wgmma loop's one-window program only.
    wg = dsa._try_config(32, 128, dsa.TARGET_SMEM["sm_90a"], True)
    sync = dsa._try_config(32, 128, dsa.TARGET_SMEM["sm_80"], False)
    for T, Tkv, sms, key_split, want in ((4, 41986, 132, None, True), (4, 30466, 132, None, False),
                                         (4, 22018, 132, None, False), (4, 200_000, 132, None, True),
                                         (4, 41986, 264, None, False),  # parts of 5 tiles on twice the SMs
                                         (8192, 8192, 132, None, False),  # blocks of 4 queries, not split
                                         (300, 8192, 132, 1280, False),  # split blocks of 4 queries
                                         (1, 8192, 132, 1280, True), (1, 8192, 132, 1152, False),
                                         (1, 200_000, 132, 100_000, False)):  # parts over two windows
        plan = dsa.plan_units(T, Tkv, None, None, None, True, 2048, wg.BQ, wg.TILE, sms, key_split)
        split = plan.units[:, 7] >= 0
        tiles = -(-(plan.units[:, 6] - plan.units[:, 5]) // wg.TILE)
        assert plan.running_floor == want, (T, Tkv, sms, key_split, plan.windows, tiles[split].max())
        assert ("DSA_RFLOOR" in wg.program_defines(plan.windows, plan.running_floor)) == want
        assert "DSA_RFLOOR" not in sync.program_defines(plan.windows, plan.running_floor)


def test_one_kernel_and_no_removed_switches_in_the_source():
    src = load_source(dsa.KERNEL_PATH)
    assert "dsa_merge(" not in src and "DSA_FAST" not in src and "DSA_PROFILE" not in src
    assert src.count("__global__") == 1


def packed_args(cfg, schedule="ticket", nunits=1, ctas=1) -> list:
    """The arguments ``_DevicePlan.packed`` gives the program's kernel for a plan of ``nunits`` units on a grid of
    ``ctas`` (no GPU: PackedLaunch recorded)."""
    from types import SimpleNamespace

    from cake_rt.launch import grid

    got = []
    dp = object.__new__(dsa._DevicePlan)
    dp.plan = SimpleNamespace(nunits=nunits, topk=1, causal=True)
    dp.cfg, dp.scan, dp.grid, dp.ptr, dp._packed = cfg, None, ctas, 0, {}
    dp.maps = object() if cfg.wgmma else None
    saved = grid.PackedLaunch
    grid.PackedLaunch = lambda kernel, g, threads, args, **kw: got.extend(args)
    try:
        dp.packed(schedule)
    finally:
        grid.PackedLaunch = saved
    return got


def packed_sizes(cfg) -> list:
    """The bytes of each argument ``_DevicePlan.packed`` gives the program's kernel."""
    import numpy as np

    from cake_rt.launch.grid import Blob, Slot
    from cake_rt.launch.tensormap import MAP_BYTES

    return [8 if isinstance(a, Slot) else MAP_BYTES if isinstance(a, Blob) else np.asarray(a).itemsize
            for a in packed_args(cfg)]


def test_the_ticket_schedule_draws_only_where_units_outnumber_the_ctas():
    """use_ticket (the kernel's seventh argument): the ticket schedule draws where the plan has more units than the grid
    has CTAs; with a CTA a unit (the split tails) each CTA takes its own, as the static schedule always does."""
    cfg = dsa._try_config(32, 128, dsa.TARGET_SMEM["sm_90a"], True)
    use = lambda schedule, nunits, ctas: int(packed_args(cfg, schedule, nunits, ctas)[6])  # noqa: E731
    assert use("ticket", 133, 132) == 1 and use("ticket", 5000, 132) == 1
    assert use("ticket", 132, 132) == 0 and use("ticket", 120, 120) == 0 and use("ticket", 1, 1) == 0
    assert use("static", 5000, 132) == 0 and use("static", 132, 132) == 0


@pytest.mark.parametrize("target", TARGETS)
def test_dsa_launch_arguments_match_the_kernel(target):
    """The packed launch passes each parameter's bytes, the wgmma program's tensor map of k last."""
    for path, defines in dsa.programs(target)[:2]:
        rep = compile_report(load_source(path), name="indexer.cu", target=target, defines=defines)
        cfg = dsa._try_config(defines["DSA_H"], defines["DSA_D"], dsa.TARGET_SMEM[target],
                              bool(defines.get("DSA_WGMMA")))
        assert rep["dsa_scan"]["params"] == packed_sizes(cfg), (defines, rep["dsa_scan"]["params"])
