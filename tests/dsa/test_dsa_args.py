"""CPU tests: argument checking that needs no GPU, program selection, work planning, FLOP counts."""
import numpy as np
import pytest

from cake_rt.ops import dsa
from cake_rt.reference import dsa as ref


def test_topk_checked_first():
    with pytest.raises(ValueError, match="topk"):
        dsa.dsa_indexer_det_topk(None, None, None, 0)
    with pytest.raises(TypeError, match="topk"):
        dsa.dsa_indexer_det_topk(None, None, None, 2.0)
    with pytest.raises(TypeError, match="topk"):
        dsa.dsa_indexer_det_topk(None, None, None, True)


def test_host_arrays_refused_without_copy():
    q = np.zeros((4, 32, 128), np.float32)
    with pytest.raises(TypeError, match="q"):
        dsa.dsa_indexer_det_topk(q, q, q, 4)


def test_schedule_and_key_split_checked():
    with pytest.raises(ValueError, match="schedule"):
        dsa.dsa_indexer_det_topk(None, None, None, 4, schedule="fast")
    with pytest.raises(ValueError, match="key_split"):
        dsa.dsa_indexer_det_topk(None, None, None, 4, key_split=0)
    with pytest.raises(TypeError, match="key_split"):
        dsa.dsa_indexer_det_topk(None, None, None, 4, key_split=1.5)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(cu_seqlens_q=[0, 4]), "cu_seqlens_k"),
        (dict(cu_seqlens_k=[0, 4]), "cu_seqlens_q"),
        (dict(cu_seqlens_q=[1, 4], cu_seqlens_k=[0, 9]), "cu_seqlens_q"),
        (dict(cu_seqlens_q=[0, 3, 2, 4], cu_seqlens_k=[0, 3, 6, 9]), "cu_seqlens_q"),
        (dict(cu_seqlens_q=[0, 4], cu_seqlens_k=[0, 8]), "cu_seqlens_k"),
        (dict(cu_seqlens_q=[0, 5], cu_seqlens_k=[0, 9]), "cu_seqlens_q"),
        (dict(cu_seqlens_q=[0, 2, 4], cu_seqlens_k=[0, 9]), "cu_seqlens_k"),
        (dict(cu_seqlens_q=[4], cu_seqlens_k=[9]), "cu_seqlens_q"),
        (dict(cu_seqlens_q=[0, 2, 4], cu_seqlens_k=[0, 3, 9], q_causal_offsets=[0]), "q_causal_offsets"),
        (dict(q_causal_offsets=[0], causal=False), "q_causal_offsets"),
        (dict(cu_seqlens_q=[0.0, 4.0], cu_seqlens_k=[0, 9]), "cu_seqlens_q"),
        (dict(causal=1), "causal"),
    ],
)
def test_metadata_errors_name_the_argument(kw, match):
    args = dict(cu_seqlens_q=None, cu_seqlens_k=None, q_causal_offsets=None, causal=True)
    args.update(kw)
    with pytest.raises((ValueError, TypeError), match=match):
        dsa._check_metadata(args["cu_seqlens_q"], args["cu_seqlens_k"], args["q_causal_offsets"],
                            args["causal"], 4, 9)


def test_metadata_accepts_good_values():
    cu_q, cu_k, off = dsa._check_metadata([0, 2, 4], np.array([0, 3, 9]), [-1, 5], True, 4, 9)
    assert cu_q.dtype == np.int32 and cu_k.tolist() == [0, 3, 9] and off.tolist() == [-1, 5]


@pytest.mark.parametrize("smem,target", [(232448, "sm_90a"), (232448, None), (166912, None), (101376, None)])
@pytest.mark.parametrize("H", dsa.HEADS)
@pytest.mark.parametrize("D", [64, 128])
def test_config_fits_and_holds_topk(smem, target, H, D):
    cfg = dsa.config_for(H, D, smem, target)
    assert cfg.wgmma == (target == "sm_90a")
    # sm_90a is warp-specialized: product + selection warpgroups; the compactions' own histograms only there
    assert cfg.threads == (2 if cfg.wgmma else 1) * dsa.SCAN_THREADS
    # joint compactions (CB > 1) on the wgmma program only: the whole block at the largest capacity, or pairs
    assert cfg.CB == 1 or (cfg.wgmma and cfg.BQ <= 4 and (cfg.CB == cfg.BQ and cfg.CAP == dsa.CAP_MAX or cfg.CB == 2))
    assert cfg.CB == 1 or cfg.CAP >= dsa.CAP_MIN
    assert cfg.defines.get("DSA_CB", 1) == cfg.CB
    # two product passes (256 pairs: four or two queries a key tile) on the wgmma program at H = 64 and 128
    two_pass = cfg.wgmma and H in (64, 128)
    assert 1 <= cfg.BQ <= 16 and cfg.BQ * H <= (2 if two_pass else 1) * dsa.PAIRS and cfg.TILE in (64, 128)
    assert not two_pass or cfg.BQ * H == 2 * dsa.PAIRS
    assert cfg.smem_scan <= smem
    assert cfg.CAP % dsa.SCAN_THREADS == 0 and 2 * cfg.TILE <= cfg.CAP <= dsa.CAP_MAX
    assert cfg.merge_keys >= 2 * dsa.MERGE_ROUND
    for topk in (1, 7, 64, 1000, 2048):
        assert dsa.select_config(H, D, topk, smem, target) == cfg  # the program never depends on topk
    assert cfg.max_topk >= 2048 and dsa.max_topk(H, D, smem, target) == cfg.max_topk
    assert cfg.CAP - cfg.TILE >= cfg.max_topk                 # a compaction always frees room for a tile
    assert cfg.merge_keys >= cfg.max_topk + dsa.MERGE_ROUND   # the merge keeps topk and appends a round
    with pytest.raises(ValueError, match="topk"):
        dsa.select_config(H, D, cfg.max_topk + 1, smem, target)


def test_bench_geometries_keep_their_blocks():
    # H = 32 / 64 at D = 128 on the H200: 128 (query, head) pairs per block at H = 32, 256 (two product passes a key
    # tile, one key buffer) at H = 64, as measured (docs/dsa.md, round 31).
    c32, c64 = dsa.config_for(32, 128, 232448, "sm_90a"), dsa.config_for(64, 128, 232448, "sm_90a")
    assert (c32.BQ, c32.CAP, c32.CB) == (4, 4096, 2)  # 6-byte candidates: the register reach, compactions in pairs
    assert (c64.BQ, c64.CAP, c64.CB) == (4, 4096, 2)


@pytest.mark.parametrize("H,D", [(0, 128), (4, 128), (12, 64), (136, 128), (256, 64), (32, 96), (32, 256)])
def test_unsupported_heads_and_dims_name_q(H, D):
    with pytest.raises(ValueError, match="q:"):
        dsa.config_for(H, D, 232448, "sm_90a")


def _units_cover(plan, T, Tkv, cu_q, cu_k, off, causal):
    """Every query's visible keys are covered exactly once by the units of its block."""
    start, end = ref.visible_key_ranges(T, Tkv, cu_q, cu_k, off, causal)
    cover = {}
    for (q0, nq, ks0, lenk, pbase, klo, khi, slot, mblock, slot0, nparts, _) in plan.units.tolist():
        for t in range(q0, q0 + nq):
            cover.setdefault(t, []).append((klo, khi, slot, mblock, slot0, nparts))
    assert sorted(cover) == list(range(T))
    for t in range(T):
        parts = sorted(cover[t])
        assert parts[0][0] == start[t]
        for a, b in zip(parts, parts[1:]):
            assert a[1] == b[0]
        assert parts[-1][1] >= end[t]
        if len(parts) == 1:
            assert parts[0][2:] == (-1, -1, -1, 1)
        else:  # parts in key order = consecutive slots from slot0; one arrival word per block
            slot0 = parts[0][4]
            assert [p[2] for p in parts] == list(range(slot0, slot0 + len(parts)))
            assert all(p[4] == slot0 and p[5] == len(parts) and p[3] == parts[0][3] for p in parts)
            assert 0 <= parts[0][3] < plan.nsplit


@pytest.mark.parametrize("key_split", [None, 1, 128, 300, 10 ** 6])
def test_plan_covers_keys_and_orders_longest_first(key_split):
    cu_q, cu_k, off = [0, 7, 7, 40], [0, 100, 130, 1000], [93, 0, 500]
    T, Tkv = 40, 1000
    plan = dsa.plan_units(T, Tkv, cu_q, cu_k, off, True, 16, 4, 128, 132, key_split)
    _units_cover(plan, T, Tkv, cu_q, cu_k, off, True)
    span = plan.units[:, 6] - plan.units[:, 5]
    assert np.all(np.diff(span) <= 0)
    assert plan.workspace_bytes >= plan.nslots * plan.BQ * 16 * 8
    assert plan.ticket_words >= 4 + plan.nsplit * dsa.split_words(plan.BQ)
    assert len(set(plan.units[plan.units[:, 8] >= 0, 8].tolist())) == plan.nsplit


def test_plan_splits_few_long_blocks_and_not_many():
    # A1: 4 queries; each becomes its own block (the merges of the 4 run in parallel), split over the SMs.
    a1 = dsa.plan_units(4, 22018, None, None, None, True, 2048, 4, 128, 132)
    assert a1.nslots > 1 and a1.nsplit == 4 and a1.nunits >= 66
    assert np.all(a1.units[:, 1] == 1)
    _units_cover(a1, 4, 22018, None, None, None, True)
    s1 = dsa.plan_units(8192, 8192, None, None, None, True, 2048, 4, 128, 132)
    assert s1.nslots == 0 and s1.nsplit == 0 and s1.workspace_bytes == 0 and s1.nunits == 2048
    assert s1.units[0, 6] - s1.units[0, 5] == 8192  # the longest unit first
    # many queries, a forced split: blocks keep BQ queries
    ks = dsa.plan_units(1000, 5000, None, None, None, False, 64, 4, 128, 132, key_split=1000)
    assert ks.nsplit == 250 and int(ks.units[:, 1].max()) == 4
    _units_cover(ks, 1000, 5000, None, None, None, False)


def test_units_span_at_most_max_span():
    # a candidate's id is a 16-bit offset in one of its unit's MAX_WIN windows: rows up to MAX_SPAN keys run unsplit
    # (a 128K-key prefill needs no workspace), longer rows become parts, merged
    assert dsa.MAX_SPAN == dsa.MAX_WIN * dsa.WIN_KEYS == 1 << 20
    for T in (8192, 16384):
        prefill = dsa.plan_units(T, 131072, None, None, None, True, 2048, 4, 128, 132)
        assert prefill.nsplit == 0 and prefill.workspace_bytes == 0
        _units_cover(prefill, T, 131072, None, None, None, True)
    for T, Tkv, causal in ((300, dsa.MAX_SPAN + 1, False), (140, 2 * dsa.MAX_SPAN + 7, True)):
        plan = dsa.plan_units(T, Tkv, None, None, None, causal, 2048, 4, 128, 132)
        assert int((plan.units[:, 6] - plan.units[:, 5]).max()) <= dsa.MAX_SPAN and plan.nsplit > 0
        _units_cover(plan, T, Tkv, None, None, None, causal)


def test_visible_pairs_match_the_benchmark_table():
    assert dsa.visible_pairs([0, 8192], [0, 8192]) == 33_558_528
    assert dsa.visible_pairs([0, 4096], [0, 65536]) == 260_048_896
    assert dsa.visible_pairs([0, 4], [0, 22018]) == 88_066
    assert dsa.visible_pairs([0, 3], [0, 5], [-2]) == 1
    assert dsa.visible_pairs([0, 3], [0, 5], None, causal=False) == 15
    f, b = dsa.dsa_flops_bytes(8192, 8192, 32, 128, 2048, 33_558_528)
    assert f >= 2 * 32 * 128 * 33_558_528 and b > 0


@pytest.mark.parametrize("schedule", ["ticket", "static"])
def test_launch_reads_ticket_words_only_to_draw_or_merge(schedule):
    """A launch reads ticket words to draw units (the ticket schedule with fewer CTAs than units) and for the split
    blocks' arrival records; other plans get none (a call allocates and zeroes nothing for them)."""
    rows = (  # (plan, grid): no split with more units than CTAs, no split with a CTA a unit, split tails, no units
        (dsa.plan_units(8192, 8192, None, None, None, True, 2048, 4, 128, 132), 132),
        (dsa.plan_units(128, 1024, None, None, None, True, 2048, 4, 128, 132), 132),
        (dsa.plan_units(4, 22018, None, None, None, True, 2048, 4, 128, 132), 132),
        (dsa.plan_units(0, 4096, None, None, None, True, 2048, 4, 128, 132), 1),
    )
    got = []
    for plan, grid in rows:
        dp = object.__new__(dsa._DevicePlan)  # the rule reads the plan and the grid alone (no GPU to load a program)
        dp.plan, dp.grid = plan, min(grid, max(1, plan.nunits))
        got.append((dp.draws(schedule), dp.reads_words(schedule)))
    assert rows[0][0].nunits > 132 and rows[1][0].nunits <= 132 and rows[2][0].nsplit > 0 and rows[3][0].nunits == 0
    ticket = schedule == "ticket"
    assert got == [(ticket, ticket), (False, False), (False, True), (False, False)]
