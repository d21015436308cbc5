"""GPU tests of the foundation: building-block kernels, cooperative launch, ticket words, DLPack intake.

Marked ``gpu``: skipped with a reason on machines without a CUDA GPU.
"""
import numpy as np
import pytest

from cake_rt import selftest

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", sorted(selftest.CHECKS))
def test_building_block(name):
    ok, detail = selftest.CHECKS[name]()
    assert ok, detail


def _ticket_kernel():
    from cake_rt.launch.compile import get_kernel

    return get_kernel("common/selftest.cu", "selftest_ticket")


def test_grid_barrier_1000_rounds_at_occupancy_cap_is_cooperative():
    from cake_rt.launch.grid import record_launches

    with record_launches() as recs:
        ok, detail = selftest.check_grid_barrier(rounds=1000)
    assert ok, detail
    assert len(recs) == 1 and recs[0].cooperative


def test_oversized_cooperative_grid_is_refused_not_shrunk():
    import cupy

    from cake_rt.launch.compile import get_kernel
    from cake_rt.launch.grid import (CooperativeLaunchError, cooperative_capacity, launch_cooperative,
                                     record_launches)
    from cake_rt.launch.tickets import TicketWords

    k = get_kernel("common/selftest.cu", "selftest_grid_barrier")
    cap = cooperative_capacity(k, 128, 0)
    words = TicketWords(2)
    counters = cupy.zeros(4, np.uint32)
    errors = cupy.zeros(1, np.uint32)
    with record_launches() as recs:
        with pytest.raises(CooperativeLaunchError, match="exceeds the co-resident capacity"):
            launch_cooperative(k, cap + 1, 128, (words.array, counters, errors, np.int32(4)))
    assert recs == []
    cupy.cuda.runtime.deviceSynchronize()
    assert int(counters.sum()) == 0  # nothing ran


def test_cooperative_grid_size_uses_real_occupancy():
    from cake_rt.launch.arch import device_info
    from cake_rt.launch.compile import get_kernel
    from cake_rt.launch.grid import cooperative_grid_size, occupancy_per_sm

    k = get_kernel("common/selftest.cu", "selftest_grid_barrier")
    occ = occupancy_per_sm(k, 128, 0)
    sms = device_info().sm_count
    assert occ >= 1
    assert cooperative_grid_size(k, 10**9, 128, 0) == occ * sms
    assert cooperative_grid_size(k, 3, 128, 0) == 3
    # 200 KiB of dynamic shared memory per CTA: at most one CTA per SM.
    assert occupancy_per_sm(k, 128, 200 * 1024) == 1


def test_ticket_word_zero_after_100_calls():
    ok, detail = selftest.check_ticket(calls=100)
    assert ok, detail


def test_ticket_word_zero_after_10_graph_replays():
    import cupy

    from cake_rt.launch.grid import launch
    from cake_rt.launch.tickets import TicketWords

    k = _ticket_kernel()
    nunits = 4099
    words = TicketWords(1)
    claims = cupy.zeros(nunits, np.uint32)
    cupy.cuda.get_current_stream().synchronize()  # zeroed before the replays on the non-blocking stream
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        launch(k, 150, 64, (words.array, claims, np.int32(nunits)), stream=s)
        graph = s.end_capture()
    for _ in range(10):
        graph.launch(s)
    s.synchronize()
    assert np.all(claims.get() == 10)
    assert int(words.read()[0]) == 0


def test_ticket_words_prepared_on_stream_a_first_used_on_stream_b():
    import cupy

    from cake_rt.launch.grid import launch
    from cake_rt.launch.tickets import TicketWords

    k = _ticket_kernel()
    nunits = 2053
    a = cupy.cuda.Stream(non_blocking=True)
    b = cupy.cuda.Stream(non_blocking=True)
    with a:
        # Poison pool memory the words are likely to reuse: an unordered zero would show as lost units.
        junk = cupy.full(64, 0x40000000, np.uint32)
        del junk
        words = TicketWords(1)
    claims = cupy.zeros(nunits, np.uint32)
    cupy.cuda.get_current_stream().synchronize()  # zeroed before the launch on the non-blocking stream
    with b:
        launch(k, 97, 64, (words.array, claims, np.int32(nunits)), stream=b)
    b.synchronize()
    assert np.all(claims.get() == 1)
    assert int(words.read()[0]) == 0


def test_ticket_words_rezeroed_on_the_run_stream_after_a_failed_launch():
    import cupy

    from cake_rt.launch.grid import launch
    from cake_rt.launch.tickets import TicketWords

    k = _ticket_kernel()
    nunits = 1031
    words = TicketWords(1)
    claims = cupy.zeros(nunits, np.uint32)
    cupy.cuda.get_current_stream().synchronize()  # zeroed before the launch on the non-blocking stream
    s = cupy.cuda.Stream(non_blocking=True)
    with pytest.raises(ValueError):
        with words.guard(s):
            with s:  # a launch on s that died half-way leaves a stale count behind (written in s's order:
                words.array[0] = 777  # a write on another stream would race with the re-zeroing)...
            raise ValueError("launch failed")
    assert words.dirty
    with words.guard(s):  # ...and the next call re-zeroes on its own stream before launching
        launch(k, 64, 64, (words.array, claims, np.int32(nunits)), stream=s)
    s.synchronize()
    assert not words.dirty
    assert np.all(claims.get() == 1) and int(words.read()[0]) == 0


def test_stream_ticket_words_are_per_stream():
    import cupy

    from cake_rt.launch.tickets import stream_ticket_words

    s1, s2 = cupy.cuda.Stream(), cupy.cuda.Stream()
    assert stream_ticket_words(s1) is stream_ticket_words(s1)
    assert stream_ticket_words(s1) is not stream_ticket_words(s2)


def test_workspace_grows_only_and_respects_cap():
    from cake_rt.launch.workspace import WorkspaceCapExceeded, get_workspace

    a = get_workspace("test-ws", 1000)
    assert a.nbytes >= 1000
    b = get_workspace("test-ws", 10)
    assert b is a
    c = get_workspace("test-ws", 10**6)
    assert c.nbytes >= 10**6 and get_workspace("test-ws", 1000) is c
    with pytest.raises(WorkspaceCapExceeded, match="over the cap"):
        get_workspace("test-ws", 10**7, cap=10**6)


def test_launch_records_and_device_check():
    import cupy

    from cake_rt.launch.grid import launch, record_launches
    from cake_rt.launch.tickets import TicketWords

    k = _ticket_kernel()
    words = TicketWords(1)
    claims = cupy.zeros(10, np.uint32)
    with record_launches() as recs:
        launch(k, 2, 32, (words.array, claims, np.int32(10)), tag="probe")
    assert [(r.name, r.grid, r.block, r.cooperative, r.tag) for r in recs] == [
        ("selftest_ticket", (2, 1, 1), (32, 1, 1), False, "probe")]


def test_dlpack_bf16_from_torch_without_copy():
    torch = pytest.importorskip("torch")
    import cupy

    from cake_rt.interop import BF16, as_device_array

    t = torch.randn(3, 5, 7, device="cuda").to(torch.bfloat16)
    c = as_device_array(t, "x")
    assert c.dtype == BF16 and c.shape == (3, 5, 7)
    assert c.data.ptr == t.data_ptr()
    back = torch.from_dlpack(c)
    assert back.data_ptr() == t.data_ptr() and back.dtype == torch.bfloat16
    assert torch.equal(back, t)
    with pytest.raises(TypeError, match="^x: expected a CUDA device array"):
        as_device_array(torch.zeros(3), "x")
    assert isinstance(c, cupy.ndarray)


def test_resolve_stream_accepts_torch_and_handles():
    torch = pytest.importorskip("torch")
    import cupy

    from cake_rt.interop import resolve_stream

    ts = torch.cuda.Stream()
    assert resolve_stream(ts).ptr == ts.cuda_stream
    s = cupy.cuda.Stream()
    assert resolve_stream(s) is s
    assert resolve_stream(s.ptr).ptr == s.ptr
    assert resolve_stream(None).ptr == cupy.cuda.get_current_stream().ptr


def _order_key_ref(u):
    """The order key's definition on float32 bit patterns (uint32): NaN -> 0, -0.0 -> +0.0's key, a negative value's
    bits flipped, a positive one's sign bit set."""
    f = u.view(np.float32)
    v = np.where(f == 0, np.uint32(0), u).astype(np.uint32)
    k = np.where(v & np.uint32(0x80000000), ~v, v | np.uint32(0x80000000)).astype(np.uint32)
    return np.where(np.isnan(f), np.uint32(0), k).astype(np.uint32)


def test_float_order_key_bitwise_on_every_class_of_float():
    """float_order_key bit for bit against its definition: signed zeros, every subnormal boundary and a spread of
    subnormals (the key adds 0.0f, which must not flush them), NaNs of both signs and several payloads, infinities, the
    normal extremes and random bit patterns; float_from_order_key gives the value back (-0.0 as +0.0, NaN as NaN)."""
    import cupy

    from cake_rt.launch.grid import launch

    rng = np.random.default_rng(7)
    special = [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000, 0x80800000,
               0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF,
               0x7FBFFFFF, 0x3F800000, 0xBF800000]
    sub = rng.integers(1, 0x00800000, 4096, dtype=np.uint64).astype(np.uint32)
    u = np.concatenate([np.array(special, np.uint32), sub, sub | np.uint32(0x80000000),
                        rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32)])
    n = u.size
    keys = cupy.full(n, 0xDEADBEEF, np.uint32)
    back = cupy.full(n, 1.0, np.float32)
    launch(selftest._k("selftest_float_key"), (n + 127) // 128, 128,
           (cupy.asarray(u.view(np.float32)), keys, back, np.int32(n)))
    k = keys.get()
    want = _order_key_ref(u)
    bad = np.flatnonzero(k != want)
    assert bad.size == 0, f"{bad.size} keys differ, e.g. bits {u[bad[:4]]}: {k[bad[:4]]} != {want[bad[:4]]}"
    f = u.view(np.float32)
    fin = ~np.isnan(f)
    got = back.get()
    assert np.all(np.isnan(got[~fin]))
    assert np.array_equal(got[fin].view(np.uint32), np.where(f[fin] == 0, np.float32(0), f[fin]).view(np.uint32))
