"""CPU tests of ssd_combined's argument checking, segment tables and the selection rule (no GPU needed:
a small stand-in for device arrays goes through the same checks)."""
import math

import numpy as np
import pytest

import cake_rt.ops.ssd as ops
from cake_rt.interop import BF16, FP16, FP32


class FakeDev:
    """Just enough of a CuPy array for the validation path: dtype, shape, ndim, flags, device, nbytes."""

    class _Flags:
        def __init__(self, c):
            self.c_contiguous = c

    class _Device:
        id = 0

    def __init__(self, shape, dtype, contiguous=True):
        self.shape = tuple(shape)
        self.ndim = len(shape)
        self.dtype = np.dtype(dtype)
        self.flags = self._Flags(contiguous)
        self.device = self._Device()
        self.strides = ()
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize


@pytest.fixture(autouse=True)
def _fake_device(monkeypatch):
    def dev(v, name):
        if isinstance(v, FakeDev):
            return v
        raise TypeError(f"{name}: expected a CUDA device array, got {type(v).__name__}")
    monkeypatch.setattr(ops, "_dev", dev)


def _args(b=2, L=300, H=8, P=64, G=2, N=128, dtype=BF16):
    return dict(x=FakeDev((b, L, H, P), dtype), dt=FakeDev((b, L, H), FP32), A=FakeDev((H,), FP32),
                B=FakeDev((b, L, G, N), dtype), C=FakeDev((b, L, G, N), dtype), chunk_size=128)


def _validate(**kw):
    a = _args(**{k: kw.pop(k) for k in list(kw) if k in ("b", "L", "H", "P", "G", "N", "dtype")})
    a.update(kw)
    full = dict(D=None, z=None, dt_bias=None, initial_states=None, seq_idx=None, cu_seqlens=None, dt_softplus=False,
                dt_limit=(0.0, math.inf), return_final_states=False, return_varlen_states=False,
                return_chunk_states=False, state_dtype=None, family="auto", out=None)
    full.update(a)
    return ops._validate(full.pop("x"), full.pop("dt"), full.pop("A"), full.pop("B"), full.pop("C"),
                         full.pop("chunk_size"), full["D"], full["z"], full["dt_bias"], full["initial_states"],
                         full["seq_idx"], full["cu_seqlens"], full["dt_softplus"], full["dt_limit"],
                         full["return_final_states"], full["return_varlen_states"], full["return_chunk_states"],
                         full["state_dtype"], full["family"], full["out"])


def test_good_call_builds_segments_and_flags():
    c = _validate(D=FakeDev((8, 64), FP32), z=FakeDev((2, 300, 8, 64), BF16), dt_bias=FakeDev((8,), FP32),
                  dt_softplus=True, dt_limit=(0.0, 0.5), initial_states=FakeDev((2, 8, 64, 128), FP32))
    assert c.nseg == 2 and c.total_chunks == 6 and c.max_chunks == 3 and c.total_ckpts == 4
    assert c.flags == ops._F_D | ops._F_DP | ops._F_Z | ops._F_BIAS | ops._F_SOFTPLUS | ops._F_CLAMP | ops._F_INIT
    seg = c.table[:16].reshape(2, 8)
    assert list(seg[1][:7]) == [300, 300, 1, 3, 2, 1, -1]
    assert list(c.table[16:18]) == [0, 1] and list(c.table[18:]) == [0, 0, 0, 1, 1, 1]


def test_default_dt_limit_means_no_clamp():
    assert not (_validate().flags & ops._F_CLAMP)


@pytest.mark.parametrize("kw, exc, match", [
    (dict(x=np.zeros((2, 300, 8, 64), np.float32)), TypeError, "^x:"),
    (dict(dtype=np.float64), TypeError, "^x:"),
    (dict(P=96), ValueError, "^x: headdim"),
    (dict(N=96), ValueError, "^B: dstate"),
    (dict(G=3), ValueError, "^B: nheads"),
    (dict(chunk_size=100), ValueError, "^chunk_size"),
    (dict(chunk_size=True), ValueError, "^chunk_size"),
    (dict(dt=FakeDev((2, 300, 7), FP32)), ValueError, "^dt:"),
    (dict(dt=FakeDev((2, 300, 8), FP16)), TypeError, "^dt:"),
    (dict(A=FakeDev((8,), BF16)), TypeError, "^A:"),
    (dict(C=FakeDev((2, 300, 2, 64), BF16)), ValueError, "^C:"),
    (dict(B=FakeDev((2, 300, 2, 128), FP16)), TypeError, "^B:"),
    (dict(D=FakeDev((8, 3), FP32)), ValueError, "^D:"),
    (dict(z=FakeDev((2, 300, 8, 64), FP32)), TypeError, "^z:"),
    (dict(dt_bias=FakeDev((9,), FP32)), ValueError, "^dt_bias:"),
    (dict(dt_limit=(1.0, 0.5)), ValueError, "^dt_limit"),
    (dict(dt_limit="x"), TypeError, "^dt_limit"),
    (dict(initial_states=FakeDev((3, 8, 64, 128), FP32)), ValueError, "^initial_states:"),
    (dict(initial_states=FakeDev((2, 8, 64, 128), BF16)), TypeError, "^initial_states:"),
    (dict(state_dtype="float64"), ValueError, "^state_dtype"),
    (dict(cu_seqlens=np.array([0, 300, 600], np.int32)), ValueError, "^cu_seqlens: needs batch == 1"),
    (dict(b=1, cu_seqlens=np.array([1, 300], np.int32)), ValueError, "^cu_seqlens: must start at 0"),
    (dict(b=1, cu_seqlens=np.array([0, 200, 100, 300], np.int32)), ValueError, "^cu_seqlens: must be non-decreasing"),
    (dict(b=1, cu_seqlens=np.array([0, 299], np.int32)), ValueError, "^cu_seqlens: must end at seqlen"),
    (dict(b=1, cu_seqlens=np.array([0.0, 300.0])), TypeError, "^cu_seqlens"),
    (dict(return_varlen_states=True), ValueError, "^return_varlen_states"),
    (dict(seq_idx=np.zeros((2, 300), np.int64)), TypeError, "^seq_idx"),
    (dict(seq_idx=np.zeros((2, 299), np.int32)), ValueError, "^seq_idx"),
    (dict(out=FakeDev((2, 300, 8, 64), FP16)), TypeError, "^out:"),
    (dict(out=FakeDev((2, 301, 8, 64), BF16)), ValueError, "^out:"),
    (dict(x=FakeDev((2, 300, 8, 64), BF16, contiguous=False)), ValueError, "^x: expected a C-contiguous"),
    (dict(family="fast"), ValueError, "^family"),
    (dict(dt_softplus=1), TypeError, "^dt_softplus"),
])
def test_errors_name_the_argument(kw, exc, match):
    with pytest.raises(exc, match=match):
        _validate(**kw)


def test_cu_seqlens_segments_with_empty_and_seq_idx_agreement():
    cu = np.array([0, 0, 5, 5, 300], np.int32)
    c = _validate(b=1, cu_seqlens=cu, initial_states=FakeDev((4, 8, 64, 128), FP32), return_varlen_states=True)
    seg = c.table[: 4 * 8].reshape(4, 8)
    assert [int(v) for v in seg[:, 1]] == [0, 5, 0, 295]
    assert [int(v) for v in seg[:, 5]] == [-1, -1, -1, 0] and [int(v) for v in seg[:, 6]] == [0, 1, 2, 3]
    assert c.nvarlen == 4 and c.nfinal == 1 and c.total_chunks == 1 + 3
    sidx = np.zeros((1, 300), np.int32)
    sidx[0, 5:] = 3
    _validate(b=1, cu_seqlens=cu, seq_idx=sidx)  # agrees
    sidx[0, 100:] = 4
    with pytest.raises(ValueError, match="^seq_idx: does not agree"):
        _validate(b=1, cu_seqlens=cu, seq_idx=sidx)
    with pytest.raises(ValueError, match=r"initial_states: expected shape \(4 \[nseq\]"):
        _validate(b=1, cu_seqlens=cu, initial_states=FakeDev((1, 8, 64, 128), FP32))


def test_seq_idx_runs_and_exact_order_longest_first():
    sidx = np.zeros((2, 300), np.int32)
    sidx[0, 10:] = 1
    sidx[1, 200:] = 5
    c = _validate(seq_idx=sidx)
    seg = c.table[: c.nseg * 8].reshape(c.nseg, 8)
    assert c.nseg == 4
    assert [tuple(int(v) for v in r[:3]) for r in seg] == [(0, 10, 0), (10, 290, -1), (300, 200, 1), (500, 100, -1)]
    assert [int(v) for v in seg[:, 5]] == [-1, 0, -1, 1]
    assert [int(v) for v in c.table[c.nseg * 8: c.nseg * 9]] == [1, 2, 3, 0]


def test_state_dtype_names_and_initial_dtype():
    c = _validate(state_dtype="bf16", initial_states=FakeDev((2, 8, 64, 128), BF16))
    assert c.state_dtype == BF16


def _sel(**kw):
    base = dict(family="auto", mode="auto", ws_bytes=10, cap=100, coop_error=None,
                predicted={"exact": 100.0, "chunkpar": 50.0})
    base.update(kw)
    return ops.select_family(**base)


def test_selection_rule():
    assert _sel()[0] == "chunkpar"
    assert _sel(predicted={"exact": 100.0, "chunkpar": 99.0})[0] == "chunkpar"  # the predicted-faster family
    assert _sel(predicted={"exact": 100.0, "chunkpar": 100.0})[0] == "exact"    # a tie: no workspace
    assert _sel(predicted={"exact": 100.0, "chunkpar": 101.0})[0] == "exact"
    assert _sel(ws_bytes=101)[0] == "exact" and "cap" in _sel(ws_bytes=101)[1]
    assert _sel(coop_error="no coop")[0] == "exact" and "cooperative" in _sel(coop_error="no coop")[1]
    assert _sel(mode="never")[0] == "exact"
    assert _sel(mode="always", predicted={"exact": 1.0, "chunkpar": 9.0})[0] == "chunkpar"
    assert _sel(family="exact")[0] == "exact"
    assert _sel(family="chunkpar", mode="never", predicted={"exact": 1.0, "chunkpar": 9.0})[0] == "chunkpar"
    with pytest.raises(ValueError, match="cap"):
        _sel(family="chunkpar", ws_bytes=101)
    from cake_rt.launch.grid import CooperativeLaunchError
    with pytest.raises(CooperativeLaunchError):
        _sel(family="chunkpar", coop_error="occupancy 0")


def test_env_mode_and_cap_parsing(monkeypatch):
    monkeypatch.setenv(ops.ENV_MODE, "ALWAYS")
    assert ops._env_mode() == "always"
    monkeypatch.setenv(ops.ENV_MODE, "sometimes")
    with pytest.raises(ValueError, match=ops.ENV_MODE):
        ops._env_mode()
    monkeypatch.setenv(ops.ENV_CAP, "1234")
    assert ops._workspace_cap() == 1234
    monkeypatch.setenv(ops.ENV_CAP, "lots")
    with pytest.raises(ValueError, match=ops.ENV_CAP):
        ops._workspace_cap()
    monkeypatch.delenv(ops.ENV_CAP)
    assert ops._workspace_cap() == 256 * 1024 * 1024


def _with_table(c, L, chunk, nseq=1):
    c.chunk = chunk
    c.table, c.nseg, c.total_chunks, c.max_chunks, _ = ops._build_table([(0, 0, L, 0, True)], L, chunk, False)
    return c


def test_workspace_slices_of_suite_rows():
    # seed: everything in one slice; nemotron-h (128 heads x 128 chunks, 805 MB unsliced) is cut into slices
    # under the 256 MiB cap instead of being refused.
    cap = ops.DEFAULT_WORKSPACE_CAP
    seed = _with_table(_validate(b=1, L=32768, H=8, G=1, N=128), 32768, 256)
    assert ops.workspace_bytes(seed) == 128 * 8 * 64 * 128 * (4 + 2) + 128 * 8 * 4 + 128 * 8 * 2 * 256 * 4
    assert ops.cap_slice_units(seed, 2, cap) == ops.slice_units(seed, 2, cap, 264) == 8
    nem = _with_table(_validate(b=1, L=16384, H=128, G=8, N=128), 16384, 128)
    assert ops.workspace_bytes(nem) > cap
    most = ops.cap_slice_units(nem, 2, cap)
    assert 0 < most < 128 and most % 2 == 0
    assert ops.workspace_bytes(nem, most) <= cap < ops.workspace_bytes(nem, most + 2)
    su = ops.slice_units(nem, 2, cap, 264)
    assert 0 < su <= most and su % 2 == 0
    assert ops.cap_slice_units(nem, 2, 1000) == ops.slice_units(nem, 2, 1000, 264) == 0  # not one block fits


def _rounds(c, su, hb=1, slots=264):
    """(slices, tile rounds, phase-2 rounds) of slices of ``su`` units on the planner's grid."""
    units = c.nheads * c.headdim // 64
    items = c.nseg * 64 * c.dstate // 512
    grid = min(slots, max(c.total_chunks * su // hb, items * su))
    sizes = [min(su, units - u) for u in range(0, units, su)]
    return (len(sizes), sum(-(-(c.total_chunks * n // hb) // grid) for n in sizes),
            sum(-(-(items * n) // grid) for n in sizes))


def test_slices_are_sized_in_whole_rounds_of_the_grid():
    # nemotron-h on the H200 (one unit a CTA, 264 resident CTAs): the cap holds 40 units (two prep parts), slices of
    # 40, 40, 40 and 8 take 10 rounds of phase-2 items (640 items: 2.4 rounds, three times, and the 8-unit slice's
    # one); slices of 33 (528 items: 2 whole rounds) take 8, with the same 4 slices and one tile round fewer
    nem = _with_table(_validate(b=1, L=16384, H=128, G=8, N=128), 16384, 128)
    cap = ops.DEFAULT_WORKSPACE_CAP
    assert ops.cap_slice_units(nem, 1, cap) == 40 and _rounds(nem, 40) == (4, 64, 10)
    assert ops.slice_units(nem, 1, cap, 264) == 33 and _rounds(nem, 33) == (4, 63, 8)
    # whatever the shape and cap: the size fits the cap, a call the cap does not cut stays one slice, and a cut call
    # gets no more slices, tile rounds or phase-2 rounds (in that order) than the largest size the cap allows
    for b, L, H, Q in ((1, 8192, 80, 256), (8, 2048, 80, 256), (1, 32768, 24, 128), (4, 8192, 48, 128), (1, 16384, 128, 128)):
        c = _with_table(_validate(b=1, L=b * L, H=H, G=1, N=128), b * L, Q)
        c.nseg, c.max_chunks = b, c.total_chunks // b
        for cap in (1 << 20, 16 << 20, 26 << 20, 40 << 20, 64 << 20, 256 << 20, 1 << 40):
            most = ops.cap_slice_units(c, 1, cap)
            su = ops.slice_units(c, 1, cap, 264)
            assert 0 <= su <= most and (su > 0) == (most > 0)
            if most >= H:
                assert su == H
            elif su:
                assert ops.workspace_bytes(c, su) <= cap < ops.workspace_bytes(c, most + 1)
                assert _rounds(c, su) <= _rounds(c, most) and _rounds(c, su)[0] == _rounds(c, most)[0]


def test_row_parts_split_tiles_only_where_the_grid_has_room():
    # short (1 x 512 tokens, 8 heads, chunk 256): 16 tiles on a grid of 128 (its 128 phase-2 items): a row block an
    # item (64 items, the program with SSD_ROWS 4); seed and m2-2.7b have a round of tiles or more: one item a tile
    # (SSD_ROWS 1, the program with no code of the split)
    short = _with_table(_validate(b=1, L=512, H=8, G=1, N=128), 512, 256)
    grid = ops.chunkpar_grid(short, 8, 1, 264)
    assert grid == 128 and ops.row_parts(short, 8, 1, grid) == 4
    assert ops.row_parts(short, 8, 1, 63) == 2 and ops.row_parts(short, 8, 1, 31) == 1
    seed = _with_table(_validate(b=1, L=32768, H=8, G=1, N=128), 32768, 256)
    assert ops.row_parts(seed, 8, 1, ops.chunkpar_grid(seed, 8, 1, 264)) == 1
    m2 = _with_table(_validate(b=1, L=8192, H=80, G=1, N=128), 8192, 256)
    assert ops.row_parts(m2, 80, 1, ops.chunkpar_grid(m2, 80, 1, 264)) == 1
    # never more items a tile than the chunk has row blocks
    c128 = _with_table(_validate(b=1, L=512, H=8, G=1, N=128), 512, 128)
    assert ops.row_parts(c128, 8, 1, 264) == 2
    c64 = _with_table(_validate(b=1, L=512, H=8, G=1, N=128), 512, 64)
    assert ops.row_parts(c64, 8, 1, 264) == 1
    # the GPU test's pairs (test_chunkpar_row_parts_of_few_tiles): 4 heads, sequences of 1297 and 968 tokens in chunks
    # of 256: 40 tiles on the grid of its 128 phase-2 items, 2 items a tile
    pairs = _validate(b=1, L=2265, H=4, G=1, N=128)
    pairs.chunk = 256
    pairs.table, pairs.nseg, pairs.total_chunks, pairs.max_chunks, _ = ops._build_table(
        [(0, 0, 1297, 0, True), (0, 1297, 2265, 1, True)], 2265, 256, True)
    grid = ops.chunkpar_grid(pairs, 4, 1, 264)
    assert (pairs.total_chunks, grid) == (10, 128) and ops.row_parts(pairs, 4, 1, grid) == 2


def test_col_parts_split_phase_one_with_phase_three():
    # a program of one phase-3 item a tile keeps one phase-1 item (its SASS is the unsplit program's); a split one
    # splits its state columns as far as its phase-3 items go, in whole 64-column panels (short: 2 items of 64)
    for n in ops.DSTATES:
        assert ops.col_parts(n, 1) == 1
    assert [ops.col_parts(128, r) for r in ops.ROW_PARTS] == [1, 2, 2]
    assert [ops.col_parts(256, r) for r in ops.ROW_PARTS] == [1, 2, 4]
    assert [ops.col_parts(64, r) for r in ops.ROW_PARTS] == [1, 1, 1]
    assert ops.program_defines(0, 2, 2, 64, 128, 256, 8, family="chunkpar", rows=4)["SSD_COLS"] == 2
    assert ops.program_defines(0, 2, 2, 64, 128, 256, 8, family="chunkpar")["SSD_COLS"] == 1
    assert "SSD_COLS" not in ops.program_defines(0, 2, 2, 64, 128, 256, 8, family="exact")


def test_cost_model_prefers_chunkpar_for_few_long_items():
    m = ops.COST_MODELS[(9, 0)]
    seed = ops.predict_us(m, nseg=1, nheads=8, headdim=64, dstate=128, chunk=256, max_chunks=128, total_chunks=128,
                          sm_count=132, ws_bytes=50 << 20, hb=2, hbx=2)
    assert seed["chunkpar"] < 0.95 * seed["exact"]
    for v in seed.values():
        assert math.isfinite(v) and v > 0


# The suite rows' model inputs on the H200 (132 SMs, 264 cooperative slots) and both families' times measured by
# `cake-rt calibrate` (2026-12-04, twenty-eighth session, tree cdc510a; docs/ssd.md "Selection"): (nseg, nheads, chunk,
# max_chunks, total_chunks, workspace bytes, slices, phase-3 / phase-1 items a tile, exact us, chunk-parallel us).
# b8's and nemotron-h's exact scans are 15% and 4% faster than their chunk-parallel runs.
H200_ROWS = {
    "seed": (1, 8, 256, 128, 128, 52432896, 1, 1, 1, 2005.8, 122.0),
    "m2-2.7b": (1, 80, 256, 32, 32, 131082240, 1, 1, 1, 483.5, 273.0),
    "m2-2.7b-b8": (8, 80, 256, 8, 64, 262164480, 1, 1, 1, 453.7, 532.0),
    "nemotron-h": (1, 128, 128, 128, 128, 822149120, 4, 1, 1, 952.6, 992.0),
    "short": (1, 8, 256, 2, 2, 819456, 1, 4, 2, 39.2, 18.7),
    "varlen": (16, 64, 128, 133, 517, 1660355840, 7, 1, 1, 1216.2, 2021.1),
}


@pytest.mark.parametrize("row", sorted(H200_ROWS))
def test_h200_cost_model_picks_the_measured_faster_family(row):
    nseg, H, Q, mx, tot, ws, slices, rows, cols, exact_us, chunkpar_us = H200_ROWS[row]
    pred = ops.predict_us(ops.COST_MODELS[(9, 0)], nseg=nseg, nheads=H, headdim=64, dstate=128, chunk=Q,
                          max_chunks=mx, total_chunks=tot, sm_count=132, ws_bytes=ws, coop_slots=264, slices=slices,
                          rows=rows, cols=cols)
    fam, _ = ops.select_family(family="auto", mode="auto", ws_bytes=0, cap=1 << 30, coop_error=None, predicted=pred)
    assert fam == ("chunkpar" if chunkpar_us < exact_us else "exact")
    assert pred["exact"] == pytest.approx(exact_us, rel=0.05)
    assert pred["chunkpar"] == pytest.approx(chunkpar_us, rel=0.05)


def test_item_steps_of_a_split_tile():
    # one item a tile is the whole tile's steps; a split tile's chain is its longest phase-1 item (N / cols columns)
    # and its longest phase-3 item (row block Q/64 - 1 alone, or a pair from both ends, Q/64 + 1 row blocks' chains)
    for Q in ops.CHUNKS:
        for N in ops.DSTATES:
            for hb in (1, 2):
                assert ops._item_steps(Q, N, hb, 1, 1) == pytest.approx(ops._steps_per_chunk(Q, N, hb))
    assert ops._item_steps(256, 128, 1, 4, 2) == pytest.approx(2 + 4 + 2 + 1)  # short: 9 of the tile's 23
    assert ops._item_steps(256, 128, 1, 2, 2) == pytest.approx(2 + (1 + 0.5 + 1) + (4 + 2 + 1))
    short = dict(nseg=1, nheads=8, headdim=64, dstate=128, chunk=256, max_chunks=2, total_chunks=2, sm_count=132,
                 ws_bytes=819456, coop_slots=264)
    m = ops.COST_MODELS[(9, 0)]
    whole, split = ops.predict_us(m, **short), ops.predict_us(m, **short, rows=4, cols=2)
    assert split["exact"] == whole["exact"]
    assert split["chunkpar"] == pytest.approx(whole["chunkpar"] - m.p1 * (23 - 9))


def test_smem_layout_and_config_choice():
    # every program fits the opt-in limit of its target; the suite's bf16 programs keep two CTAs per SM
    for it in (2, 4):
        for N in ops.DSTATES:
            for Q in ops.CHUNKS:
                for upg in (1, 2):
                    for exact in (False, True):
                        hb, nb = ops.choose_config(it, N, Q, upg, exact)
                        assert upg % hb == 0
                        assert ops.smem_bytes(it, N, Q, hb, nb, exact) <= ops.OPTIN_SMEM_H200
    for exact in (False, True):
        hb, nb = ops.choose_config(2, 128, 256, 8, exact)
        assert 2 * (ops.smem_bytes(2, 128, 256, hb, nb, exact) + 1024) <= ops.OPTIN_SMEM_H200 + 1024
    # a unit per CTA when a group has one unit (ngroups == nheads, headdim 64)
    assert ops.choose_config(2, 128, 256, 1, False)[0] == 1
    # sm_90a (warp-specialized: 256 threads, 128 registers at entry for two CTAs per SM): the 16-bit programs up to
    # dstate 128 keep two CTAs per SM, the chunk-parallel ones double-buffered; exact with one B/X slot at
    # dstate 128 (the fp32 states), two at dstate 64; dstate 256: one CTA per SM, double-buffered
    for N in ops.DSTATES:
        for Q in ops.CHUNKS:
            for exact in (False, True):
                hb, nb = ops.choose_config(2, N, Q, 8, exact, wg=True)
                per_sm = 2 if N <= 128 else 1
                assert per_sm * (ops.smem_bytes(2, N, Q, hb, nb, exact, wg=True) + 1024) <= ops.OPTIN_SMEM_H200 + 1024
                if not exact or N != 128:
                    assert (hb, nb) == (1, 2), (N, Q, exact, hb, nb)
    assert ops.choose_config(2, 128, 256, 8, True, wg=True) == (1, 1)
    assert ops.choose_config(2, 64, 256, 8, True, wg=True) == (1, 2)
    for fam in ops.FAMILIES:
        assert ops.cta_threads(ops.program_defines(0, 2, 2, 64, 128, 256, 8, "sm_90a", family=fam)) == 256
        assert ops.cta_threads(ops.program_defines(2, 2, 2, 64, 128, 256, 8, "sm_90a", family=fam)) == 128  # no wgmma
        assert ops.cta_threads(ops.program_defines(0, 2, 2, 64, 128, 256, 8, "sm_80", family=fam)) == 128


def test_programs_list():
    progs = ops.programs("sm_90a")
    assert len(progs) == len({tuple(sorted(d.items())) for _, d in progs})
    assert all(path == ops.KERNEL_PATH for path, _ in progs)
    # a program holds one family's kernel and carries only the defines that kernel reads (no identical twins)
    shared = {"SSD_FAMILY", "SSD_T", "SSD_DT", "SSD_SD", "SSD_P", "SSD_N", "SSD_Q", "SSD_WG"}
    keys = {0: shared | {"SSD_HBX", "SSD_NBUFX"}, 1: shared | {"SSD_HB", "SSD_NBUF", "SSD_ROWS", "SSD_COLS"}}
    assert all(set(d) - {"SSD_WALK"} == keys[d["SSD_FAMILY"]] for _, d in progs)
    walks = [d for _, d in progs if d.get("SSD_WALK")]  # the walk schedule's programs: chunk-parallel, one item a tile
    assert walks and all(d["SSD_FAMILY"] == 1 and d["SSD_ROWS"] == d["SSD_COLS"] == d["SSD_HB"] == 1 for d in walks)
    # the bench suite's programs of both families are in the list, short's split one among them (4 items a tile)
    for upg, q in ((8, 256), (80, 256), (16, 128)):
        for fam in ops.FAMILIES:
            assert ("ssd/ssd_combined.cu", ops.program_defines(0, 2, 2, 64, 128, q, upg, family=fam)) in progs
    assert ("ssd/ssd_combined.cu", ops.program_defines(0, 2, 2, 64, 128, 256, 8, family="chunkpar", rows=4)) in progs
    # every chunk-parallel program in every split its chunk allows (a call's split depends on its tiles and grid)
    chunkpar = {tuple(sorted(d.items())) for _, d in progs if d["SSD_FAMILY"] == 1}
    for _, d in progs:
        if d["SSD_FAMILY"] == 1 and not d.get("SSD_WALK"):
            assert d["SSD_COLS"] == ops.col_parts(d["SSD_N"], d["SSD_ROWS"])
            for rows in ops.ROW_PARTS:
                split = {**d, "SSD_ROWS": rows, "SSD_COLS": ops.col_parts(d["SSD_N"], rows)}
                assert (tuple(sorted(split.items())) in chunkpar) == (rows <= d["SSD_Q"] // 64)
    with pytest.raises(ValueError, match="rows"):
        ops.program_defines(0, 2, 2, 64, 128, 128, 8, family="chunkpar", rows=4)
    # every case's two programs: as many exact programs as distinct exact configurations
    exact = [d for _, d in progs if d["SSD_FAMILY"] == 0]
    assert len(exact) == len({tuple(sorted(ops.program_defines(*c, target="sm_90a", family="exact").items()))
                              for c in ops._PROGRAM_CASES})


def test_flops_bytes_seed_row():
    fl, nb = ops.ssd_flops_bytes(batch=1, seqlen=32768, nheads=8, headdim=64, dstate=128, ngroups=1, chunk_size=256)
    assert abs(nb - 118e6) / 118e6 < 0.05
    assert 13e9 < fl < 15e9


def _kernel_extents(c, su: int) -> dict:
    """Bytes past each workspace part's start that the chunk-parallel kernel's indexing reaches over all slices of
    ``su`` units (ssd_combined.cu's local_index, the S_prev rows, the decays, the prep parts by slice parity), counted
    from its formulas at their largest indices, independently of ``workspace_bytes``."""
    ue = ops.UNIT_ROWS * c.dstate
    blk = ops.THREADS * ops.SCAN_VEC
    units = c.nheads * c.headdim // ops.UNIT_ROWS
    tc, q, it = c.total_chunks, c.chunk, np.dtype(c.x.dtype).itemsize
    ext = {"local": 0, "prev": 0, "decay": 4 * tc * c.nheads, "prep": 0}
    parts = set()
    for us in range(0, units, su):
        un = min(su, units - us)
        uu, e, ch = un - 1, ue - 1, tc - 1
        ext["local"] = max(ext["local"], 4 * (((uu * (ue // blk) + e // blk) * tc + ch) * blk + e % blk + 1))
        ext["prev"] = max(ext["prev"], it * ((ch * un + uu) * ue + e + 1))
        parity = (us // su) & 1
        parts.add(parity)
        ext["prep"] = max(ext["prep"], 4 * (parity * tc * su * 2 * q + (ch * un + uu) * 2 * q + 2 * q))
        assert (ch * un + uu) * 2 * q + 2 * q <= tc * su * 2 * q  # a slice's prep stays inside its part
    ext["parts"] = len(parts)
    return ext


@pytest.mark.parametrize("H, P, N, Q, dtype, lens", [
    (8, 128, 64, 128, BF16, [0, 1, 300, 129, 64, 517, 17]), (8, 64, 128, 256, BF16, [0, 187, 1, 300, 64, 17]),
    (5, 128, 256, 64, FP32, [700, 3]), (128, 64, 128, 128, BF16, [16384]), (3, 64, 64, 256, FP16, [1, 2, 3])])
def test_workspace_parts_hold_what_the_kernel_indexes(monkeypatch, H, P, N, Q, dtype, lens):
    """Under caps from the whole workspace down to one block of units: the host's part offsets (``_executable``) and
    ``workspace_bytes`` hold every index the kernel computes in every slice (two prep parts when there are slices, each
    slice's prep inside its part), the parts 256-byte aligned, the size within the cap; and the plan's phase-3 split
    never exceeds the chunk's row blocks nor leaves a tile's items more than the grid."""
    c = _validate(b=1, L=sum(lens), H=H, P=P, G=1, N=N, dtype=dtype, chunk_size=Q,
                  cu_seqlens=np.concatenate([[0], np.cumsum(lens)]).astype(np.int32))
    assert c.total_chunks == sum(-(-n // Q) for n in lens)
    monkeypatch.setattr(ops, "_kernel", lambda p, defs: None)
    monkeypatch.setattr(ops, "_packed", lambda *a, **k: None)
    monkeypatch.setattr(ops, "_tile_maps", lambda p: None)
    units = H * P // ops.UNIT_ROWS
    whole = ops.workspace_bytes(c)
    seen = set()
    for cap in sorted({whole, whole - 1, whole // 2, whole // 3, whole // 5, whole // 7, whole // 16, whole // 64}):
        su = ops.slice_units(c, 1, cap, 264)
        if su == 0:
            continue
        ws = ops.workspace_bytes(c, su)
        assert ws <= cap
        plan = ops.SsdPlan(family="chunkpar", reason="", workspace_bytes=ws, workspace_cap=cap, predicted_us={},
                           mode="auto", segments=c.nseg, nheads=H, work_items=0, total_chunks=c.total_chunks,
                           max_chunks=c.max_chunks, sm_count=132, grid=1, slice_units=su,
                           defines=ops.program_defines(0 if dtype == BF16 else 1 if dtype == FP16 else 2, 2, 2, P, N, Q,
                                                       H * P // 64, family="chunkpar"))
        o1, o2, o3 = ops._executable(c, plan)[3:6]
        assert o1 % 256 == o2 % 256 == o3 % 256 == 0
        ext = _kernel_extents(c, su)
        assert ext["local"] <= o1 and ext["prev"] <= o2 - o1 and ext["decay"] <= o3 - o2 and ext["prep"] <= ws - o3, (
            cap, su, ext, (o1, o2, o3, ws))
        assert ext["parts"] == (1 if su == units else 2)
        grid = ops.chunkpar_grid(c, su, 1, 264)
        rows = ops.row_parts(c, su, 1, grid)
        tiles = ops.chunkpar_work(c, su, 1)[0]
        assert rows <= Q // ops.SUB and (rows == 1 or tiles * rows <= grid)
        seen.add((su < units, rows > 1))
    assert (True, False) in seen or (True, True) in seen, seen  # some cap cuts the call into slices


def test_walk_prediction_picks_the_suite_rows_it_was_measured_faster_on():
    # the walk's measured rows (docs/ssd.md, twenty-ninth session): nemotron-h 712 us and m2-2.7b 228 us, faster than
    # both of their families; seed's few long walks (128 chunks of 256) are far slower than its three phases
    m = ops.COST_MODELS[(9, 0)]
    for row, want in (("nemotron-h", True), ("m2-2.7b", True), ("seed", False)):
        nseg, H, Q, mx, tot, ws, slices, rows, cols, exact_us, chunkpar_us = H200_ROWS[row]
        walk = ops.predict_walk_us(m, nseg=nseg, nheads=H, headdim=64, dstate=128, chunk=Q, max_chunks=mx,
                                   total_chunks=tot, slots=264)
        assert (walk < min(exact_us, chunkpar_us)) == want, (row, walk)
    assert ops.predict_walk_us(m, nseg=1, nheads=128, headdim=64, dstate=128, chunk=128, max_chunks=128,
                               total_chunks=128, slots=264) == pytest.approx(712, rel=0.05)
    assert ops.predict_walk_us(m, nseg=1, nheads=80, headdim=64, dstate=128, chunk=256, max_chunks=32,
                               total_chunks=32, slots=264) == pytest.approx(228, rel=0.05)


def test_walk_ring_and_layout():
    import types

    def prob(nseg, H, P, N, Q, mx, tot, dtype=BF16):
        return types.SimpleNamespace(nseg=nseg, nheads=H, headdim=P, dstate=N, chunk=Q, max_chunks=mx,
                                     total_chunks=tot, x=np.empty(0, dtype))
    wg = {"SSD_WG": 1, "SSD_HB": 1}
    cap = 256 << 20
    nem = prob(1, 128, 64, 128, 128, 128, 128)
    ring = ops.walk_ring(nem, cap, 264, wg)
    assert 100 <= ring < 128 and ops.walk_layout(nem, ring)[2] <= cap < ops.walk_layout(nem, ring + 1)[2]
    assert ops.walk_ring(prob(1, 80, 64, 128, 256, 32, 32), cap, 264, wg) == 32   # m2-2.7b: every chunk
    assert ops.walk_ring(prob(1, 80, 64, 128, 256, 32, 32), 1 << 20, 264, wg) == 0   # no ring of 16 under the cap
    assert ops.walk_ring(prob(8, 80, 64, 128, 256, 8, 64), cap, 264, wg) == 0     # b8: 640 walks
    assert ops.walk_ring(prob(1, 8, 64, 256, 256, 128, 128), cap, 264, wg) == 0   # dstate 256: two passes
    assert ops.walk_ring(prob(1, 8, 64, 128, 256, 2, 2), cap, 264, wg) == 0       # short: fewer tiles than CTAs
    assert ops.walk_ring(nem, cap, 264, {"SSD_WG": 0, "SSD_HB": 1}) == 0          # no wgmma program
    o1, o2, total = ops.walk_layout(nem, ring)
    assert o1 % 256 == 0 and o2 % 256 == 0 and o1 >= (128 * (ring + 1) + 1) * 4
    assert o2 - o1 >= 128 * ring * 64 * 128 * 2 and total - o2 == 128 * ring * 2 * 128 * 4


def test_device_seq_idx_on_another_device_is_named():
    sidx = FakeDev((2, 300), np.int32)
    sidx.device = type("Device1", (), {"id": 1})()
    with pytest.raises(ValueError, match="^seq_idx: expected an array on device 0"):
        _validate(seq_idx=sidx)


@pytest.mark.parametrize("cap, optin, per_sm, target", [((12, 0), 101376, 102400, "sm_120"),
                                                        ((8, 7), 166912, 167936, "sm_87"),
                                                        ((8, 6), 101376, 102400, "sm_86")])
def test_programs_fit_the_shared_memory_of_the_gpu_the_call_runs_on(monkeypatch, cap, optin, per_sm, target):
    # a target the per-target table does not name fell back to the sm_90a figures (227 KiB a block): the programs
    # of a GPU with less (an RTX 50's sm_120: 99 KiB) were sized for memory the launch cannot have
    from cake_rt.launch import arch

    info = arch.DeviceInfo(index=0, name="stand-in", capability=cap, sm_count=84, smem_per_block_optin=optin,
                           smem_per_sm=per_sm, regs_per_sm=65536, cooperative_launch=True, l2_bytes=64 << 20,
                           target=target)
    monkeypatch.setattr(arch, "device_info", lambda device=None: info)
    for N, dtype in ((64, BF16), (128, BF16), (64, FP32), (128, FP32), (256, BF16)):
        c = _validate(N=N, dtype=dtype)
        for fam in ("exact", "chunkpar"):
            try:
                defs = ops._defines(c, fam)
            except ValueError as exc:  # no layout fits: named before any launch
                assert "shared memory" in str(exc) and optin < 166912
                continue
            assert ops.program_smem(np.dtype(dtype).itemsize, defs) <= optin, (N, dtype, fam, defs)
    if target in ops._SMEM:  # a named target's programs are the ones its table gives (warmup compiles those)
        c = _validate(N=64)
        assert ops._defines(c, "exact") == ops.program_defines(0, 2, 2, 64, 64, 128, 4, target, family="exact")


@pytest.mark.parametrize("P, N, Q, dtype, H, G, sdt", [
    (128, 128, 256, BF16, 24, 3, None),      # headdim 128 at dstate 128, chunk 256: none of the tested shapes
    (64, 64, 128, FP16, 6, 3, "bfloat16"),   # two units a group (the exact scan's two-unit CTA), 16-bit states
    (64, 256, 64, BF16, 5, 5, None),
    (128, 64, 256, FP32, 4, 1, "float16"),
])
def test_warmup_of_a_named_shape_holds_every_program_a_call_of_it_loads(monkeypatch, P, N, Q, dtype, H, G, sdt):
    # `cake-rt warmup ssd --shapes dtype=...,headdim=...,dstate=...,chunk=...` for a shape the tests do not run: the
    # exact scan's program, the chunk-parallel one of every phase-3 split and the walk's, as _defines makes them
    from cake_rt import warmup
    from cake_rt.launch import arch

    info = arch.DeviceInfo(index=0, name="stand-in H200", capability=(9, 0), sm_count=132,
                           smem_per_block_optin=232448, smem_per_sm=233472, regs_per_sm=65536,
                           cooperative_launch=True, l2_bytes=60 << 20, target="sm_90a")
    monkeypatch.setattr(arch, "device_info", lambda device=None: info)
    c = _validate(P=P, N=N, H=H, G=G, dtype=dtype, chunk_size=Q, state_dtype=sdt)
    want = [ops._defines(c, "exact")]
    base = ops._defines(c, "chunkpar")
    want += [{**base, "SSD_ROWS": r, "SSD_COLS": ops.col_parts(N, r)} for r in ops.ROW_PARTS if r <= Q // ops.SUB]
    if base["SSD_WG"] and base["SSD_HB"] == 1 and N <= 128:
        want.append(ops.walk_defines({**base, "SSD_ROWS": 1, "SSD_COLS": ops.col_parts(N, 1)}))
    name = {BF16: "bfloat16", FP16: "float16", FP32: "float32"}[dtype]
    shapes = warmup.parse_shapes([f"dtype={name},headdim={P},dstate={N},chunk={Q}"])
    got = {tuple(sorted(d.items())) for _, _, d in warmup.programs(("ssd",), "sm_90a", shapes)}
    assert {tuple(sorted(d.items())) for d in want} <= got
    narrow = warmup.parse_shapes([f"dtype={name},dt_dtype=float32,state_dtype={sdt or 'float32'},headdim={P},"
                                  f"dstate={N},chunk={Q}"])
    one = {tuple(sorted(d.items())) for _, _, d in warmup.programs(("ssd",), "sm_90a", narrow)}
    assert {tuple(sorted(d.items())) for d in want} <= one <= got  # dt_dtype / state_dtype narrow it further
    # the plain list stays the tested shapes' (the record's staging)
    assert len(warmup.programs(("ssd",), "sm_90a")) == len(ops.programs("sm_90a"))
