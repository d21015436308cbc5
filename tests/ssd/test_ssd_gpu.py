"""GPU tests of cake_rt.ssd_combined: both families against the float64 reference on fresh random inputs,
bitwise equality of the families and of repeated calls, plans, errors, streams, DLPack, > 2^31 elements."""
import numpy as np
import pytest

from ssd_gpu_util import BARS, call, make_case, poison, reference, rel_l2, to_bytes, to_dev, to_host64
from cake_rt.interop import BF16, FP16, FP32

pytestmark = pytest.mark.gpu

ACC_LOG = []  # (case, output, family, rel err) for the log


def _bars(case):
    xb = BARS[case["dtype"]]
    sb = max(xb, BARS[case["state_dtype"]])
    return xb, sb


def check(case, chunk, *, final=True, varlen=False, chunks=True, name=""):
    """Both families vs the reference (bars of the spec), bitwise equal to each other and to a rerun."""
    ref = reference(case, chunk, final=final, varlen=varlen, chunks=chunks)
    ex = call(case, chunk, "exact", final=final, varlen=varlen, chunks=chunks)
    cp = call(case, chunk, "chunkpar", final=final, varlen=varlen, chunks=chunks)
    ex2 = call(case, chunk, "exact", final=final, varlen=varlen, chunks=chunks)
    cp2 = call(case, chunk, "chunkpar", final=final, varlen=varlen, chunks=chunks)
    names = ["y"] + (["final"] if final else []) + (["varlen"] if varlen else []) + (["chunks"] if chunks else [])
    xb, sb = _bars(case)
    errs = {}
    for i, nm in enumerate(names):
        assert ex[i].shape == ref[i].shape, (nm, ex[i].shape, ref[i].shape)
        assert to_bytes(ex[i]) == to_bytes(cp[i]), f"{name}: {nm} differs between exact and chunkpar"
        assert to_bytes(ex[i]) == to_bytes(ex2[i]), f"{name}: {nm} differs between two exact runs"
        assert to_bytes(cp[i]) == to_bytes(cp2[i]), f"{name}: {nm} differs between two chunkpar runs"
        got = to_host64(ex[i])
        assert np.all(np.isfinite(got)), f"{name}: {nm} has non-finite values (poison left?)"
        e = rel_l2(got, ref[i])
        errs[nm] = e
        ACC_LOG.append((name, nm, e))
        print(f"ACC {name} {nm} rel_l2={e:.3e}")
        bar = xb if nm == "y" else sb
        if ref[i].size:
            assert e < bar, f"{name}: {nm} rel L2 {e:.3e} >= {bar}"
    return errs


DT = {"bf16": BF16, "fp16": FP16, "fp32": FP32}


@pytest.mark.parametrize("sd", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("xd", ["bf16", "fp16", "fp32"])
def test_dtype_by_state_dtype(xd, sd):
    dt_dtype = DT[xd] if xd == "fp16" else FP32  # dt in x's dtype is accepted too
    case = make_case(11, 2, 333, 8, 64, 64, 8, DT[xd], dt_dtype=dt_dtype, state_dtype=DT[sd], D="h")
    check(case, 128, name=f"dtype {xd} state {sd}")


def test_dt_in_bf16_with_bf16_inputs():
    """dt in x's dtype (the spec's alternative to float32) with bf16 inputs, as serving engines pass the projection's
    dt: the other tests give it in float32, or in x's dtype only with fp16 inputs."""
    case = make_case(12, 2, 333, 8, 64, 64, 8, BF16, dt_dtype=BF16, D="h")
    check(case, 128, name="dt bf16")


@pytest.mark.parametrize("G", [1, 8])
@pytest.mark.parametrize("chunk", [64, 128, 256])
def test_chunk_sizes_and_groups(chunk, G):
    L = 2 * chunk + 37  # not a multiple of the chunk
    case = make_case(20 + chunk + G, 1, L, 8, 64, 128, G, BF16, D="hp")
    check(case, chunk, name=f"chunk {chunk} G {G}")


@pytest.mark.parametrize("P, N, dt, chunk", [(128, 256, "bf16", 256), (128, 64, "fp32", 64), (64, 256, "fp16", 128),
                                            (128, 128, "fp32", 256),
                                            # programs no other GPU test launches (a call of chunk + 75 tokens, 4 heads,
                                            # splits its few tiles over rows and state columns on a Hopper)
                                            (64, 64, "bf16", 256), (128, 128, "bf16", 128), (128, 128, "bf16", 256),
                                            (64, 256, "bf16", 64), (64, 256, "bf16", 256), (64, 256, "fp32", 128)])
def test_headdim_and_dstate(P, N, dt, chunk):
    case = make_case(31, 1, chunk + 75, 4, P, N, 2, DT[dt])
    check(case, chunk, name=f"P {P} N {N} {dt}")


@pytest.mark.parametrize("xd", ["bf16", "fp32"])
def test_chunkpar_one_item_a_tile(xd):
    """80 tiles of 128 tokens (fewer than the grid's CTAs, too few for the walk): the chunk-parallel program of one
    (chunk, unit) item a tile in both phases, the one ``family="chunkpar"`` runs on the varlen bench row."""
    case = make_case(23, 1, 1200, 8, 64, 128, 1, DT[xd], D="hp")
    check(case, 128, name=f"one item a tile {xd}")


LENS17 = [0, 1, 5, 64, 0, 130, 63, 257, 17, 128, 300, 2, 99, 0, 190, 256, 77]


@pytest.mark.parametrize("xd", ["bf16", "fp16", "fp32"])
def test_varlen_17_sequences(xd):
    L = sum(LENS17)
    cu = np.concatenate([[0], np.cumsum(LENS17)])
    seq = np.searchsorted(cu[1:], np.arange(L), side="right").astype(np.int32)[None]  # mamba_ssm-style seq_idx
    case = make_case(41, 1, L, 8, 64, 64, 2, DT[xd], D="hp", cu_lens=LENS17, seq_idx=seq, dt_limit=(0.002, 0.08))
    errs = check(case, 64, final=True, varlen=True, chunks=True, name=f"varlen17 {xd}")
    assert set(errs) == {"y", "final", "varlen", "chunks"}


@pytest.mark.parametrize("xd, chunk", [("fp16", 64), ("bf16", 256)])
def test_one_group_of_32_units_varlen_with_empty_and_short_sequences(xd, chunk):
    """32 units a group at headdim 64 and dstate 128 (the m2-2.7b program's shape): an empty, a one-token, a
    one-chunk-plus-one and a long sequence with initial states; both families vs the reference and bitwise equal,
    every returned state."""
    lens = [0, 1, chunk + 1, 700 - chunk - 2]
    case = make_case(43, 1, sum(lens), 32, 64, 128, 1, DT[xd], cu_lens=lens)
    errs = check(case, chunk, final=True, varlen=True, chunks=True, name=f"one group {xd} chunk {chunk}")
    assert set(errs) == {"y", "final", "varlen", "chunks"}


# (x dtype, chunk, sequence lengths, phase-3 items a tile the plan picks): a row block an item (Q / 64), with sequences
# ending inside a chunk's first, second and third row block (items with no rows), an empty one and a one-token last
# chunk; and chunk 256 in pairs of row blocks (2 items a tile: 40 tiles on the grid of the 128 phase-2 items), the last
# chunks of 17 and 200 tokens (a part with no rows; a pair's second row block short)
# chunk 256 in pairs again with last chunks of 187 and 100 tokens: three and two row blocks, so part 0's pair partner
# (row block 3) is past the end, and part 1's (row block 2) too when the chunk has two; in bf16 and in fp32 (the pairs
# on the mma.sync path, whose B / X prefetch follows ssd_next_row)
ROW_PART_CASES = [("bf16", 256, [257, 0, 187, 512, 64, 17], 4), ("bf16", 128, [129, 0, 187, 256, 64, 17], 2),
                  ("fp32", 256, [257, 0, 187, 512, 64, 17], 4), ("bf16", 256, [5 * 256 + 17, 3 * 256 + 200], 2),
                  ("bf16", 256, [5 * 256 + 187, 3 * 256 + 100], 2), ("fp32", 256, [5 * 256 + 187, 3 * 256 + 100], 2)]


@pytest.mark.parametrize("xd, chunk, lens, rows", ROW_PART_CASES)
def test_chunkpar_row_parts_of_few_tiles(xd, chunk, lens, rows):
    """Few tiles for the grid (4 heads, a few short sequences): the plan splits each tile's row blocks over several
    phase-3 items and its state columns over two phase-1 items, a program of its own (SSD_ROWS, SSD_COLS; sm_90a's
    fp32 program: the mma.sync path): both families vs the reference and bitwise equal, every returned state."""
    import cake_rt

    case = make_case(47, 1, sum(lens), 4, 64, 128, 1, DT[xd], cu_lens=lens)
    errs = check(case, chunk, final=True, varlen=True, chunks=True, name=f"row parts {xd} chunk {chunk} x{rows}")
    assert set(errs) == {"y", "final", "varlen", "chunks"}
    plan = cake_rt.ops.ssd.last_plan()
    assert plan.family == "chunkpar" and plan.row_parts == plan.defines["SSD_ROWS"] == rows, plan
    assert plan.col_parts == plan.defines["SSD_COLS"] == 2, plan  # dstate 128: phase 1 in halves of the state columns


# (x dtype, dstate, chunk): the chunk-parallel walk (phase 2) keeps a few chunk loads in flight at a time: sequences of
# 29 and 45 chunks take several rounds of them and end in a partial one, beside an empty and a 3-token sequence; the
# wgmma path at dstate 64, 128 and 256, and the mma.sync path (fp32); every returned state (a checkpoint a chunk)
LONG_WALK_CASES = [("bf16", 128, 64), ("bf16", 64, 64), ("fp16", 256, 128), ("fp32", 64, 64)]


@pytest.mark.parametrize("xd, N, chunk", LONG_WALK_CASES)
def test_chunkpar_walks_of_many_chunks(xd, N, chunk):
    """Both families vs the reference and bitwise equal, every returned state (checkpoints: a state after each chunk of
    the walk), with initial states."""
    lens = [45 * chunk + 17, 0, 3, 29 * chunk]
    case = make_case(53, 1, sum(lens), 2, 64, N, 1, DT[xd], cu_lens=lens)
    errs = check(case, chunk, final=True, varlen=True, chunks=True, name=f"long walks {xd} N {N} chunk {chunk}")
    assert set(errs) == {"y", "final", "varlen", "chunks"}


@pytest.mark.parametrize("family", ["exact", "chunkpar"])
def test_neighbour_sequences_of_inf_and_nan_never_enter(family):
    """Packed sequences whose lengths end inside a 64-token sub-block, the 2nd and 4th holding inf and NaN in x, B, C
    and z: the rows and returned states of the 1st and 3rd are bitwise those of a call whose 2nd and 4th hold finite
    values (a partial sub-block's rows past its sequence's end read as zeros, never as the next sequence's rows)."""
    lens = [100, 60, 130, 70]
    cu = np.concatenate([[0], np.cumsum(lens)])
    case = make_case(47, 1, sum(lens), 8, 64, 128, 1, BF16, cu_lens=lens)
    clean = call(case, 64, family, final=True, varlen=True, chunks=True)
    for name in ("x", "B", "C"):
        h = case["host"][name].astype(np.float32)
        h[:, cu[1]:cu[2]] = np.inf
        h[:, cu[3]:cu[4]] = np.nan
        case["dev"][name] = to_dev(h.astype(BF16))
    zh = case["host_kw"]["z"].astype(np.float32)
    zh[:, cu[1]:cu[2]] = np.nan
    zh[:, cu[3]:cu[4]] = -np.inf
    case["dev_kw"]["z"] = to_dev(zh.astype(BF16))
    dirty = call(case, 64, family, final=True, varlen=True, chunks=True)
    yc, yd = to_host64(clean[0]), to_host64(dirty[0])
    for k in (0, 2):
        rows = slice(cu[k], cu[k + 1])
        assert to_bytes(clean[0][:, rows]) == to_bytes(dirty[0][:, rows]), f"sequence {k}: y moved"
        assert np.all(np.isfinite(yc[:, rows])) and np.all(np.isfinite(yd[:, rows]))
        assert to_bytes(clean[2][k]) == to_bytes(dirty[2][k]), f"sequence {k}: its state moved"
        assert np.all(np.isfinite(to_host64(clean[2][k]))), f"sequence {k}: its state not written"
    ck = np.concatenate([[0], np.cumsum([n // 64 for n in lens])])
    for k in (0, 2):
        assert to_bytes(clean[3][ck[k]:ck[k + 1]]) == to_bytes(dirty[3][ck[k]:ck[k + 1]]), f"sequence {k}: checkpoints"
        assert np.all(np.isfinite(to_host64(clean[3][ck[k]:ck[k + 1]]))), f"sequence {k}: checkpoints not written"


# (batch, seqlen, nheads, headdim, dstate, ngroups, dtype, chunk, layout, dirty spans (batch row, t0, t1), clean spans
# checked): batch rows that end inside a sub-block (the next row's tokens follow in memory), seq_idx segments of two
# rows in 256-token chunks (partial sub-blocks after whole ones inside a chunk) at headdim 128 (two units a head: a
# box is half a head) and dstate 256 (phase 1 in two column passes), and packed fp16 sequences. Shapes of
# ops.ssd._PROGRAM_CASES (programs the GPU run prewarms).
NEIGHBOUR_CASES = {
    "rows": (3, 100, 4, 64, 64, 1, BF16, 64, None, [(1, 0, 100)], [(0, 0, 100), (2, 0, 100)]),
    "seq_idx": (2, 300, 4, 128, 256, 2, BF16, 256, [70, 90, 140], [(0, 70, 160), (1, 70, 160)],
                [(0, 0, 70), (0, 160, 300), (1, 0, 70), (1, 160, 300)]),
    "packed_q256": (1, 585, 8, 64, 128, 1, FP16, 256, [200, 64, 190, 130, 1], [(0, 200, 264), (0, 454, 584)],
                    [(0, 0, 200), (0, 264, 454), (0, 584, 585)]),
}


@pytest.mark.parametrize("family", ["exact", "chunkpar"])
@pytest.mark.parametrize("name", sorted(NEIGHBOUR_CASES))
def test_tensor_map_tiles_never_cross_a_segment_end(name, family):
    """Segments whose neighbours hold inf and NaN in x, B, C and z, beside the tensor-map programs' whole 64-token
    boxes and the cp.async copies of the partial sub-blocks: the clean segments' rows and final states are bitwise those
    of a call whose neighbours hold finite values, in every layout that bounds a segment (batch rows, seq_idx runs,
    cu_seqlens), chunk 64 to 256, headdim 128, dstate 256 and fp16."""
    import cake_rt

    b, L, H, P, N, G, dt, chunk, layout, dirty_spans, clean_spans = NEIGHBOUR_CASES[name]
    kw = {}
    if name == "seq_idx":
        kw["seq_idx"] = np.repeat(np.arange(len(layout), dtype=np.int32), layout)[None].repeat(b, 0)
    elif layout is not None:
        kw["cu_lens"] = layout
    case = make_case(61, b, L, H, P, N, G, dt, **kw)
    want = dict(final=True, varlen=name == "packed_q256")
    clean = call(case, chunk, family, **want)
    assert cake_rt.ops.ssd.last_plan().defines["SSD_WG"], "not a tensor-map program"
    for key, holder, fills in (("x", "dev", (np.inf, np.nan)), ("B", "dev", (-np.inf, np.nan)),
                               ("C", "dev", (np.nan, np.inf)), ("z", "dev_kw", (np.nan, -np.inf))):
        h = (case["host"] if holder == "dev" else case["host_kw"])[key].astype(np.float32)
        for k, (r, t0, t1) in enumerate(dirty_spans):
            h[r, t0:t1] = fills[k % 2]
        case[holder][key] = to_dev(h.astype(dt))
    dirty = call(case, chunk, family, **want)
    for r, t0, t1 in clean_spans:
        assert to_bytes(clean[0][r, t0:t1]) == to_bytes(dirty[0][r, t0:t1]), f"row {r} tokens {t0}..{t1}: y moved"
        assert np.all(np.isfinite(to_host64(dirty[0][r, t0:t1])))
    if name == "packed_q256":  # sequences 0, 2 and 4 are clean: their states
        for k in (0, 2, 4):
            assert to_bytes(clean[2][k]) == to_bytes(dirty[2][k]), f"sequence {k}: its state moved"
            assert np.all(np.isfinite(to_host64(clean[2][k]))), f"sequence {k}: its state not written"
    else:  # every row's last segment is clean
        rows = sorted({r for r, _, _ in clean_spans})
        assert to_bytes(clean[1][rows]) == to_bytes(dirty[1][rows]), "a row's final state moved"
        assert np.all(np.isfinite(to_host64(clean[1][rows]))), "a row's final state not written"


def test_varlen_without_seq_idx_and_empty_last_sequence():
    lens = [70, 0, 33, 0]
    case = make_case(42, 1, sum(lens), 4, 64, 64, 1, BF16, cu_lens=lens)
    check(case, 64, final=True, varlen=True, chunks=True, name="varlen empty last")
    # the empty last sequence returns its initial state, and final == varlen[-1]
    y, fin, var, ck = call(case, 64, "auto", final=True, varlen=True, chunks=True)
    init = case["dev_kw"]["initial_states"]
    assert to_bytes(var[3]) == to_bytes(init[3]) and to_bytes(fin[0]) == to_bytes(var[3])


def test_seq_idx_batched_rows():
    L = 400
    s = np.zeros((2, L), np.int32)
    s[0, 150:] = 1
    s[0, 151:] = 2   # a one-token segment
    s[1, 300:] = 9
    case = make_case(51, 2, L, 8, 64, 128, 1, BF16, seq_idx=s)
    check(case, 128, name="seq_idx batched")


def test_short_sequences_and_no_optional_inputs():
    case = make_case(61, 3, 37, 8, 64, 128, 1, FP32, z=False, D=None, bias=False, softplus=False, init=False)
    # without softplus dt can be negative: keep the math well-conditioned with dt = |dt| * 0.05
    case["host"]["dt"] = np.abs(case["host"]["dt"]) * np.float32(0.05)
    case["dev"]["dt"] = to_dev(case["host"]["dt"])
    check(case, 256, name="short no optionals")


def test_empty_sequence_length_zero():
    import cupy

    import cake_rt

    case = make_case(62, 2, 0, 4, 64, 64, 1, BF16)
    d = case["dev"]
    y, fin = cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], 64, **case["dev_kw"],
                                  return_final_states=True)
    assert y.shape == (2, 0, 4, 64)
    assert to_bytes(fin) == to_bytes(case["dev_kw"]["initial_states"])
    cupy.cuda.Device().synchronize()


def test_plans_env_override_and_workspace_cap(monkeypatch):
    import cake_rt
    from cake_rt.launch.arch import device_info
    from cake_rt.launch.grid import record_launches

    sms = device_info().sm_count
    case = make_case(71, 1, 8192, 8, 64, 128, 1, BF16)
    d = case["dev"]
    args = (d["x"], d["dt"], d["A"], d["B"], d["C"], 256)
    p = cake_rt.ssd_plan(*args, **case["dev_kw"])
    print("PLAN long/few heads:", p)
    assert p.family == "chunkpar" and p.workspace_bytes > 0 and p.cooperative_capacity >= p.grid
    monkeypatch.setenv("CAKE_RT_SSD_CHUNK_PARALLEL", "never")
    assert cake_rt.ssd_plan(*args, **case["dev_kw"]).family == "exact"
    monkeypatch.setenv("CAKE_RT_SSD_CHUNK_PARALLEL", "auto")
    monkeypatch.setenv("CAKE_RT_SSD_WORKSPACE_CAP", "1000")
    p = cake_rt.ssd_plan(*args, **case["dev_kw"])
    assert p.family == "exact" and "cap" in p.reason
    out = poison(d["x"].shape, d["x"].dtype)
    before = to_bytes(out)
    with record_launches() as recs:
        with pytest.raises(ValueError, match="cap"):
            cake_rt.ssd_combined(*args, **case["dev_kw"], family="chunkpar", out=out)
    assert recs == [] and to_bytes(out) == before
    monkeypatch.delenv("CAKE_RT_SSD_WORKSPACE_CAP")
    # many (segment, head) items: auto takes the family the cost model predicts faster (a tie: the exact scan), and
    # the environment and an explicit family override it
    many = make_case(72, 1, 300, sms, 64, 64, 1, BF16)
    dm = many["dev"]
    margs = (dm["x"], dm["dt"], dm["A"], dm["B"], dm["C"], 64)
    p = cake_rt.ssd_plan(*margs, **many["dev_kw"])
    pred = p.predicted_us
    assert p.family == ("chunkpar" if pred["chunkpar"] < pred["exact"] else "exact"), p
    assert p.reason.startswith("cost model:"), p
    monkeypatch.setenv("CAKE_RT_SSD_CHUNK_PARALLEL", "always")
    assert cake_rt.ssd_plan(*margs, **many["dev_kw"]).family == "chunkpar"
    assert cake_rt.ssd_plan(*margs, **many["dev_kw"], family="exact").family == "exact"
    monkeypatch.setenv("CAKE_RT_SSD_CHUNK_PARALLEL", "never")
    assert cake_rt.ssd_plan(*margs, **many["dev_kw"]).family == "exact"


@pytest.mark.parametrize("H, P, N", [(8, 128, 64), (64, 64, 128)])
def test_chunkpar_over_the_cap_runs_in_slices(monkeypatch, H, P, N):
    """A cap that holds only part of the units cuts the chunk-parallel work into slices (phase 3 of one
    running into phase 1 of the next): same bits as one slice and as the exact scan. With 32 units a group at
    dstate 128 (sm_90a: C B^T once per (chunk, group)) the full call stages C B^T and the sliced one, whose slices
    the CB part would shrink, runs the program without it: the two programs' bits agree too."""
    import cake_rt

    case = make_case(73, 1, 700, H, P, N, 2, BF16)   # 16 units, 8 a group; 64 units, 32 a group
    full = call(case, 128, "chunkpar", final=True, chunks=True)
    plan = cake_rt.ops.ssd.last_plan()
    assert plan.slice_units == H * P // 64
    monkeypatch.setenv("CAKE_RT_SSD_WORKSPACE_CAP", str(plan.workspace_bytes // 3))
    sliced = call(case, 128, "chunkpar", final=True, chunks=True)
    plan = cake_rt.ops.ssd.last_plan()
    assert 0 < plan.slice_units < H * P // 64 and plan.workspace_bytes <= plan.workspace_cap
    ex = call(case, 128, "exact", final=True, chunks=True)
    for a, b, c in zip(full, sliced, ex):
        assert to_bytes(a) == to_bytes(b) == to_bytes(c)


def test_chunkpar_slices_of_one_group(monkeypatch):
    """32 units a group at headdim 64 and dstate 128, under a cap that cuts them into slices of at most 10 units
    (every slice reads the one group's B and C): same bits as one slice and as the exact scan."""
    import cake_rt

    case = make_case(74, 1, 700, 32, 64, 128, 1, BF16)  # 32 units, one group
    d = case["dev"]
    args = (d["x"], d["dt"], d["A"], d["B"], d["C"], 64)
    kw = dict(case["dev_kw"], return_final_states=True, return_chunk_states=True, state_dtype=case["state_dtype"],
              family="chunkpar")
    whole = cake_rt.ssd_plan(*args, **kw)
    assert whole.slice_units == 32
    full = call(case, 64, "chunkpar", final=True, chunks=True)
    found = None
    for cap in range(whole.workspace_bytes, 0, -(whole.workspace_bytes // 256)):
        monkeypatch.setenv("CAKE_RT_SSD_WORKSPACE_CAP", str(cap))
        plan = cake_rt.ssd_plan(*args, **kw)
        if 0 < plan.slice_units <= 10:
            found = cap
            break
    assert found is not None, "no cap gives slices of at most 10 units"
    sliced = call(case, 64, "chunkpar", final=True, chunks=True)
    plan = cake_rt.ops.ssd.last_plan()
    assert 0 < plan.slice_units <= 10 and plan.workspace_bytes <= found
    ex = call(case, 64, "exact", final=True, chunks=True)
    for a, b, c in zip(full, sliced, ex):
        assert to_bytes(a) == to_bytes(b) == to_bytes(c)


# (seed, nheads, headdim, dstate, ngroups, chunk, sequence lengths): chunk-parallel calls cut into slices whose
# count is odd and whose last slice is shorter, with varlen sequences (empty, one-token, shorter than a row block, a
# last chunk of any length), initial states and every returned state. headdim 128: slices cut heads in two (a head's
# decays written by the slice before); chunk 256: a row block an item (SSD_ROWS 4) in every slice. Shapes of
# ops.ssd._PROGRAM_CASES.
SLICED_VARLEN_CASES = {
    "headdim128": (131, 8, 128, 64, 2, 128, [0, 1, 300, 129, 64, 517, 17]),
    "chunk256": (132, 8, 64, 128, 1, 256, [0, 187, 1, 300, 64, 17]),
    "chunk64": (133, 8, 64, 128, 1, 64, [3, 0, 200, 64, 1, 130]),
}


def _odd_slices_cap(monkeypatch, args, kw, units):
    """The largest workspace cap (set in the environment) under which the chunk-parallel plan cuts ``units`` units
    into an odd number (3 or more) of slices with a shorter last slice, and that plan; (None, None) when no cap does."""
    import cake_rt

    whole = cake_rt.ssd_plan(*args, **kw)
    for cap in range(whole.workspace_bytes, 0, -max(1, whole.workspace_bytes // 512)):
        monkeypatch.setenv("CAKE_RT_SSD_WORKSPACE_CAP", str(cap))
        plan = cake_rt.ssd_plan(*args, **kw)
        n = plan.slice_units
        if plan.family == "chunkpar" and 0 < n < units and units % n and (-(-units // n)) % 2:
            return cap, plan
    return None, None


@pytest.mark.parametrize("name", sorted(SLICED_VARLEN_CASES))
def test_chunkpar_odd_slices_with_varlen_and_every_state(monkeypatch, name):
    """Phase 1 of a slice runs while other CTAs still run phase 3 of the one before (no grid barrier between them):
    with an odd number of slices, the last one shorter, the saved prep's two parts alternate unevenly; both families
    vs the reference and bitwise equal, every returned state (varlen, final, chunk checkpoints)."""
    import cake_rt

    seed, H, P, N, G, chunk, lens = SLICED_VARLEN_CASES[name]
    case = make_case(seed, 1, sum(lens), H, P, N, G, BF16, D="hp", cu_lens=lens)
    d = case["dev"]
    kw = dict(case["dev_kw"], return_final_states=True, return_varlen_states=True, return_chunk_states=True,
              state_dtype=case["state_dtype"], family="chunkpar")
    units = H * P // 64
    cap, plan = _odd_slices_cap(monkeypatch, (d["x"], d["dt"], d["A"], d["B"], d["C"], chunk), kw, units)
    assert cap is not None, f"{name}: no cap gives an odd number of slices with a shorter last one"
    print(f"SLICES {name}: cap {cap}, {plan.slice_units} of {units} units, SSD_ROWS {plan.row_parts}, grid {plan.grid}")
    errs = check(case, chunk, final=True, varlen=True, chunks=True, name=f"odd slices {name}")
    assert set(errs) == {"y", "final", "varlen", "chunks"}
    got = cake_rt.ops.ssd.last_plan()
    assert got.family == "chunkpar" and got.slice_units == plan.slice_units and got.workspace_bytes <= cap, got


def test_chunkpar_sliced_graph_replayed_between_sliced_eager_calls(monkeypatch):
    """A captured chunk-parallel call in slices (headdim 128, slices of an odd number of units: heads cut) replayed 18
    times, with eager calls of another problem in slices (chunk 256, a row block an item) on the same stream, workspace
    and grid-barrier words in between and graph launches back to back, with no synchronization: each replay's output
    (copied out on the stream) and each eager call's are the exact scan's."""
    import cupy

    import cake_rt

    cases = [(make_case(141, 1, 900, 8, 128, 64, 2), 128), (make_case(142, 1, 700, 8, 64, 128, 1), 256)]
    wholes = []
    for case, chunk in cases:
        d = case["dev"]
        wholes.append(cake_rt.ssd_plan(d["x"], d["dt"], d["A"], d["B"], d["C"], chunk, **case["dev_kw"],
                                       return_final_states=True, family="chunkpar").workspace_bytes)
    monkeypatch.setenv("CAKE_RT_SSD_WORKSPACE_CAP", str(2 * min(wholes) // 3))
    s = cupy.cuda.Stream(non_blocking=True)
    want, chunkpar = _exact_and_chunkpar_calls(cases, s)
    for k in (1, 0):  # eager first: the capture finds the stream's state, workspace and words
        chunkpar(k)
        plan = cake_rt.ops.ssd.last_plan()
        units = cases[k][0]["shape"][2] * cases[k][0]["shape"][3] // 64
        assert plan.family == "chunkpar" and 0 < plan.slice_units < units, (k, plan)
    graph, y = _captured_chunkpar(cases[0], s)
    replays, eager = [], []
    for i in range(12):
        graph.launch(s)
        with s:  # the copy and the eager call's poisoned outputs in stream order
            replays.append(y.copy())
            eager.append(chunkpar(1))
        if i % 2:
            graph.launch(s)  # two sliced launches of the graph back to back
    s.synchronize()
    for r in replays:
        assert to_bytes(r) == want[0][0]
    for r in eager:
        assert tuple(to_bytes(a) for a in r) == want[1]


def test_chunkpar_launch_is_cooperative_and_leaves_words_zero():
    import cupy

    import cake_rt
    from cake_rt.launch.grid import record_launches
    from cake_rt.launch.tickets import stream_ticket_words

    case = make_case(81, 1, 1000, 4, 64, 128, 1, BF16)
    d = case["dev"]
    with record_launches() as recs:
        cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], 64, **case["dev_kw"], family="chunkpar")
    assert len(recs) == 1 and recs[0].cooperative and recs[0].name == "ssd_chunkpar"
    plan = cake_rt.ops.ssd.last_plan()
    assert recs[0].grid[0] == plan.grid <= plan.cooperative_capacity
    cupy.cuda.Device().synchronize()
    words = stream_ticket_words(cupy.cuda.get_current_stream())
    w = words.read()
    assert w[0] == w[1] == 0  # the arrival count and the exit count back to 0
    with record_launches() as recs:
        cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], 64, **case["dev_kw"], family="exact")
    assert len(recs) == 1 and not recs[0].cooperative and recs[0].name == "ssd_exact"


def _captured_chunkpar(case_chunk, stream):
    """(graph, y): a chunk-parallel call of ``case_chunk`` = (case, chunk) captured on ``stream`` into a poisoned y."""
    import cake_rt

    case, chunk = case_chunk
    d = case["dev"]
    with stream:  # the poison's fill in stream order with the replays on the stream (not with the legacy stream)
        y = poison(d["x"].shape, d["x"].dtype)
    stream.synchronize()
    stream.begin_capture()
    try:
        cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], chunk, **case["dev_kw"], out=y,
                             family="chunkpar", stream=stream)
    finally:
        graph = stream.end_capture()
    return graph, y


def _exact_and_chunkpar_calls(cases, stream):
    """Per case (case, chunk): the exact scan's outputs (y, final states), and a function that queues a
    chunk-parallel call on ``stream`` into fresh poisoned outputs and returns them (no synchronization)."""
    import cake_rt

    def run(case, chunk, family, y):
        d = case["dev"]
        kw = dict(case["dev_kw"])
        if "cu_seqlens" in kw:  # host metadata (a memoized problem, as a captured call needs)
            kw["cu_seqlens"] = case["host_kw"]["cu_seqlens"]
        return cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], chunk, **kw, out=y,
                                    return_final_states=True, family=family, stream=stream)

    want = [tuple(to_bytes(a) for a in call(case, chunk, "exact", final=True)) for case, chunk in cases]

    def chunkpar(k):
        case, chunk = cases[k]
        with stream:  # the poison's fill is ordered before the call on the call's own stream
            y = poison(case["dev"]["x"].shape, case["dev"]["x"].dtype)
        return run(case, chunk, "chunkpar", y)
    return want, chunkpar


def test_chunkpar_programs_alternating_on_one_stream(monkeypatch):
    """Calls of chunk-parallel programs of four shapes alternate on one stream with no synchronization between them
    (the grid barrier's words of the stream shared by all; one program in slices, the prep's two parts):
    every call gives the exact scan's bits."""
    import cupy

    import cake_rt

    cases = [(make_case(101, 1, 1000, 4, 64, 128, 1), 64), (make_case(102, 1, 700, 6, 64, 128, 1), 128),
             (make_case(103, 1, 1500, 8, 64, 64, 2, cu_lens=[700, 300, 500]), 128),
             (make_case(104, 1, 3000, 8, 64, 128, 1), 64)]
    big = cases[3]
    d = big[0]["dev"]
    whole = cake_rt.ssd_plan(d["x"], d["dt"], d["A"], d["B"], d["C"], 64, **big[0]["dev_kw"],
                             return_final_states=True, family="chunkpar")
    monkeypatch.setenv("CAKE_RT_SSD_WORKSPACE_CAP", str(whole.workspace_bytes // 3))
    s = cupy.cuda.Stream(non_blocking=True)
    want, chunkpar = _exact_and_chunkpar_calls(cases, s)
    slices = []
    for k in range(len(cases)):
        chunkpar(k)
        slices.append(cake_rt.ops.ssd.last_plan().slice_units)
    assert 0 < slices[3] < 8 and all(0 < n == c[0]["shape"][2] for n, c in zip(slices[:3], cases)), slices
    got = [(k, chunkpar(k)) for _ in range(6) for k in (0, 3, 1, 2, 1, 0)]
    s.synchronize()
    for k, res in got:
        assert tuple(to_bytes(a) for a in res) == want[k], k


def test_chunkpar_graph_replayed_many_times_between_eager_calls():
    """A captured chunk-parallel call replayed 40 times, with eager calls of another problem on the same stream (and
    its grid barrier's words) in between: each replay's output (copied out on the stream) and each eager call's
    are the exact scan's."""
    import cupy

    cases = [(make_case(111, 1, 900, 4, 64, 128, 1), 64), (make_case(112, 1, 600, 6, 64, 128, 1), 128)]
    s = cupy.cuda.Stream(non_blocking=True)
    want, chunkpar = _exact_and_chunkpar_calls(cases, s)
    chunkpar(1)
    chunkpar(0)  # eager, so that the capture finds the stream's state, workspace and words
    graph, y = _captured_chunkpar(cases[0], s)
    replays, eager = [], []
    for i in range(40):
        graph.launch(s)
        with s:
            replays.append(y.copy())
        if i % 3 == 0:
            eager.append(chunkpar(1))
    s.synchronize()
    for r in replays:
        assert to_bytes(r) == want[0][0]
    for r in eager:
        assert tuple(to_bytes(a) for a in r) == want[1]


def test_walk_replayed_and_alternating_with_other_programs_on_one_stream(monkeypatch):
    """The walk schedule (forced) beside a three-phase program on one stream, with no synchronization between calls:
    the walk's own workspace layout (its rings, published counts and slot reads) in the stream's workspace, which the
    other program's call fills with its own data between two walks, and the stream's barrier and ticket words shared;
    then a captured walk replayed between eager calls of the others. Every output is the exact scan's."""
    import cupy

    from cake_rt.ops import ssd as ops

    monkeypatch.setattr(ops, "_SCHEDULE", "walk")
    cases = [(make_case(121, 1, 2100, 8, 64, 128, 2), 128),                            # a walk of 17 chunks
             (make_case(122, 1, 900, 4, 64, 128, 1, FP32), 64),                        # fp32: three phases
             (make_case(123, 1, 1500, 8, 64, 64, 2, cu_lens=[700, 300, 500]), 128)]   # a varlen walk
    s = cupy.cuda.Stream(non_blocking=True)
    want, chunkpar = _exact_and_chunkpar_calls(cases, s)
    walks = []
    for k in range(len(cases)):
        chunkpar(k)
        walks.append(bool(ops.last_plan().defines.get("SSD_WALK")))
    assert walks == [True, False, True], walks
    got = [(k, chunkpar(k)) for _ in range(3) for k in (0, 1, 0, 2, 2, 1)]
    graph, y = _captured_chunkpar(cases[0], s)
    replays = []
    for i in range(12):
        graph.launch(s)
        with s:
            replays.append(y.copy())
        k = 1 + i % 2
        got.append((k, chunkpar(k)))
    s.synchronize()
    for k, res in got:
        assert tuple(to_bytes(a) for a in res) == want[k], k
    for r in replays:
        assert to_bytes(r) == want[0][0]


def test_errors_before_launch_leave_out_untouched():
    import cake_rt
    from cake_rt.launch.grid import record_launches

    case = make_case(91, 1, 200, 4, 64, 64, 1, BF16)
    d = case["dev"]
    out = poison(d["x"].shape, d["x"].dtype)
    before = to_bytes(out)
    bad = [  # (arguments replaced, the argument the message starts with)
        (dict(dt=d["dt"][:, :100]), "dt"),
        (dict(A=to_dev(np.zeros(4, np.float64))), "A"),
        (dict(B=to_dev(np.ones((1, 200, 3, 64), np.float32).astype(BF16))), "B"),
        (dict(x=d["x"][:, ::2]), "x"),
        (dict(chunk=96), "chunk_size"),
        (dict(dt_limit=(1.0, 0.0)), "dt_limit"),
        (dict(cu_seqlens=to_dev(np.array([0, 50, 40, 200], np.int32))), "cu_seqlens"),
    ]
    for kw, name in bad:
        a = dict(x=d["x"], dt=d["dt"], A=d["A"], B=d["B"], C=d["C"], chunk=64)
        kwargs = dict(case["dev_kw"])
        for k, v in kw.items():
            if k in a:
                a[k] = v
            else:
                kwargs[k] = v
        with record_launches() as recs:
            with pytest.raises((ValueError, TypeError), match=f"^{name}: "):
                cake_rt.ssd_combined(a["x"], a["dt"], a["A"], a["B"], a["C"], a["chunk"], **kwargs, out=out)
        assert recs == [], kw
        assert to_bytes(out) == before, kw
    with pytest.raises(TypeError, match="^x:"):
        cake_rt.ssd_combined(case["host"]["x"], d["dt"], d["A"], d["B"], d["C"], 64)


def test_eager_capture_with_device_metadata_is_a_clear_error():
    """cu_seqlens / seq_idx on the device need a device-to-host copy, which a CUDA graph capture forbids: a
    ValueError naming the argument, nothing launched (out keeps its poison), and the capture still ends
    cleanly. The same call with host metadata, made once eagerly, is captured and replays the eager bits."""
    import cupy

    import cake_rt

    case = make_case(23, 1, 300, 4, 64, 64, 1, cu_lens=[120, 180])
    d, kw = case["dev"], dict(case["dev_kw"])
    s = cupy.cuda.Stream(non_blocking=True)
    for name in ("cu_seqlens", "seq_idx"):
        kw_dev = dict(kw)
        if name == "seq_idx":
            kw_dev["seq_idx"] = cupy.asarray(np.repeat(np.arange(2, dtype=np.int32), [120, 180])[None])
        y = poison(d["x"].shape, d["x"].dtype)
        before = to_bytes(y)
        cupy.cuda.Device().synchronize()
        s.begin_capture()
        try:
            with pytest.raises(ValueError, match=name):
                cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], 64, **kw_dev, out=y, stream=s)
        finally:
            s.end_capture()
        assert to_bytes(y) == before
    host_kw = dict(kw, cu_seqlens=case["host_kw"]["cu_seqlens"])
    with s:  # the poison's fill in stream order with the eager call on s
        want = poison(d["x"].shape, d["x"].dtype)
    want = cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], 64, **host_kw, out=want, stream=s)
    y = poison(d["x"].shape, d["x"].dtype)
    cupy.cuda.Device().synchronize()
    s.begin_capture()
    try:
        cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], 64, **host_kw, out=y, stream=s)
    finally:
        graph = s.end_capture()
    graph.launch(s)
    s.synchronize()
    assert to_bytes(y) == to_bytes(want)


def test_side_stream_gives_same_bits_and_auto_matches():
    import cupy

    case = make_case(101, 1, 777, 4, 64, 128, 1, BF16)
    base = call(case, 128, "exact", final=True)
    s = cupy.cuda.Stream(non_blocking=True)
    for fam in ("chunkpar", "exact", "auto"):
        res = call(case, 128, fam, final=True, stream=s)
        s.synchronize()
        assert all(to_bytes(a) == to_bytes(b) for a, b in zip(base, res)), fam


def test_torch_tensors_through_dlpack():
    torch = pytest.importorskip("torch")
    import cupy

    import cake_rt

    case = make_case(111, 1, 300, 4, 64, 64, 1, BF16)
    d = case["dev"]
    t = {k: torch.from_dlpack(v) for k, v in d.items()}
    tkw = {k: (torch.from_dlpack(v) if isinstance(v, cupy.ndarray) else v) for k, v in case["dev_kw"].items()}
    y_t = cake_rt.ssd_combined(t["x"], t["dt"], t["A"], t["B"], t["C"], 64, **tkw)
    y_c = cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], 64, **case["dev_kw"])
    assert to_bytes(y_t) == to_bytes(y_c)
    back = torch.from_dlpack(y_t)
    assert back.dtype == torch.bfloat16 and tuple(back.shape) == (1, 300, 4, 64)


def test_more_than_2_31_elements():
    """x and y hold > 2^31 elements; strong decay makes the tail depend only on recent tokens, so the last
    tokens (element offsets past 2^31) are checked against the reference run on a short suffix."""
    import cupy

    import cake_rt
    from cake_rt.bench.arrays import random_normal
    from cake_rt.reference.ssd import ssd_reference_chunked

    H, P, N = 256, 64, 64   # many heads: the exact scan runs one wave of 256 CTAs over 514 chunks
    L = (1 << 17) + 300
    assert L * H * P > 2**31
    x = random_normal((1, L, H, P), "bfloat16", seed=5)
    B = random_normal((1, L, 1, N), "bfloat16", seed=6)
    C = random_normal((1, L, 1, N), "bfloat16", seed=7)
    dt = cupy.full((1, L, H), 1.0, cupy.float32)
    A = cupy.full((H,), -8.0, cupy.float32)   # decay exp(-8) per token
    y, fin = cake_rt.ssd_combined(x, dt, A, B, C, 256, return_final_states=True, family="exact")
    cupy.cuda.Device().synchronize()
    T = 200
    ref_y, ref_f = ssd_reference_chunked(to_host64(x[:, -T:]), dt[:, -T:].get(), A.get(), to_host64(B[:, -T:]),
                                         to_host64(C[:, -T:]), 256, return_final_states=True)
    tail = to_host64(y[:, -150:])
    assert rel_l2(tail, ref_y[:, -150:]) < 1e-2
    assert rel_l2(to_host64(fin), ref_f) < 1e-2
    head_ref = ssd_reference_chunked(to_host64(x[:, :T]), dt[:, :T].get(), A.get(), to_host64(B[:, :T]),
                                     to_host64(C[:, :T]), 256)
    assert rel_l2(to_host64(y[:, :T]), head_ref) < 1e-2


def test_accuracy_vs_mamba_ssm_triton():
    """Same inputs through mamba_ssm's Triton kernel (when importable): cake-rt's error vs the float64
    reference is no larger than its error (x 1.1 slack for rounding noise)."""
    torch = pytest.importorskip("torch")
    try:
        from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
    except Exception as exc:
        pytest.skip(f"mamba_ssm not importable: {exc}")
    for xd in ("bf16", "fp16", "fp32"):
        case = make_case(121, 1, 2048, 8, 64, 128, 1, DT[xd], init=False)
        ref = reference(case, 256, final=True)
        ours = call(case, 256, "auto", final=True)
        d = case["dev"]
        t = {k: torch.from_dlpack(v) for k, v in d.items()}
        kw = {k: torch.from_dlpack(v) for k, v in case["dev_kw"].items() if k in ("D", "z", "dt_bias")}
        my, mf = mamba_chunk_scan_combined(t["x"], t["dt"], t["A"], t["B"], t["C"], 256, **kw, dt_softplus=True,
                                           return_final_states=True)
        torch.cuda.synchronize()
        import cupy

        theirs = [to_host64(cupy.from_dlpack(my)), to_host64(cupy.from_dlpack(mf.float().contiguous()))]
        for i, nm in enumerate(("y", "final")):
            eo, et = rel_l2(to_host64(ours[i]), ref[i]), rel_l2(theirs[i], ref[i])
            print(f"ACC-vs-mamba {xd} {nm}: cake-rt {eo:.3e} mamba_ssm {et:.3e}")
            if xd != "fp32":
                assert eo <= 1.1 * et + 1e-7, (xd, nm, eo, et)
            else:
                assert eo < 1e-4


def test_selftest_hook():
    """The `cake-rt selftest` hook passes (not run on the device in the session that added it)."""
    from cake_rt.ops.ssd import selftest

    ok, detail = selftest()
    print("SELFTEST", detail)
    assert ok, detail


# The walk schedule of the chunk-parallel kernel (docs/ssd.md "The walk schedule"): forced on calls it applies to, the
# same bits as the exact scan; a ring of 2 or 3 chunks makes every walker wait for its slots' reads. (dtype, ring, chunk,
# headdim, dstate, tokens, dt and state dtype): 71 chunks of 128 (the last partial) with initial states; chunk 256 and
# dstate 128, the m2-2.7b row's walk (a chunk's row blocks through the carried state); dstate 64; headdim 128 (two
# units a head); dt and the states in bf16.
WALK_CASES = [(BF16, None, 128, 64, 128, 9000, None), (FP16, None, 128, 64, 128, 9000, None),
              (BF16, 2, 128, 64, 128, 9000, None), (BF16, None, 256, 64, 128, 2100, None),
              (FP16, 3, 256, 64, 128, 2100, None), (FP16, None, 128, 64, 64, 3000, None),
              (BF16, None, 128, 128, 128, 3000, None), (BF16, None, 128, 64, 128, 3000, BF16)]


@pytest.mark.parametrize("dtype, ring, chunk, P, N, L, low", WALK_CASES)
def test_walk_schedule_is_bitwise_the_exact_scan(monkeypatch, dtype, ring, chunk, P, N, L, low):
    from cake_rt.ops import ssd as ops

    monkeypatch.setattr(ops, "_SCHEDULE", "walk")
    monkeypatch.setattr(ops, "_WALK_RING", ring)
    kw = {} if low is None else dict(dt_dtype=low, state_dtype=low)
    case = make_case(81, 1, L, 8, P, N, 2, dtype, **kw)
    name = f"walk {np.dtype(dtype).name} ring {ring} chunk {chunk} P {P} N {N}" + ("" if low is None else " low")
    check(case, chunk, final=True, chunks=True, name=name)
    plan = ops.last_plan()
    nchunks = -(-L // chunk)
    assert plan.family == "chunkpar" and plan.defines.get("SSD_WALK") == 1 and plan.walk_ring == (ring or nchunks), plan


def test_walk_schedule_varlen_with_an_empty_sequence(monkeypatch):
    from cake_rt.ops import ssd as ops

    monkeypatch.setattr(ops, "_SCHEDULE", "walk")
    case = make_case(82, 1, 3000, 6, 128, 64, 3, BF16, cu_lens=[100, 0, 1157, 1743])
    check(case, 64, final=True, varlen=True, chunks=True, name="walk varlen")
    plan = ops.last_plan()
    assert plan.defines.get("SSD_WALK") == 1 and plan.walk_ring > 0, plan
