"""Several GPUs: zigzag context parallelism for the DSA indexer, sequence parallelism for SSD, and
per-device state (calls on device 1 while device 0 is busy, two host threads on two devices at once).

Every test here needs at least two CUDA devices (run on the `nvidia-h200-x2` kind); with fewer it skips.
Run: ``PYTHONPATH=$PWD python3 -m pytest tests/test_multi_device.py -v -rA -s`` (``-s`` shows the
state-handoff note).
Inputs are made on the host with fixed seeds and copied to each device, so "the same call" on two
devices sees the same bits. Caller-owned outputs are poisoned before every call.
"""
import ctypes
import threading

import numpy as np
import pytest

from cake_rt.cp import cp_zigzag_layout
from cake_rt.interop import BF16

pytestmark = pytest.mark.gpu

# ---- geometry (one compile per program and device; small enough to run in seconds) ----------------
IDX_H, IDX_D, IDX_TOPK = 32, 128, 96
IDX_DOCS = [1028, 388, 12, 2052, 644]  # multiples of 2W = 4, some rows see fewer than topk keys
SSD_H, SSD_P, SSD_N, SSD_G, SSD_CHUNK = 8, 64, 128, 2, 128
SSD_DOCS = [300, 77, 1024, 513, 5]  # odd lengths, a doc shorter than a chunk


def _device_count():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


@pytest.fixture(scope="module")
def two_gpus():
    n = _device_count()
    if n < 2:
        pytest.skip(f"needs >= 2 CUDA devices, found {n}")
    import cupy

    return cupy


def _on(cupy, dev, a):
    """Copy a host array to device `dev`, complete on return (a later call may use another stream)."""
    with cupy.cuda.Device(dev):
        arr = cupy.asarray(a)
        cupy.cuda.get_current_stream().synchronize()
        return arr


# ---- indexer data and checks -------------------------------------------------------------------------

def _indexer_inputs(seed=0, docs=IDX_DOCS, H=IDX_H):
    rng = np.random.default_rng(seed)
    total = sum(docs)
    q = rng.standard_normal((total, H, IDX_D), dtype=np.float32).astype(BF16)
    k = rng.standard_normal((total, IDX_D), dtype=np.float32).astype(BF16)
    w = (rng.random((total, H), dtype=np.float32) * 0.2 + 0.01).astype(np.float32)
    # Exact ties: copy key rows onto later rows of the same document (equal rows score equally,
    # so the larger id must win in both the full and the per-rank call).
    # Exact zero scores: all-zero key rows (30% of document 0, 85% of document 1), so rows whose
    # positive-score keys are fewer than topk fill up with tied zeros, chosen by the larger id.
    start = 0
    for d, L in enumerate(docs):
        if L >= 8:
            src = start + rng.integers(0, L // 2, size=L // 8)
            dst = src + rng.integers(1, L // 2, size=src.size)
            k[dst] = k[src]
            if d < 2:
                k[start + np.flatnonzero(rng.random(L) < (0.3, 0.85)[d])] = 0
        start += L
    return q, k, w


def _poisoned_indexer_outputs(cupy, T, topk):
    idx = cupy.full((T, topk), 0x7F7F7F7F, dtype=cupy.int32)
    sc = cupy.full((T, topk), np.nan, dtype=cupy.float32)
    return idx, sc


def _run_indexer(cupy, dev, q, k, w, topk, seg, stream=None):
    """One indexer call on device `dev` from host inputs; returns host (indices, scores) and the launches."""
    import cake_rt
    from cake_rt.launch.grid import record_launches

    with cupy.cuda.Device(dev):
        qd, kd, wd = cupy.asarray(q), cupy.asarray(k), cupy.asarray(w)
        idx, sc = _poisoned_indexer_outputs(cupy, q.shape[0], topk)
        cupy.cuda.get_current_stream().synchronize()  # copies and poison done before a call on `stream`
        with record_launches() as recs:
            out_i, out_s = cake_rt.dsa_indexer_det_topk(
                qd, kd, wd, topk, indices=idx, scores=sc, stream=stream, **seg
            )
        assert out_i.device.id == dev and out_s.device.id == dev
        if stream is not None:
            stream.synchronize()
        return out_i.get(), out_s.get(), list(recs)


def _check_indexer_rows(q, k, w, topk, doc_lens, idx, sc, rows):
    """Sanity of a full causal call: ids ascending in their document's causal prefix, padding exact,
    scores equal to a float64 recomputation (so an all-padding or poisoned output cannot pass)."""
    starts = np.concatenate([[0], np.cumsum(doc_lens)])
    doc_of = np.repeat(np.arange(len(doc_lens)), doc_lens)
    qf, kf = q.astype(np.float64), k.astype(np.float64)
    for t in rows:
        s = starts[doc_of[t]]
        nvis = t - s + 1
        n = min(topk, nvis)
        row = idx[t]
        assert (row[n:] == -1).all() and np.isneginf(sc[t, n:]).all(), f"row {t}: padding"
        ids = row[:n].astype(np.int64)
        assert (ids >= s).all() and (ids <= t).all(), f"row {t}: ids outside the causal prefix"
        assert (np.diff(ids) > 0).all(), f"row {t}: ids not strictly ascending"
        ref = (np.maximum(qf[t] @ kf[ids].T, 0.0) * w[t].astype(np.float64)[:, None]).sum(0)
        np.testing.assert_allclose(sc[t, :n], ref, rtol=2e-5, atol=1e-5, err_msg=f"row {t}")
        # every unchosen visible key scores no higher than the weakest chosen one (up to rounding)
        allref = (np.maximum(qf[t] @ kf[s : t + 1].T, 0.0) * w[t].astype(np.float64)[:, None]).sum(0)
        unchosen = np.setdiff1d(np.arange(s, t + 1), ids) - s
        if unchosen.size:
            assert allref[unchosen].max() <= ref.min() + 1e-4 * max(1.0, abs(ref.min())), f"row {t}: not top-k"


def _poison_float(cupy, a):
    """Fill a float array with NaN bit patterns through an unsigned view (works for bf16 too)."""
    pattern = {2: 0x7FC0, 4: 0x7FC00000}[a.dtype.itemsize]
    a.view(cupy.uint16 if a.dtype.itemsize == 2 else cupy.uint32).fill(pattern)


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


# ---- 1. zigzag CP on two GPUs equals one GPU, bit for bit ----------------------------------------------

def test_indexer_zigzag_two_ranks_equal_single_gpu(two_gpus):
    cupy = two_gpus
    q, k, w = _indexer_inputs(seed=1)
    lay0 = cp_zigzag_layout(IDX_DOCS, 2, 0)
    full_seg = {"cu_seqlens_q": lay0.doc_cu_seqlens, "cu_seqlens_k": lay0.doc_cu_seqlens}
    full_i, full_s, _ = _run_indexer(cupy, 0, q, k, w, IDX_TOPK, full_seg)
    rng = np.random.default_rng(5)
    _check_indexer_rows(q, k, w, IDX_TOPK, IDX_DOCS, full_i, full_s,
                        rows=rng.choice(q.shape[0], size=48, replace=False))

    covered = np.zeros(q.shape[0], dtype=np.int32)
    for rank in (0, 1):
        lay = cp_zigzag_layout(IDX_DOCS, 2, rank)
        qi, ki = lay.q_index, lay.k_index
        loc_i, loc_s, recs = _run_indexer(cupy, rank, q[qi], k[ki], w[qi], IDX_TOPK, lay.indexer_kwargs())
        assert recs and all(r.device == rank for r in recs), [(r.name, r.device) for r in recs]
        with cupy.cuda.Device(rank):
            glob = lay.to_global_keys(cupy.asarray(loc_i)).get()  # the device path of the mapping
        np.testing.assert_array_equal(glob, lay.to_global_keys(loc_i))
        np.testing.assert_array_equal(glob, full_i[qi], err_msg=f"rank {rank}: indices differ")
        np.testing.assert_array_equal(_bits(loc_s), _bits(full_s[qi]), err_msg=f"rank {rank}: score bits differ")
        covered[qi] += 1
    assert (covered == 1).all()


def test_indexer_zigzag_keys_from_allgather(two_gpus):
    """What an engine does: each rank holds only its local tokens, all-gathers K (rank-major), and
    selects its segments' keys with k_index_allgather. Same bits as the gather from the full K."""
    cupy = two_gpus
    q, k, w = _indexer_inputs(seed=2)
    lays = [cp_zigzag_layout(IDX_DOCS, 2, r) for r in (0, 1)]
    k16 = k.view(np.uint16)  # move raw bf16 bits
    local_k = [_on(cupy, r, k16[lays[r].q_index]) for r in (0, 1)]
    for r in (0, 1):
        with cupy.cuda.Device(r):
            # stand-in for an NCCL all-gather (through the host here): every rank's local K, rank-major
            gathered = cupy.asarray(np.concatenate([lk.get() for lk in local_k]))
            k_rank = gathered[cupy.asarray(lays[r].k_index_allgather)]
            np.testing.assert_array_equal(k_rank.get(), k16[lays[r].k_index])


# ---- 2. ssd_combined on both devices ----------------------------------------------------------------

def _ssd_inputs(seed=0, docs=SSD_DOCS):
    rng = np.random.default_rng(seed)
    L = sum(docs)
    x = rng.standard_normal((1, L, SSD_H, SSD_P), dtype=np.float32).astype(BF16)
    z = rng.standard_normal((1, L, SSD_H, SSD_P), dtype=np.float32).astype(BF16)
    B = (rng.standard_normal((1, L, SSD_G, SSD_N), dtype=np.float32) * 0.3).astype(BF16)
    C = (rng.standard_normal((1, L, SSD_G, SSD_N), dtype=np.float32) * 0.3).astype(BF16)
    dt = (rng.standard_normal((1, L, SSD_H), dtype=np.float32) * 0.5 - 1.0).astype(np.float32)
    A = -(rng.random(SSD_H, dtype=np.float32) * 2.0 + 0.5).astype(np.float32)
    Dp = rng.standard_normal(SSD_H, dtype=np.float32).astype(np.float32)
    dt_bias = (rng.standard_normal(SSD_H, dtype=np.float32) * 0.1).astype(np.float32)
    return dict(x=x, dt=dt, A=A, B=B, C=C, D=Dp, z=z, dt_bias=dt_bias)


def _slice_tokens(inp, lo, hi):
    out = dict(inp)
    for name in ("x", "dt", "B", "C", "z"):
        out[name] = np.ascontiguousarray(inp[name][:, lo:hi])
    return out


def _run_ssd(cupy, dev, inp, docs, *, initial_states=None, stream=None):
    """ssd_combined on device `dev` over packed documents; returns host (y, varlen_states)."""
    import cake_rt
    from cake_rt.launch.grid import record_launches

    with cupy.cuda.Device(dev):
        d = {name: cupy.asarray(v) for name, v in inp.items()}
        cu = np.concatenate([[0], np.cumsum(docs)]).astype(np.int32)
        out = cupy.empty(d["x"].shape, dtype=d["x"].dtype)
        _poison_float(cupy, out)
        init = None if initial_states is None else cupy.asarray(initial_states)
        cupy.cuda.get_current_stream().synchronize()  # copies and poison done before a call on `stream`
        with record_launches() as recs:
            res = cake_rt.ssd_combined(
                d["x"], d["dt"], d["A"], d["B"], d["C"], SSD_CHUNK, D=d["D"], z=d["z"],
                dt_bias=d["dt_bias"], cu_seqlens=cu, dt_softplus=True, initial_states=init,
                return_final_states=True, return_varlen_states=True, out=out, stream=stream,
            )
        y, final, varlen = res
        assert y.device.id == dev and varlen.device.id == dev
        assert recs and all(r.device == dev for r in recs), [(r.name, r.device) for r in recs]
        if stream is not None:
            stream.synchronize()
        yh, fh, vh = y.get(), final.get(), varlen.get()
    # with cu_seqlens, final_states is [1, nheads, headdim, dstate] and equals varlen_states[-1]
    assert fh.shape == (1,) + vh.shape[1:]
    np.testing.assert_array_equal(_bits(fh[0]), _bits(vh[-1]))
    return yh, vh


def _ssd_reference_doc(inp, lo, hi):
    """float64 recurrence for one document (tokens lo:hi), from zero state: (y [L, H, P], state [H, P, N])."""
    x = inp["x"][0, lo:hi].astype(np.float64)
    z = inp["z"][0, lo:hi].astype(np.float64)
    B = inp["B"][0, lo:hi].astype(np.float64)
    C = inp["C"][0, lo:hi].astype(np.float64)
    dt = inp["dt"][0, lo:hi].astype(np.float64) + inp["dt_bias"].astype(np.float64)
    dt = np.where(dt > 20, dt, np.log1p(np.exp(np.minimum(dt, 20))))
    A, Dp = inp["A"].astype(np.float64), inp["D"].astype(np.float64)
    grp = np.arange(SSD_H) // (SSD_H // SSD_G)
    h = np.zeros((SSD_H, SSD_P, SSD_N))
    y = np.zeros((hi - lo, SSD_H, SSD_P))
    for t in range(hi - lo):
        h = np.exp(dt[t] * A)[:, None, None] * h + dt[t][:, None, None] * x[t][:, :, None] * B[t][grp][:, None, :]
        y[t] = np.einsum("hpn,hn->hp", h, C[t][grp]) + Dp[:, None] * x[t]
    y *= z * (1.0 / (1.0 + np.exp(-z)))
    return y, h


def test_ssd_same_call_on_both_devices_same_bits(two_gpus):
    cupy = two_gpus
    inp = _ssd_inputs(seed=3)
    y0, v0 = _run_ssd(cupy, 0, inp, SSD_DOCS)
    y1, v1 = _run_ssd(cupy, 1, inp, SSD_DOCS)
    assert np.isfinite(y0.astype(np.float32)).all() and np.isfinite(v0).all()
    np.testing.assert_array_equal(_bits(y0), _bits(y1))
    np.testing.assert_array_equal(_bits(v0), _bits(v1))
    # not garbage: the short document against a float64 recurrence
    lo, hi = SSD_DOCS[0], SSD_DOCS[0] + SSD_DOCS[1]
    yr, hr = _ssd_reference_doc(inp, lo, hi)
    yk = y0[0, lo:hi].astype(np.float64)
    assert np.linalg.norm(yk - yr) / np.linalg.norm(yr) < 1e-2
    assert np.linalg.norm(v0[1] - hr) / np.linalg.norm(hr) < 1e-2


def test_ssd_documents_split_over_two_devices_equal_single_call(two_gpus):
    """Sequence parallelism over whole documents: rank 0 runs documents 0-1, rank 1 documents 2-4."""
    cupy = two_gpus
    inp = _ssd_inputs(seed=4)
    y_full, v_full = _run_ssd(cupy, 0, inp, SSD_DOCS)
    cut = SSD_DOCS[0] + SSD_DOCS[1]
    parts = [(0, SSD_DOCS[:2], 0, cut), (1, SSD_DOCS[2:], cut, sum(SSD_DOCS))]
    for rank, docs, lo, hi in parts:
        y, v = _run_ssd(cupy, rank, _slice_tokens(inp, lo, hi), docs)
        np.testing.assert_array_equal(_bits(y), _bits(y_full[:, lo:hi]), err_msg=f"rank {rank}: y bits")
        first = 0 if rank == 0 else 2
        np.testing.assert_array_equal(_bits(v), _bits(v_full[first : first + len(docs)]),
                                      err_msg=f"rank {rank}: varlen state bits")


def test_ssd_state_handoff_between_devices(two_gpus):
    """One long sequence cut at a chunk multiple: rank 1 starts from rank 0's final state (copied
    across devices). Matches the single call closely (bitwise equality is not promised: reported)."""
    cupy = two_gpus
    L, cut = 1300, 5 * SSD_CHUNK
    inp = _ssd_inputs(seed=6, docs=[L])
    y_full, v_full = _run_ssd(cupy, 0, inp, [L])
    y0, v0 = _run_ssd(cupy, 0, _slice_tokens(inp, 0, cut), [cut])
    # rank 0's final state [1, H, P, N] float32, handed to rank 1 (an engine would send it over NCCL)
    y1, v1 = _run_ssd(cupy, 1, _slice_tokens(inp, cut, L), [L - cut], initial_states=v0)
    np.testing.assert_array_equal(_bits(y0), _bits(y_full[:, :cut]))
    y_cat = np.concatenate([y0, y1], axis=1).astype(np.float64)
    yf = y_full.astype(np.float64)
    assert np.linalg.norm(y_cat - yf) / np.linalg.norm(yf) < 2e-3
    assert np.linalg.norm(v1 - v_full) / np.linalg.norm(v_full) < 1e-4
    print(f"state handoff: y bitwise equal = {np.array_equal(_bits(y1), _bits(y_full[:, cut:]))}, "
          f"final state bitwise equal = {np.array_equal(_bits(v1), _bits(v_full))}")


def test_inputs_on_device_1_while_device_0_is_current(two_gpus):
    """Ops use the device of their inputs, not the current device (launches land on device 1)."""
    import cake_rt
    from cake_rt.launch.grid import record_launches

    cupy = two_gpus
    q, k, w = _indexer_inputs(seed=7, docs=[260, 132])
    seg = {"cu_seqlens_q": np.array([0, 260, 392], np.int32), "cu_seqlens_k": np.array([0, 260, 392], np.int32)}
    ref_i, ref_s, _ = _run_indexer(cupy, 1, q, k, w, IDX_TOPK, seg)
    qd, kd, wd = (_on(cupy, 1, a) for a in (q, k, w))
    with cupy.cuda.Device(0):
        with record_launches() as recs:
            out_i, out_s = cake_rt.dsa_indexer_det_topk(qd, kd, wd, IDX_TOPK, **seg)
        assert out_i.device.id == 1 and out_s.device.id == 1
        assert recs and all(r.device == 1 for r in recs), [(r.name, r.device) for r in recs]
        assert cupy.cuda.runtime.getDevice() == 0  # the op restored the caller's current device
    with cupy.cuda.Device(1):
        np.testing.assert_array_equal(out_i.get(), ref_i)
        np.testing.assert_array_equal(_bits(out_s.get()), _bits(ref_s))


@pytest.mark.parametrize("op", ["indexer", "ssd"])
def test_stream_none_is_the_input_devices_current_stream(two_gpus, op):
    """Device 0 current with a stream of its own; inputs on device 1 whose current stream is s1: the
    call runs on device 1, on s1 (not on device 0's stream, which cannot run device-1 work)."""
    import cake_rt
    from cake_rt.launch.grid import record_launches

    cupy = two_gpus
    if op == "indexer":
        q, k, w = _indexer_inputs(seed=12, docs=[260, 132])
        seg = {"cu_seqlens_q": np.array([0, 260, 392], np.int32), "cu_seqlens_k": np.array([0, 260, 392], np.int32)}
        ref = _run_indexer(cupy, 1, q, k, w, IDX_TOPK, seg)[:2]
        args = [_on(cupy, 1, a) for a in (q, k, w)]

        def call():
            return cake_rt.dsa_indexer_det_topk(*args, IDX_TOPK, **seg)
    else:
        inp = _ssd_inputs(seed=13)
        ref = _run_ssd(cupy, 1, inp, SSD_DOCS)
        d = {name: _on(cupy, 1, v) for name, v in inp.items()}
        cu = np.concatenate([[0], np.cumsum(SSD_DOCS)]).astype(np.int32)

        def call():
            y, v = cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], SSD_CHUNK, D=d["D"], z=d["z"],
                                        dt_bias=d["dt_bias"], cu_seqlens=cu, dt_softplus=True,
                                        return_varlen_states=True)
            return y, v

    with cupy.cuda.Device(1):
        s1 = cupy.cuda.Stream(non_blocking=True)
    with cupy.cuda.Device(0):
        s0 = cupy.cuda.Stream(non_blocking=True)
    try:
        with cupy.cuda.Device(1):
            s1.use()
        with cupy.cuda.Device(0), s0:
            with record_launches() as recs:
                outs = call()
        assert recs and all(r.device == 1 for r in recs), [(r.name, r.device) for r in recs]
        assert all(r.stream_ptr == s1.ptr for r in recs), [(r.name, r.stream_ptr, s1.ptr, s0.ptr) for r in recs]
        s1.synchronize()
        with cupy.cuda.Device(1):
            got = [o.get() for o in outs]
    finally:
        with cupy.cuda.Device(1):
            cupy.cuda.Stream.null.use()
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(_bits(g), _bits(r))


def test_refused_calls_restore_the_current_device_and_refuse_other_devices_streams(two_gpus):
    """Inputs on device 1, device 0 current: a call refused (a bad ``out``, a stream of device 0, PyTorch's default
    stream of device 0 when torch is installed: its handle 0 names no device to the driver) raises a ValueError naming
    the argument and leaves device 0 current."""
    import cake_rt

    cupy = two_gpus
    inp = _ssd_inputs(seed=17)
    d = {name: _on(cupy, 1, v) for name, v in inp.items()}
    with cupy.cuda.Device(0):
        s0 = cupy.cuda.Stream(non_blocking=True)
    cases = [("stream", {"stream": s0}), ("out", {"out": _on(cupy, 1, np.zeros((1, 3), BF16))})]
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        cases.append(("stream", {"stream": torch.cuda.default_stream(0)}))
    for name, kw in cases:
        with cupy.cuda.Device(0):
            with pytest.raises(ValueError, match=f"^{name}:"):
                cake_rt.ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], SSD_CHUNK, **kw)
            assert cupy.cuda.runtime.getDevice() == 0, name


# ---- 3. device 1 works while device 0 is busy --------------------------------------------------------

_SPIN_SRC = r"""
extern "C" __global__ void spin_until_flag(const volatile unsigned int* flag, unsigned int* status,
                                           unsigned long long max_ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    while (true) {
        if (*flag != 0u) { if (threadIdx.x == 0 && blockIdx.x == 0) status[0] = 1u; return; }
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t - t0 > max_ns) { if (threadIdx.x == 0 && blockIdx.x == 0) status[0] = 2u; return; }
        __nanosleep(2000);
    }
}
"""


def test_device_1_calls_while_device_0_is_busy(two_gpus):
    """Device 0 runs a kernel that waits for a host flag; meanwhile the indexer and SSD run on device 1
    and finish. A library that synchronised device 0 (or a device-0 stream) would block here."""
    cupy = two_gpus
    rt = cupy.cuda.runtime
    q, k, w = _indexer_inputs(seed=8)
    seg = {"cu_seqlens_q": cp_zigzag_layout(IDX_DOCS, 2, 0).doc_cu_seqlens,
           "cu_seqlens_k": cp_zigzag_layout(IDX_DOCS, 2, 0).doc_cu_seqlens}
    inp = _ssd_inputs(seed=9)
    ref_i, ref_s, _ = _run_indexer(cupy, 0, q, k, w, IDX_TOPK, seg)
    ref_y, ref_v = _run_ssd(cupy, 0, inp, SSD_DOCS)

    # Host-mapped pinned word (UVA: the host address is valid on the device too).
    flag_ptr = rt.hostAlloc(64, rt.hostAllocMapped | rt.hostAllocPortable)
    flag = ctypes.c_uint32.from_address(flag_ptr)
    flag.value = 0
    busy_stream = None
    try:
        with cupy.cuda.Device(0):
            spin = cupy.RawKernel(_SPIN_SRC, "spin_until_flag")
            status = cupy.zeros(1, dtype=cupy.uint32)
            busy_stream = cupy.cuda.Stream(non_blocking=True)
            cupy.cuda.get_current_stream().synchronize()  # status zeroed before the spin starts
            sms = rt.deviceGetAttribute(rt.cudaDevAttrMultiProcessorCount, 0)
            with busy_stream:
                spin((sms,), (32,), (np.uint64(flag_ptr), status, np.uint64(120 * 10**9)))
                done0 = cupy.cuda.Event()
                done0.record(busy_stream)

        results = {}

        def work():
            try:
                results["idx"] = _run_indexer(cupy, 1, q, k, w, IDX_TOPK, seg)
                results["ssd"] = _run_ssd(cupy, 1, inp, SSD_DOCS)
            except BaseException as exc:  # reported by the main thread
                results["error"] = exc

        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        worker.join(timeout=90)
        blocked = worker.is_alive()
        device0_was_busy = not done0.done
        flag.value = 1  # release device 0 in every case
        worker.join(timeout=90)
        with cupy.cuda.Device(0):
            busy_stream.synchronize()
            st = int(status.get()[0])
    finally:
        flag.value = 1
        if busy_stream is not None:
            busy_stream.synchronize()
        rt.freeHost(flag_ptr)
    assert not blocked, "work on device 1 did not finish while device 0 was busy"
    if "error" in results:
        raise results["error"]
    assert device0_was_busy, "device 0 finished its spin before the flag was set (status %d)" % st
    assert st == 1
    got_i, got_s, recs = results["idx"]
    assert all(r.device == 1 for r in recs)
    np.testing.assert_array_equal(got_i, ref_i)
    np.testing.assert_array_equal(_bits(got_s), _bits(ref_s))
    y, v = results["ssd"]
    np.testing.assert_array_equal(_bits(y), _bits(ref_y))
    np.testing.assert_array_equal(_bits(v), _bits(ref_v))


# ---- 4. two host threads on two devices at once ------------------------------------------------------

def test_two_threads_two_devices_at_once(two_gpus):
    """Each thread runs its zigzag rank (a fresh geometry, so both compile and load at the same time)
    and an SSD call on its own device, on the default stream and on a stream of its own, three times.
    Every result equals the same call made alone, bit for bit."""
    cupy = two_gpus
    H = 64  # not used elsewhere in this file: the first calls race on cold per-device caches
    q, k, w = _indexer_inputs(seed=10, H=H)
    inp = _ssd_inputs(seed=11)
    lays = [cp_zigzag_layout(IDX_DOCS, 2, r) for r in (0, 1)]
    barrier = threading.Barrier(2)
    out = {0: [], 1: []}
    errors = []

    def rank_work(r):
        try:
            lay = lays[r]
            args = (q[lay.q_index], k[lay.k_index], w[lay.q_index], IDX_TOPK, lay.indexer_kwargs())
            with cupy.cuda.Device(r):
                own = cupy.cuda.Stream(non_blocking=True)
            barrier.wait(timeout=60)
            for it in range(3):
                stream = own if it % 2 else None
                i, s, recs = _run_indexer(cupy, r, *args, stream=stream)
                assert all(rec.device == r for rec in recs)
                y, v = _run_ssd(cupy, r, inp, SSD_DOCS, stream=stream)
                out[r].append((i, s, y, v))
        except BaseException as exc:
            errors.append((r, exc))

    threads = [threading.Thread(target=rank_work, args=(r,), daemon=True) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    if errors:
        raise errors[0][1]
    # alone, after the fact, on device 0 for both ranks' shares
    full_i, full_s, _ = _run_indexer(cupy, 0, q, k, w, IDX_TOPK,
                                     {"cu_seqlens_q": lays[0].doc_cu_seqlens, "cu_seqlens_k": lays[0].doc_cu_seqlens})
    ref_y, ref_v = _run_ssd(cupy, 0, inp, SSD_DOCS)
    for r in (0, 1):
        lay = lays[r]
        assert len(out[r]) == 3
        for i, s, y, v in out[r]:
            np.testing.assert_array_equal(lay.to_global_keys(i), full_i[lay.q_index])
            np.testing.assert_array_equal(_bits(s), _bits(full_s[lay.q_index]))
            np.testing.assert_array_equal(_bits(y), _bits(ref_y))
            np.testing.assert_array_equal(_bits(v), _bits(ref_v))
