"""GPU tests of the chunk-parallel kernel's two schedules (three-phase, chained: the cross-chunk recurrence done by the
phase-1 tiles through L2-resident state slots), each forced on the contract's feature matrix: bitwise the exact scan's outputs and
returned states, repeated calls identical, back-to-back calls on one stream, a captured graph replayed, slices, and
the state words left at zero by every launch."""
import numpy as np
import pytest

from ssd_gpu_util import call, make_case, poison, to_bytes
from cake_rt.interop import BF16, FP16, FP32

pytestmark = pytest.mark.gpu

SCHEDULES = ("three-phase", "chained")


@pytest.fixture(params=SCHEDULES)
def schedule(request, monkeypatch):
    import cake_rt.ops.ssd as ops

    monkeypatch.setattr(ops, "_FORCE_SCHEDULE", request.param)
    return request.param


def same_as_exact(case, chunk, schedule, *, final=True, varlen=False, chunks=True):
    import cake_rt

    ex = call(case, chunk, "exact", final=final, varlen=varlen, chunks=chunks)
    cp = call(case, chunk, "chunkpar", final=final, varlen=varlen, chunks=chunks)
    plan = cake_rt.ops.ssd.last_plan()
    assert plan.family == "chunkpar" and plan.schedule == schedule, str(plan)
    cp2 = call(case, chunk, "chunkpar", final=final, varlen=varlen, chunks=chunks)
    names = ["y"] + (["final"] if final else []) + (["varlen"] if varlen else []) + (["chunks"] if chunks else [])
    for i, nm in enumerate(names):
        assert to_bytes(ex[i]) == to_bytes(cp[i]), f"{schedule}: {nm} differs from the exact scan"
        assert to_bytes(cp[i]) == to_bytes(cp2[i]), f"{schedule}: {nm} differs between two runs"
    return plan


LENS = [0, 1, 5, 64, 0, 130, 63, 257, 17, 128, 300, 2, 99, 0, 190, 256, 77]  # empty, one-token, one-chunk segments


@pytest.mark.parametrize("xd", [BF16, FP16, FP32])
def test_varlen_many_short_segments(schedule, xd):
    case = make_case(301, 1, sum(LENS), 8, 64, 64, 2, xd, cu_lens=LENS, D="hp")
    same_as_exact(case, 64, schedule, varlen=True)


@pytest.mark.parametrize("P, N, Q", [(64, 64, 64), (64, 128, 128), (128, 256, 256), (128, 64, 128), (64, 64, 256),
                                     (64, 128, 256)])
def test_headdim_dstate_chunk(schedule, P, N, Q):
    case = make_case(302 + N + Q, 2, 3 * Q + 41, 4, P, N, 2, BF16)
    same_as_exact(case, Q, schedule)


@pytest.mark.parametrize("xd, sd", [(FP32, FP32), (FP16, BF16), (BF16, FP16)])
def test_dtypes_and_state_dtypes(schedule, xd, sd):
    case = make_case(303, 1, 700, 8, 64, 64, 8, xd, state_dtype=sd, dt_dtype=FP16 if xd is FP16 else FP32)
    same_as_exact(case, 128, schedule)


def test_seq_idx_rows_without_initial_states(schedule):
    L = 600
    seq = np.zeros((2, L), np.int32)
    seq[0, 200:] = 1
    seq[1, 130:] = 1
    seq[1, 131:] = 2
    case = make_case(304, 2, L, 4, 64, 128, 1, BF16, seq_idx=seq, init=False)
    same_as_exact(case, 64, schedule)


def test_slices_reuse_the_state_words(schedule, monkeypatch):
    import cake_rt

    case = make_case(305, 1, 2000, 8, 64, 128, 1, BF16, cu_lens=[700, 1, 1299])
    d = case["dev"]
    whole = cake_rt.ssd_plan(d["x"], d["dt"], d["A"], d["B"], d["C"], 64, **case["dev_kw"], family="chunkpar")
    monkeypatch.setenv("CAKE_RT_SSD_WORKSPACE_CAP", str(whole.workspace_bytes // 3))
    plan = same_as_exact(case, 64, schedule, varlen=True)
    assert 0 < plan.slice_units < 8, str(plan)


def _words(plan, stream):
    from cake_rt.launch.tickets import stream_ticket_words

    return stream_ticket_words(stream, nwords=plan.ticket_words).read()


def test_back_to_back_calls_and_words_left_zero(monkeypatch):
    """Chained calls of three shapes (one in slices) and three-phase calls alternate on one stream with no
    synchronization: every call gives the exact scan's bits, and the words are all zero after them (the barrier's
    generation word aside)."""
    import cupy

    import cake_rt
    import cake_rt.ops.ssd as ops

    cases = [(make_case(311, 1, 1000, 4, 64, 128, 1), 64), (make_case(312, 1, 1500, 8, 64, 64, 2,
                                                                     cu_lens=[700, 300, 500]), 128),
             (make_case(313, 2, 900, 6, 64, 128, 1), 64)]
    s = cupy.cuda.Stream(non_blocking=True)

    def run(k, schedule):
        case, chunk = cases[k]
        monkeypatch.setattr(ops, "_FORCE_SCHEDULE", schedule)
        d = case["dev"]
        y = poison(d["x"].shape, d["x"].dtype)
        res = cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], chunk, **case["dev_kw"], out=y,
                                   return_final_states=True, family="chunkpar", stream=s)
        return res, ops.last_plan()

    want = [tuple(to_bytes(a) for a in call(case, chunk, "exact", final=True)) for case, chunk in cases]
    got, plans = [], {}
    for _ in range(5):
        for k, sched in ((0, "chained"), (1, "chained"), (0, "three-phase"), (2, "chained"), (1, "three-phase")):
            res, plan = run(k, sched)
            got.append((k, res))
            plans[plan.ticket_words] = plan
    s.synchronize()
    for k, res in got:
        assert tuple(to_bytes(a) for a in res) == want[k], k
    assert len(plans) >= 2
    for plan in plans.values():
        w = _words(plan, s)
        assert w[0] == 0 and not w[2:].any(), (plan.ticket_words, w)


def test_graph_of_a_chained_call_replayed(monkeypatch):
    import cupy

    import cake_rt
    import cake_rt.ops.ssd as ops

    monkeypatch.setattr(ops, "_FORCE_SCHEDULE", "chained")
    case = make_case(321, 1, 900, 4, 64, 128, 1, cu_lens=[400, 64, 436])
    d = case["dev"]
    kw = dict(case["dev_kw"])
    kw["cu_seqlens"] = case["host_kw"]["cu_seqlens"]
    want = to_bytes(call(case, 64, "exact")[0])
    s = cupy.cuda.Stream(non_blocking=True)
    y = poison(d["x"].shape, d["x"].dtype)
    cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], 64, **kw, out=y, family="chunkpar", stream=s)
    plan = ops.last_plan()
    assert plan.schedule == "chained"
    s.synchronize()
    s.begin_capture()
    try:
        cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], 64, **kw, out=y, family="chunkpar", stream=s)
    finally:
        graph = s.end_capture()
    replays = []
    for _ in range(20):
        with s:
            y.fill(0)
        graph.launch(s)
        with s:
            replays.append(y.copy())
    s.synchronize()
    assert all(to_bytes(r) == want for r in replays)
    w = _words(plan, s)
    assert w[0] == 0 and not w[2:].any(), w
