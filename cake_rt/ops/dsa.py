"""Deterministic DSA indexer top-k: host side (validation, planning, launch).

    score(t, j) = sum_h weights[t, h] * max(0, dot(q[t, h, :], k[j, :]))

For every query ``t`` the ``topk`` visible keys of largest score (ties to the larger key id, NaN lowest,
-0.0 == 0.0), as global key ids in ascending order, padded with -1 / -inf. The result is bit-for-bit the
same for any schedule, key split, stream, number of free SMs and entry point. Contract:
``shared/spec/dsa_indexer.md``; user guide: ``docs/dsa.md``.

Two kernels (``cake_rt/kernels/dsa/indexer.cu``): ``dsa_scan`` (fused scores + exact streaming top-k over
work units = query block x key range) and, only when some query block's keys are split over several
units, ``dsa_merge`` (exact top-k of the parts). Nothing else is launched per call.

The scan runs its performance variant by default (see ``fast_enabled``); ``CAKE_RT_DSA_FAST=0`` selects the
first GPU-verified program (same bits).
"""
from __future__ import annotations

import dataclasses
import os
import threading

import numpy as np

from ..interop import (BF16, as_device_array, as_host_int32, check_aligned, check_array, check_disjoint_spans,
                       contiguous_span)
from ..launch.streams import (PER_THREAD, CaptureError, Guarded, GuardedLRU, collect, current_device, is_capturing,
                              stream_key, stream_state, upload)
from ..launch.streams import resolve as resolve_handle
from ..launch.tickets import state_ticket_words
from .. import env
from ..launch.workspace import state_workspace

KERNEL_PATH = "dsa/indexer.cu"
SCAN_THREADS = 256
MERGE_THREADS = 1024
MERGE_ROUND = MERGE_THREADS * 4  # keys the merge appends per round (dsa_merge's MERGE_E = 4)
HIST_BYTES = 2048 * 4
SCHEDULES = ("ticket", "static")
# Default schedule per compile target, chosen by measurement (docs/dsa.md, "History of measurements"): on the H200 ticket was
# 8% faster on S1 (dynamic draws balance the causal triangle), equal on C1, and 1.0-1.06x under a held SM
# where static took 1.76x.
DEFAULT_SCHEDULE = {"sm_90a": "ticket"}
_FALLBACK_SCHEDULE = "ticket"

__all__ = [
    "dsa_indexer_det_topk",
    "prepare_dsa_indexer_det_topk",
    "dsa_indexer_workspace_bytes",
    "DSAIndexerRunner",
    "visible_pairs",
    "dsa_flops_bytes",
]


# ----------------------------------------------------------------------------------------------------
# Program configuration (pure host arithmetic: CPU-testable)
# ----------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class DsaConfig:
    """One compiled program: heads H, head dim D, queries per block BQ, keys per tile TILE, candidate
    capacity per query CAP (scan) and MCAP (merge), and their dynamic shared-memory sizes."""

    H: int
    D: int
    BQ: int
    TILE: int
    CAP: int
    MCAP: int
    smem_scan: int
    smem_merge: int
    wgmma: bool = False
    fast: bool = False

    @property
    def defines(self) -> dict:
        d = {"DSA_H": self.H, "DSA_D": self.D, "DSA_BQ": self.BQ, "DSA_TILE": self.TILE,
             "DSA_CAP": self.CAP, "DSA_MCAP": self.MCAP}
        if self.wgmma:
            d["DSA_WGMMA"] = 1
        if self.fast:
            d["DSA_FAST"] = 1
        return d


def _round_up(x: int, m: int) -> int:
    return (int(x) + m - 1) // m * m


def _scan_smem(H, D, BQ, TILE, CAP, wgmma=False, fast=False) -> int:
    G = BQ * H // 32
    extra = (BQ * H * D * 2 + 1024) if wgmma else 0  # q resident in smem + 1024-byte alignment pad
    score_tiles = 2 if (fast and wgmma) else 1  # the fast wgmma loop double-buffers the score tile
    return 2 * TILE * D * 2 + extra + BQ * CAP * 8 + score_tiles * G * TILE * 4 + HIST_BYTES + 256 + 12 * BQ


def _merge_smem(MCAP) -> int:
    return MCAP * 8 + HIST_BYTES + 256 + 4 * (MERGE_THREADS + 1)


def _layout_ok(H, BQ, TILE) -> bool:
    if BQ < 1 or (BQ * H) % 32:
        return False
    G = BQ * H // 32
    if 8 % G:
        return False
    kw = TILE // (8 // G)
    return kw % 16 == 0 and BQ * H <= 2 * TILE and BQ <= 8


def _try_config(H: int, D: int, topk: int, smem_optin: int, wgmma: bool = False, fast: bool = False):
    options = [(128 // H, 128, False), (64 // H, 64, False), (1, 128, False), (1, 64, False)]
    if wgmma:
        options.insert(0, (128 // H, 128, True))
    for BQ, TILE, wg in options:
        if not _layout_ok(H, BQ, TILE):
            continue
        # The buffer must take a whole tile above topk; twice topk halves the number of compactions.
        cap_min = _round_up(max(topk + TILE, 2 * TILE), SCAN_THREADS)
        cap = _round_up(max(2 * topk, topk + TILE, 1024), SCAN_THREADS)
        while cap > cap_min and _scan_smem(H, D, BQ, TILE, cap, wg, fast) > smem_optin:
            cap -= SCAN_THREADS
        if _scan_smem(H, D, BQ, TILE, cap, wg, fast) > smem_optin:
            continue
        mcap = min(32768, (smem_optin - _merge_smem(0)) // 8 // 1024 * 1024)
        if mcap < topk + MERGE_ROUND or mcap < 2 * MERGE_ROUND:  # keeps topk, appends a round of keys
            continue
        return DsaConfig(H, D, BQ, TILE, cap, mcap, _scan_smem(H, D, BQ, TILE, cap, wg, fast), _merge_smem(mcap), wg,
                         bool(fast))
    return None


def wgmma_allowed(target) -> bool:
    """The Hopper wgmma scan is used on sm_90a unless ``CAKE_RT_DSA_MMA=sync`` asks for the mma.sync
    program (a debugging / A-B knob: the two programs may differ in the last bits of a score)."""
    return target == "sm_90a" and env.choice("CAKE_RT_DSA_MMA", ("", "wgmma", "sync"), "") != "sync"


def fast_enabled() -> bool:
    """Whether the scan uses its performance variant (compiled with ``-DDSA_FAST=1``): register-resident
    radix selections with one block scan per ordered keep, and on sm_90a a software-pipelined tile loop (the
    wgmma of a tile runs while the block compacts and appends the previous tile). Same contract, same bits.

    On by default since the H200 run of 2026-11-29 (GPU tests and the contract's acceptance tests passed
    with it, bits equal to the first program on every benchmark row, 8-9% faster at H = 64, equal at
    H = 32). ``CAKE_RT_DSA_FAST=0`` (read per eager call, and at prepare for a runner) selects the first
    program."""
    v = os.environ.get("CAKE_RT_DSA_FAST", "").strip().lower()
    return v not in ("0", "false", "off", "no")


def select_config(H: int, D: int, topk: int, smem_optin: int, target=None, fast=None) -> DsaConfig:
    """The program for (H, D, topk) on a device whose blocks may opt in to ``smem_optin`` bytes.

    Prefers 128 (query, head) pairs per CTA and 128-key tiles (on sm_90a with wgmma); falls back to
    smaller blocks and tiles when shared memory is short (sm_86/sm_89). Raises ValueError naming
    ``topk`` when nothing fits. ``fast``: the performance variant (None: ``fast_enabled()``).
    """
    if fast is None:
        fast = fast_enabled()
    cfg = _try_config(int(H), int(D), int(topk), int(smem_optin), wgmma_allowed(target), bool(fast))
    if cfg is None:
        raise ValueError(f"topk: {int(topk)} is larger than this device supports for H={H}, D={D} "
                         f"({smem_optin} bytes of shared memory per block); at most {max_topk(H, D, smem_optin)}")
    return cfg


def max_topk(H: int, D: int, smem_optin: int) -> int:
    """Largest topk ``select_config`` accepts on such a device."""
    lo, hi = 0, 1 << 16
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _try_config(H, D, mid, smem_optin) is not None:
            lo = mid
        else:
            hi = mid - 1
    return lo


# ----------------------------------------------------------------------------------------------------
# Segments, visible pairs, FLOPs/bytes
# ----------------------------------------------------------------------------------------------------

def _segments(T, Tkv, cu_q, cu_k, offsets):
    """int64 arrays cu_q, cu_k, offsets (offsets default len_k - len_q)."""
    if cu_q is None:
        cu_q = np.array([0, T], dtype=np.int64)
        cu_k = np.array([0, Tkv], dtype=np.int64)
    cu_q = np.asarray(cu_q, dtype=np.int64)
    cu_k = np.asarray(cu_k, dtype=np.int64)
    lq, lk = np.diff(cu_q), np.diff(cu_k)
    off = (lk - lq) if offsets is None else np.asarray(offsets, dtype=np.int64)
    return cu_q, cu_k, off


def _visible_counts(lenq, lenk, off, causal) -> np.ndarray:
    i = np.arange(lenq, dtype=np.int64)
    if not causal:
        return np.full(lenq, lenk, dtype=np.int64)
    return np.clip(off + i + 1, 0, lenk)


def visible_pairs(cu_seqlens_q, cu_seqlens_k, q_causal_offsets=None, causal=True) -> int:
    """Number of (query, key) pairs the op scores: sum over queries of the keys each one sees.

    ``cu_seqlens_q``/``cu_seqlens_k``: int [S+1]; ``q_causal_offsets``: int [S] or None (default
    len_k - len_q per segment); host or device arrays.
    """
    cu_q = as_host_int32(cu_seqlens_q, "cu_seqlens_q").astype(np.int64)
    cu_k = as_host_int32(cu_seqlens_k, "cu_seqlens_k").astype(np.int64)
    off = None if q_causal_offsets is None else as_host_int32(q_causal_offsets, "q_causal_offsets")
    cu_q, cu_k, off = _segments(None, None, cu_q, cu_k, off)
    total = 0
    for s in range(len(cu_q) - 1):
        total += int(_visible_counts(int(cu_q[s + 1] - cu_q[s]), int(cu_k[s + 1] - cu_k[s]), int(off[s]),
                                     causal).sum())
    return total


def dsa_flops_bytes(T, Tkv, H, D, topk, visible_pairs) -> tuple:
    """(FLOPs, bytes) of one call: 2*H*D per visible pair for the dot products plus 3*H for ReLU, weight
    and head sum; bytes = q + k + weights read once, indices + scores written once."""
    vp = int(visible_pairs)
    flops = vp * (2 * H * D + 3 * H)
    nbytes = T * H * D * 2 + Tkv * D * 2 + T * H * 4 + T * topk * 8
    return int(flops), int(nbytes)


# ----------------------------------------------------------------------------------------------------
# Work-unit planning (pure host arithmetic: CPU-testable)
# ----------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class DsaPlan:
    """Work units for one (shapes, metadata, config, key split) and the workspace they need.

    units: int32 [nunits, 8] = (q0, nq, ks0, lenk, pbase, klo, khi, slot), longest first;
    merge: int32 [nmerge, 4] = (t, first slot, parts, query index in block);
    nslots: parts written to the workspace (slot = one split unit's BQ candidate lists).
    """

    units: np.ndarray
    merge: np.ndarray
    nslots: int
    topk: int
    BQ: int
    causal: bool

    @property
    def nunits(self) -> int:
        return int(self.units.shape[0])

    @property
    def nmerge(self) -> int:
        return int(self.merge.shape[0])

    @property
    def counts_offset(self) -> int:
        return _round_up(self.nslots * self.BQ * self.topk * 8, 256)

    @property
    def workspace_bytes(self) -> int:
        if self.nslots == 0:
            return 0
        return self.counts_offset + _round_up(self.nslots * self.BQ * 4, 256)


def plan_units(T, Tkv, cu_q, cu_k, offsets, causal, topk, BQ, TILE, sm_count, key_split=None) -> DsaPlan:
    """Cut the problem into work units.

    A query block is BQ consecutive queries of one segment; it needs the keys [ks0, ks0 + L) where L is
    what its last query sees. Blocks are split along the keys only when there are fewer blocks than SMs
    (then into parts of about one wave of tiles) or when ``key_split`` (keys per part, rounded up to a
    whole tile) asks for it. Units are ordered longest first (stable).
    """
    cu_q, cu_k, off = _segments(T, Tkv, cu_q, cu_k, offsets)
    blocks = []  # (q0, nq, ks0, lenk, pbase, L)
    for s in range(len(cu_q) - 1):
        qs0, qs1, ks0, ks1 = (int(v) for v in (cu_q[s], cu_q[s + 1], cu_k[s], cu_k[s + 1]))
        lenq, lenk = qs1 - qs0, ks1 - ks0
        if lenq <= 0:
            continue
        vis = _visible_counts(lenq, lenk, int(off[s]), causal)
        pbase = int(off[s]) - qs0
        for b in range(0, lenq, BQ):
            nq = min(BQ, lenq - b)
            L = int(vis[b:b + nq].max())
            blocks.append((qs0 + b, nq, ks0, lenk, pbase, L))
    tiles = [(-(-L // TILE)) for (*_, L) in blocks]
    if key_split is None:
        if len(blocks) >= sm_count or not blocks:
            chunk_tiles = None
        else:
            chunk_tiles = max(1, -(-sum(tiles) // sm_count))
    else:
        chunk_tiles = max(1, -(-int(key_split) // TILE))
    units, merge = [], []
    nslots = 0
    for (q0, nq, ks0, lenk, pbase, L), nt in zip(blocks, tiles):
        parts = 1 if chunk_tiles is None or nt <= chunk_tiles else -(-nt // chunk_tiles)
        if parts == 1:
            units.append((q0, nq, ks0, lenk, pbase, ks0, ks0 + L, -1))
            continue
        step = chunk_tiles * TILE
        for p in range(parts):
            klo = ks0 + p * step
            units.append((q0, nq, ks0, lenk, pbase, klo, min(ks0 + L, klo + step), nslots + p))
        for qi in range(nq):
            merge.append((q0 + qi, nslots, parts, qi))
        nslots += parts
    u = np.asarray(units, dtype=np.int64).reshape(-1, 8)
    if u.size:
        span = u[:, 6] - u[:, 5]
        u = u[np.argsort(-span, kind="stable")]
    if u.size and (u.max() > np.iinfo(np.int32).max or u.min() < np.iinfo(np.int32).min):
        name = "q_causal_offsets" if offsets is not None else "cu_seqlens_q"
        raise ValueError(f"{name}: sizes or offsets overflow int32 in the work plan")
    return DsaPlan(units=u.astype(np.int32), merge=np.asarray(merge, dtype=np.int32).reshape(-1, 4),
                   nslots=nslots, topk=int(topk), BQ=BQ, causal=bool(causal))


# ----------------------------------------------------------------------------------------------------
# Argument checking
# ----------------------------------------------------------------------------------------------------

def _is_device_meta(x) -> bool:
    if x is None or isinstance(x, (np.ndarray, list, tuple)):
        return False
    if hasattr(x, "is_cuda"):
        return bool(x.is_cuda)
    return hasattr(x, "__cuda_array_interface__") or type(x).__module__.startswith("cupy")


def _check_topk(topk) -> int:
    if isinstance(topk, bool) or not isinstance(topk, (int, np.integer)):
        raise TypeError(f"topk: expected an int, got {type(topk).__name__}")
    if int(topk) < 1:
        raise ValueError(f"topk: expected >= 1, got {int(topk)}")
    return int(topk)


@dataclasses.dataclass
class _Problem:
    q: object
    k: object
    w: object
    T: int
    Tkv: int
    H: int
    D: int
    topk: int
    cu_q: object  # host int32 arrays or None
    cu_k: object
    offsets: object
    causal: bool
    device: int


def _check_metadata(cu_seqlens_q, cu_seqlens_k, q_causal_offsets, causal, T, Tkv):
    if (cu_seqlens_q is None) != (cu_seqlens_k is None):
        missing = "cu_seqlens_k" if cu_seqlens_k is None else "cu_seqlens_q"
        raise ValueError(f"{missing}: cu_seqlens_q and cu_seqlens_k come together; got only one of them")
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal: expected a bool, got {type(causal).__name__}")
    if q_causal_offsets is not None and not causal:
        raise ValueError("q_causal_offsets: only meaningful with causal=True; got offsets with causal=False")
    cu_q = cu_k = off = None
    if cu_seqlens_q is not None:
        cu_q = as_host_int32(cu_seqlens_q, "cu_seqlens_q")
        cu_k = as_host_int32(cu_seqlens_k, "cu_seqlens_k")
        for name, cu, total in (("cu_seqlens_q", cu_q, T), ("cu_seqlens_k", cu_k, Tkv)):
            if cu.size < 2:
                raise ValueError(f"{name}: expected [S+1] values with S >= 1, got {cu.size}")
            if cu[0] != 0:
                raise ValueError(f"{name}: expected to start at 0, got {int(cu[0])}")
            if np.any(np.diff(cu.astype(np.int64)) < 0):
                raise ValueError(f"{name}: expected non-decreasing values, got {cu.tolist()[:16]}")
            if int(cu[-1]) != total:
                raise ValueError(f"{name}: expected to end at {total} (the number of "
                                 f"{'queries' if name.endswith('q') else 'keys'}), got {int(cu[-1])}")
        if cu_q.size != cu_k.size:
            raise ValueError(f"cu_seqlens_k: expected {cu_q.size} values like cu_seqlens_q, got {cu_k.size}")
    if q_causal_offsets is not None:
        off = as_host_int32(q_causal_offsets, "q_causal_offsets")
        S = (cu_q.size - 1) if cu_q is not None else 1
        if off.size != S:
            raise ValueError(f"q_causal_offsets: expected {S} values (one per segment), got {off.size}")
        # The kernels index keys with int32 (offset - first query + query): keep every such value in range.
        q0 = cu_q[:-1].astype(np.int64) if cu_q is not None else np.zeros(1, np.int64)
        lq = np.diff(cu_q.astype(np.int64)) if cu_q is not None else np.array([T], np.int64)
        o = off.astype(np.int64)
        bad = np.flatnonzero((o - q0 < np.iinfo(np.int32).min) | (o + lq > np.iinfo(np.int32).max))
        if bad.size:
            s0 = int(bad[0])
            raise ValueError(f"q_causal_offsets: value {int(o[s0])} of segment {s0} is out of range (offset + "
                             f"queries of the segment must stay within int32)")
    return cu_q, cu_k, off


def _check_arrays(q, k, weights, topk):
    topk = _check_topk(topk)
    import cupy

    nd = cupy.ndarray
    if type(q) is nd and type(k) is nd and type(weights) is nd:
        # A signature seen before passed every check below but the pointer ones: only alignment is left.
        sig = (q.shape, q.strides, q.dtype, k.shape, k.strides, k.dtype, weights.shape, weights.strides,
               weights.dtype, q.data.device_id, k.data.device_id, weights.data.device_id)
        hit = _sig_memo.get(sig)
        if hit is not None and (q.data.ptr | k.data.ptr | weights.data.ptr) % 16 == 0:
            T, Tkv, H, D, dev = hit
            return _Problem(q, k, weights, T, Tkv, H, D, topk, None, None, None, True, dev)
    else:
        sig = None
    q = as_device_array(q, "q")
    check_array(q, "q", dtypes=BF16, ndim=3)
    dev = q.device.id
    T, H, D = (int(v) for v in q.shape)
    if H not in (32, 64):
        raise ValueError(f"q: expected H (dimension 1) of 32 or 64, got shape {tuple(q.shape)}")
    if D not in (64, 128):
        raise ValueError(f"q: expected D (dimension 2) of 64 or 128, got shape {tuple(q.shape)}")
    k = as_device_array(k, "k")
    check_array(k, "k", dtypes=BF16, shape=(None, D), device=dev)
    Tkv = int(k.shape[0])
    weights = as_device_array(weights, "weights")
    check_array(weights, "weights", dtypes=np.float32, shape=(T, H), device=dev)
    if T > np.iinfo(np.int32).max // 2 or Tkv > np.iinfo(np.int32).max // 2:
        raise ValueError(f"k: sizes must fit in int32 ids, got T={T}, Tkv={Tkv}")
    for name, a in (("q", q), ("k", k), ("weights", weights)):
        check_aligned(a, name)
    if sig is not None:
        _memo_put(_sig_memo, sig, (T, Tkv, H, D, dev))
    return _Problem(q, k, weights, T, Tkv, H, D, topk, None, None, None, True, dev)


def _check_inputs(q, k, weights, topk, cu_seqlens_q, cu_seqlens_k, q_causal_offsets, causal) -> _Problem:
    p = _check_arrays(q, k, weights, topk)
    p.cu_q, p.cu_k, p.offsets = _check_metadata(cu_seqlens_q, cu_seqlens_k, q_causal_offsets, causal, p.T, p.Tkv)
    p.causal = bool(causal)
    return p


def _check_outputs(indices, scores, T, topk, dev, p=None):
    """Outputs: writable device arrays of the right shape/dtype, 16-byte aligned, overlapping no input
    (of ``p``) and not each other."""
    out = []
    for name, arr, dt in (("indices", indices, np.int32), ("scores", scores, np.float32)):
        if arr is None:
            out.append(None)
            continue
        a = as_device_array(arr, name, output=True)
        sig = (name, a.shape, a.strides, a.dtype, a.data.device_id, T, topk, dev)
        if sig not in _sig_memo:
            check_array(a, name, dtypes=dt, shape=(T, topk), device=dev)
            _memo_put(_sig_memo, sig, True)
        if a.data.ptr % 16:
            check_aligned(a, name)
        out.append(a)
    if out[0] is not None or out[1] is not None:
        ins = () if p is None else (("q", contiguous_span(p.q)), ("k", contiguous_span(p.k)),
                                    ("weights", contiguous_span(p.w)))
        check_disjoint_spans((("indices", None if out[0] is None else contiguous_span(out[0])),
                              ("scores", None if out[1] is None else contiguous_span(out[1]))), ins)
    return out


def _check_workspace(workspace, need, dev, p=None, indices=None, scores=None):
    import cupy

    if workspace is None:
        return None
    if not isinstance(workspace, cupy.ndarray):
        raise TypeError(f"workspace: expected a CuPy uint8 array, got {type(workspace).__name__}")
    sig = ("workspace", workspace.shape, workspace.strides, workspace.dtype, workspace.data.device_id, dev)
    if sig not in _sig_memo:
        check_array(workspace, "workspace", dtypes=np.uint8, device=dev)
        _memo_put(_sig_memo, sig, True)
    if workspace.nbytes < need:
        raise ValueError(f"workspace: expected at least {need} bytes "
                         f"(dsa_indexer_workspace_bytes), got {workspace.nbytes}")
    if need:
        check_aligned(workspace, "workspace")
        ptr = workspace.data.ptr
        ins = () if p is None else (("q", contiguous_span(p.q)), ("k", contiguous_span(p.k)),
                                    ("weights", contiguous_span(p.w)))
        outs = tuple((n, None if a is None else contiguous_span(a)) for n, a in (("indices", indices),
                                                                                 ("scores", scores)))
        check_disjoint_spans((("workspace", (ptr, ptr + need)),), ins + outs)
    return workspace


def _check_schedule(schedule, key_split):
    if schedule is not None and schedule not in SCHEDULES:
        raise ValueError(f"schedule: expected None, 'ticket' or 'static', got {schedule!r}")
    if key_split is not None:
        if isinstance(key_split, bool) or not isinstance(key_split, (int, np.integer)):
            raise TypeError(f"key_split: expected None or an int, got {type(key_split).__name__}")
        if int(key_split) < 1:
            raise ValueError(f"key_split: expected >= 1 keys per part, got {int(key_split)}")
        key_split = int(key_split)
    return schedule, key_split


# ----------------------------------------------------------------------------------------------------
# Programs, plans on the device, launches
# ----------------------------------------------------------------------------------------------------

def _device_facts(dev):
    from ..launch.arch import device_info

    return device_info(dev)


def _config_for(p: _Problem) -> DsaConfig:
    info = _device_facts(p.device)
    return select_config(p.H, p.D, p.topk, info.smem_per_block_optin, info.target)


def _plan_for(p: _Problem, cfg: DsaConfig, key_split) -> DsaPlan:
    info = _device_facts(p.device)
    return plan_units(p.T, p.Tkv, p.cu_q, p.cu_k, p.offsets, p.causal, p.topk, cfg.BQ, cfg.TILE,
                      info.sm_count, key_split)


class _DevicePlan(Guarded):
    """A plan's tables in device memory (one int32 array: units then merge rows) plus its packed launches.

    The table is allocated from the pool of stream ``handle`` and written there by an asynchronous copy
    (``streams.upload``); a call on another stream first waits for that copy (``ready``). As a ``Guarded``
    object it is freed only after the kernels that read it have run (or never, once captured in a graph).
    """

    def __init__(self, plan: DsaPlan, cfg: DsaConfig, dev: int, handle: int, stream_obj=None):
        import cupy

        from ..launch.compile import get_kernel
        from ..launch.grid import occupancy_per_sm

        super().__init__()
        self.plan, self.cfg, self.device = plan, cfg, dev
        host = np.concatenate([plan.units.reshape(-1), plan.merge.reshape(-1)]).astype(np.int32)
        host = np.ascontiguousarray(host if host.size else np.zeros(1, np.int32))
        defines, options = _debug_build(cfg.defines)
        self.scan = get_kernel(KERNEL_PATH, "dsa_scan", defines=defines, options=options, device=dev)
        self.merge = (get_kernel(KERNEL_PATH, "dsa_merge", defines=defines, options=options, device=dev)
                      if plan.nmerge else None)
        occ = occupancy_per_sm(self.scan, SCAN_THREADS, cfg.smem_scan)
        if occ < 1:
            raise RuntimeError(f"dsa_scan cannot run with {cfg.smem_scan} B of shared memory on device {dev}")
        if self.merge is not None and occupancy_per_sm(self.merge, MERGE_THREADS, cfg.smem_merge) < 1:
            raise RuntimeError(f"dsa_merge cannot run with {cfg.smem_merge} B of shared memory on device {dev}")
        self.table = upload(host, handle, stream_obj)
        self.ready = cupy.cuda.Event(block=False, disable_timing=True)
        from cupy_backends.cuda.api import runtime

        runtime.eventRecord(self.ready.ptr, handle)
        self._ordered = {handle}  # streams ordered after the upload
        info = _device_facts(dev)
        self.grid = max(1, min(plan.nunits, occ * info.sm_count))
        self.merge_ptr = self.table.data.ptr + plan.units.size * 4
        self._host = host
        self._packed = {}
        self.owned = ()  # a runner's ticket words and workspace: freed with the plan

    def order_after_upload(self, handle: int, capturing: bool) -> None:
        """Make stream ``handle`` wait for the table upload (once per stream)."""
        if handle in self._ordered:
            return
        from cupy_backends.cuda.api import runtime

        # Under capture the wait becomes an external-event node of the graph (cudaEventWaitExternal).
        runtime.streamWaitEvent(handle, self.ready.ptr, 1 if capturing else 0)
        if not capturing:  # a graph node orders the replays, not later eager calls on the stream
            self._ordered.add(handle)

    def packed(self, schedule: str, prof: int, Tkv: int):
        """(scan, merge or None) ``PackedLaunch`` objects; slots: q, k, w, tickets, indices, scores, ent, cnt."""
        key = (schedule, prof, Tkv)
        hit = self._packed.get(key)
        if hit is not None:
            return hit
        from ..launch.grid import PackedLaunch, Slot

        plan, cfg = self.plan, self.cfg
        use_ticket = schedule == "ticket"
        scan = PackedLaunch(
            self.scan, self.grid, SCAN_THREADS,
            (Slot("q"), Slot("k"), Slot("w"), np.uint64(self.table.data.ptr), np.int32(plan.nunits),
             Slot("tickets"), np.int32(1 if use_ticket else 0), np.int32(plan.topk),
             np.int32(1 if plan.causal else 0), np.int32(Tkv), Slot("indices"), Slot("scores"), Slot("ent"),
             Slot("cnt"), np.uint64(prof)),
            shared_mem=cfg.smem_scan, tag=f"dsa_scan:{schedule}")
        merge = None
        if plan.nmerge:
            merge = PackedLaunch(self.merge, plan.nmerge, MERGE_THREADS,
                                 (np.uint64(self.merge_ptr), np.int32(plan.topk), Slot("ent"), Slot("cnt"),
                                  Slot("indices"), Slot("scores")),
                                 shared_mem=cfg.smem_merge, tag="dsa_merge")
        self._packed[key] = hit = (scan, merge)
        return hit


def _debug_build(defines):
    """Diagnostics (never on by default): CAKE_RT_DSA_LINEINFO=1 adds -lineinfo (sanitizer source lines);
    CAKE_RT_DSA_PROFILE=1 compiles per-phase cycle counters that runs add into ``profile_counters()``."""
    defines = dict(defines)
    options = ()
    if env.flag("CAKE_RT_DSA_LINEINFO"):
        options = ("-lineinfo",)
    if env.flag("CAKE_RT_DSA_PROFILE"):
        defines["DSA_PROFILE"] = 1
    return defines, options


_profile = {}


def profile_counters(device=None):
    """The per-phase cycle counters of profiled scans on ``device`` (CuPy uint64 [8]), created zeroed on
    first use: 0 unit setup, 1 copy wait + barrier, 2 compactions, 3 matrix product + epilogue, 4 barrier
    after the epilogue, 5 appends, 6 final selection and output, 7 ticket draws. Summed over CTAs, counted by
    thread 0 of each CTA; only scans compiled with CAKE_RT_DSA_PROFILE=1 add to them."""
    import cupy

    dev = _device_facts(device).index
    buf = _profile.get(dev)
    if buf is None:
        with cupy.cuda.Device(dev):
            buf = _profile[dev] = cupy.zeros(8, dtype=cupy.uint64)
            cupy.cuda.runtime.deviceSynchronize()
    return buf


_PLAN_CACHE_SIZE = 64
_plan_cache = GuardedLRU(_PLAN_CACHE_SIZE)
_plan_lock = threading.Lock()
# Validated argument signatures and metadata, so a repeated call skips re-checking what cannot have changed.
_sig_memo: dict = {}
_meta_memo: dict = {}
_MEMO_SIZE = 256


def _memo_put(memo: dict, key, value):
    if len(memo) >= _MEMO_SIZE:
        memo.clear()
    memo[key] = value


def _plan_key(p: _Problem, key_split, meta_key=None, target=None):
    def b(a):
        return None if a is None else a.tobytes()

    wg = (wgmma_allowed(target if target is not None else _device_facts(p.device).target),
          env.flag("CAKE_RT_DSA_PROFILE"), env.flag("CAKE_RT_DSA_LINEINFO"), fast_enabled())
    meta = meta_key if meta_key is not None else (b(p.cu_q), b(p.cu_k), b(p.offsets))
    return (p.device, p.T, p.Tkv, p.H, p.D, p.topk, meta, p.causal, key_split, wg)


def _cached_device_plan(p: _Problem, key_split, capturing: bool, handle: int, stream_obj=None,
                        meta_key=None, target=None) -> _DevicePlan:
    key = _plan_key(p, key_split, meta_key, target)
    hit = _plan_cache.get(key)
    if hit is not None:
        return hit
    if capturing:
        raise CaptureError(
            "dsa_indexer_det_topk: a new shape or metadata cannot be planned during CUDA graph capture "
            "(it uploads a work table); make one eager call with the same arguments before capturing, or "
            "capture a prepared runner (prepare_dsa_indexer_det_topk)")
    collect()
    cfg = _config_for(p)
    dp = _DevicePlan(_plan_for(p, cfg, key_split), cfg, p.device, handle, stream_obj)
    return _plan_cache.put(key, dp)


def _default_schedule(dev) -> str:
    return DEFAULT_SCHEDULE.get(_device_facts(dev).target, _FALLBACK_SCHEDULE)


def _launch(dp: _DevicePlan, p: _Problem, indices, scores, workspace, tickets, schedule, handle: int):
    """Launch dsa_scan (and dsa_merge when the plan splits keys) on stream ``handle``."""
    plan = dp.plan
    if plan.nunits == 0:
        return
    use_ticket = schedule == "ticket"
    ws_ptr = workspace.data.ptr if (workspace is not None and plan.nslots) else 0
    cnt = ws_ptr + plan.counts_offset if ws_ptr else 0
    prof = profile_counters(dp.device).data.ptr if env.flag("CAKE_RT_DSA_PROFILE") else 0
    scan, merge = dp.packed(schedule, prof, p.Tkv)
    iptr, sptr = indices.data.ptr, scores.data.ptr

    def go():
        scan.run(handle, p.q.data.ptr, p.k.data.ptr, p.w.data.ptr, tickets.ptr if use_ticket else 0, iptr, sptr,
                 ws_ptr, cnt)
        if merge is not None:
            merge.run(handle, ws_ptr, cnt, iptr, sptr)

    if use_ticket:
        if tickets.dirty:
            tickets.before_launch(handle)
        try:
            go()
        except BaseException:
            tickets.mark_dirty()  # the next call re-zeroes the words on its own stream
            raise
    else:
        go()


def _meta_key(v):
    """A hashable key of host metadata for the validation memo (None: not memoizable)."""
    if v is None:
        return ()
    if isinstance(v, np.ndarray):
        return (v.dtype.str, v.shape, v.tobytes())
    return None


# ----------------------------------------------------------------------------------------------------
# Public entries
# ----------------------------------------------------------------------------------------------------

def dsa_indexer_workspace_bytes(q, k, weights, topk, *, cu_seqlens_q=None, cu_seqlens_k=None,
                                q_causal_offsets=None, causal=True, key_split=None, device=None) -> int:
    """Bytes a caller-owned ``workspace`` must hold for these arguments (0 when no key range is split).

    ``q`` [T, H, D], ``k`` [Tkv, D], ``weights`` [T, H]: arrays or objects with ``.shape`` (and ``.dtype``);
    metadata as for ``dsa_indexer_det_topk``. ``device``: the device whose program is planned (default:
    that of ``q`` when it is a device array, else the current device).
    """
    topk = _check_topk(topk)
    _check_schedule(None, key_split)
    try:
        T, H, D = (int(v) for v in q.shape)
    except Exception:
        raise ValueError(f"q: expected shape [T, H, D], got {getattr(q, 'shape', q)!r}") from None
    if H not in (32, 64) or D not in (64, 128):
        raise ValueError(f"q: expected H in (32, 64) and D in (64, 128), got shape {tuple(q.shape)}")
    try:
        Tkv = int(k.shape[0])
    except Exception:
        raise ValueError(f"k: expected shape [Tkv, D], got {getattr(k, 'shape', k)!r}") from None
    if tuple(int(v) for v in k.shape) != (Tkv, D):
        raise ValueError(f"k: expected shape ({Tkv}, {D}), got {tuple(k.shape)}")
    if tuple(int(v) for v in weights.shape) != (T, H):
        raise ValueError(f"weights: expected shape ({T}, {H}), got {tuple(weights.shape)}")
    cu_q, cu_k, off = _check_metadata(cu_seqlens_q, cu_seqlens_k, q_causal_offsets, causal, T, Tkv)
    if device is None:
        dev_attr = getattr(q, "device", None)  # CuPy: Device(.id); PyTorch: torch.device(.index)
        device = None
        if dev_attr is not None:
            device = getattr(dev_attr, "id", None)
            if device is None and getattr(dev_attr, "type", None) == "cuda":
                device = getattr(dev_attr, "index", None)
    info = _device_facts(device)
    cfg = select_config(H, D, topk, info.smem_per_block_optin, info.target)
    plan = plan_units(T, Tkv, cu_q, cu_k, off, bool(causal), topk, cfg.BQ, cfg.TILE, info.sm_count, key_split)
    return plan.workspace_bytes


def dsa_indexer_det_topk(q, k, weights, topk, *, cu_seqlens_q=None, cu_seqlens_k=None, q_causal_offsets=None,
                         causal=True, indices=None, scores=None, workspace=None, stream=None, schedule=None,
                         key_split=None):
    """Deterministic DSA indexer top-k, eager entry.

        score(t, j) = sum_h weights[t, h] * max(0, dot(q[t, h, :], k[j, :]))

    For every query the ``topk`` visible keys of largest score (ties to the larger id, NaN lowest),
    as global key ids in ascending order, padded with -1 / -inf. Bit-for-bit independent of schedule,
    key split, stream and entry point.

    Args:
        q: bf16 [T, H, D], H in (32, 64), D in (64, 128) (CuPy, or anything with DLPack / CUDA array interface).
        k: bf16 [Tkv, D].
        weights: float32 [T, H].
        topk: int >= 1 (topk > Tkv is legal; the tail is padding).
        cu_seqlens_q, cu_seqlens_k: int32 [S+1] (together or not at all), host or device.
        q_causal_offsets: int32 [S] or None (default len_k - len_q per segment); only with causal=True.
        causal: bool.
        indices, scores: optional outputs int32 / float32 [T, topk] (written in place; writable, 16-byte
            aligned, overlapping no input and not each other).
        workspace: optional CuPy uint8 array of at least ``dsa_indexer_workspace_bytes(...)`` bytes; with
            it the call launches only the scan's kernels (no fill, memset or allocation).
        stream: None (current), a CuPy stream, an object with ``.ptr``/``.cuda_stream``, or an int handle
            (checked with the driver: a stream of the inputs' device).
        schedule: None (measured default per arch), "ticket" or "static" (same bits).
        key_split: tuning/testing knob: keys per part when splitting a query block's key range (rounded up to
            a whole tile); None chooses automatically. Any value gives the same bits.

    Every device array must start on a 16-byte boundary. Under CUDA graph capture the call must have been
    made once, eagerly, with the same shapes and metadata on the same stream (its plan and the stream's
    library memory are then pinned for the life of the process); otherwise ``CaptureError``.

    Returns:
        (indices, scores) as CuPy arrays (the given outputs when passed).
    """
    import cupy

    _check_topk(topk)
    schedule, key_split = _check_schedule(schedule, key_split)
    p = _check_arrays(q, k, weights, topk)
    indices, scores = _check_outputs(indices, scores, p.T, p.topk, p.device, p)
    with current_device(p.device):
        st, handle = resolve_handle(stream, p.device)  # None: the current stream of the inputs' device
        capturing = is_capturing(handle)
        if capturing:
            for name, v in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k),
                            ("q_causal_offsets", q_causal_offsets)):
                if _is_device_meta(v):
                    raise ValueError(f"{name}: device metadata cannot be read during CUDA graph capture (it needs "
                                     f"a device-to-host copy); pass host (NumPy) metadata or capture a prepared "
                                     f"runner")
        mk = (_meta_key(cu_seqlens_q), _meta_key(cu_seqlens_k), _meta_key(q_causal_offsets))
        mk = None if None in mk else (mk, p.T, p.Tkv, bool(causal) if isinstance(causal, (bool, np.bool_)) else causal)
        meta = _meta_memo.get(mk) if mk is not None else None
        if meta is None:
            meta = _check_metadata(cu_seqlens_q, cu_seqlens_k, q_causal_offsets, causal, p.T, p.Tkv)
            if mk is not None:
                _memo_put(_meta_memo, mk, meta)
        p.cu_q, p.cu_k, p.offsets = meta
        p.causal = bool(causal)
        target = _device_facts(p.device).target
        dp = _cached_device_plan(p, key_split, capturing, handle, st, mk, target)
        need = dp.plan.workspace_bytes
        ws = _check_workspace(workspace, need, p.device, p, indices, scores)
        if schedule is None:
            schedule = DEFAULT_SCHEDULE.get(target, _FALLBACK_SCHEDULE)
        state = stream_state(p.device, handle, capturing, st)
        dp.begin()
        state.begin()
        try:
            if indices is None or scores is None:
                with st:
                    if indices is None:
                        indices = cupy.empty((p.T, p.topk), dtype=np.int32)
                    if scores is None:
                        scores = cupy.empty((p.T, p.topk), dtype=np.float32)
            if ws is None and need:
                ws = state_workspace(state, "dsa_indexer", need, handle=handle, stream_obj=st, capturing=capturing)
            tickets = None
            if schedule == "ticket" and dp.plan.nunits:
                tickets = state_ticket_words(state, handle, p.device, 4, st, capturing)
            dp.order_after_upload(handle, capturing)
            _launch(dp, p, indices, scores, ws, tickets, schedule, handle)
        finally:
            state.end(handle, capturing)
            dp.end(handle, capturing)
    return indices, scores


class DSAIndexerRunner:
    """A prepared call: bound to its arrays' shapes, dtypes and pointers and to the metadata values.

    ``runner(stream=None)`` launches on the current (or given) stream and returns ``(indices, scores)``;
    the values in q, k and weights may change between calls. Runs on one stream are ordered by it; a run on
    a further stream gets its own ticket word (and library workspace), made once on that stream, so runs on
    two streams never share them (they do share the outputs: concurrent runs write the same bits). Its
    calls copy nothing to the host and allocate nothing after that, so it can be captured in a CUDA graph: the graph then points at memory the runner owns (its
    work table, ticket word and workspace), so keep the runner alive as long as the graph. Everything prepare
    writes (the table, the zeroed ticket word) is written on the prepare stream and waited for before
    prepare returns, so it is ordered before the first run on any stream. A completed call leaves the ticket
    word at zero; a launch that raised has it re-zeroed on the next run's stream. When the runner is
    dropped, its memory is freed after the kernels queued by its runs have completed.
    """

    def __init__(self, p: _Problem, dp: _DevicePlan, indices, scores, workspace, schedule, tickets,
                 caller_ws=False):
        import weakref

        self._p, self._dp = p, dp
        self.indices, self.scores = indices, scores
        self.workspace = workspace
        self.schedule = schedule
        self.tickets = tickets
        self.plan = dp.plan
        self.config = dp.cfg
        self._caller_ws = caller_ws
        # Ticket word and library workspace per stream: runs on two streams never share them. The first
        # stream the runner runs on (or is captured on) takes the ones made at prepare.
        self._per_stream = {}
        self._home = (tickets, workspace)
        dp.owned = self._per_stream
        weakref.finalize(self, dp.retire)

    def _stream_memory(self, handle: int, capturing: bool):
        key = handle if handle != PER_THREAD else stream_key(self._p.device, handle)
        mem = self._per_stream.get(key)
        if mem is not None:
            return mem
        import cupy

        if not self._per_stream:
            mem = self._home
        else:
            if capturing:
                raise CaptureError(
                    "DSAIndexerRunner: a run on a further stream needs its own ticket word (and workspace), which "
                    "cannot be created during CUDA graph capture; run the runner once on this stream before "
                    "capturing")
            from ..launch.tickets import TicketWords

            s = cupy.cuda.ExternalStream(handle)
            tickets = TicketWords(4, device=self._p.device, stream=s, sync=False) if self.tickets else None
            ws = self.workspace
            if ws is not None and not self._caller_ws:
                with s:
                    ws = cupy.empty(ws.nbytes, dtype=np.uint8)
            mem = (tickets, ws)
        self._per_stream[key] = mem
        return mem

    @property
    def launches_per_call(self) -> int:
        return (1 if self.plan.nunits else 0) + (1 if self.plan.nmerge else 0)

    def __call__(self, stream=None):
        p, dp = self._p, self._dp
        with current_device(p.device):
            _, handle = resolve_handle(stream, p.device)
            capturing = is_capturing(handle)
            tickets, ws = self._stream_memory(handle, capturing)
            dp.begin()
            try:
                _launch(dp, p, self.indices, self.scores, ws, tickets, self.schedule, handle)
            finally:
                dp.end(handle, capturing, pin=False)  # under capture the runner, held by the caller, owns it
        return self.indices, self.scores

    run = __call__


def prepare_dsa_indexer_det_topk(q, k, weights, topk, *, cu_seqlens_q=None, cu_seqlens_k=None,
                                 q_causal_offsets=None, causal=True, indices=None, scores=None, workspace=None,
                                 stream=None, schedule=None, key_split=None) -> DSAIndexerRunner:
    """Prepare a runner for ``dsa_indexer_det_topk`` with these arguments (same meaning; see there).

        score(t, j) = sum_h weights[t, h] * max(0, dot(q[t, h, :], k[j, :]))

    Args as ``dsa_indexer_det_topk``; ``indices`` int32 [T, topk] and ``scores`` float32 [T, topk] are
    required (the runner writes them in place); ``workspace`` optional (the runner allocates its own
    otherwise, once); ``stream``: the stream prepare writes the runner's table and ticket word on (default:
    the current stream); prepare waits for those writes, so runs may use any stream. Metadata may be host
    or device arrays: it is read once, here. Refused during CUDA graph capture. Returns a
    ``DSAIndexerRunner``.
    """
    import cupy

    _check_topk(topk)
    schedule, key_split = _check_schedule(schedule, key_split)
    if indices is None or scores is None:
        raise ValueError(f"{'indices' if indices is None else 'scores'}: a prepared runner needs caller-owned "
                         f"outputs (int32 / float32 [T, topk]), got None")
    p = _check_inputs(q, k, weights, topk, cu_seqlens_q, cu_seqlens_k, q_causal_offsets, causal)
    indices, scores = _check_outputs(indices, scores, p.T, p.topk, p.device, p)
    with cupy.cuda.Device(p.device):
        st, handle = resolve_handle(stream, p.device)
        if is_capturing(handle) or is_capturing(cupy.cuda.get_current_stream().ptr):
            raise CaptureError("prepare_dsa_indexer_det_topk: prepare before capturing a CUDA graph")
        cfg = _config_for(p)
        dp = _DevicePlan(_plan_for(p, cfg, key_split), cfg, p.device, handle, st)
        need = dp.plan.workspace_bytes
        ws = _check_workspace(workspace, need, p.device, p, indices, scores)
        if ws is None and need:
            with st:
                ws = cupy.empty(need, dtype=np.uint8)
        if schedule is None:
            schedule = _default_schedule(p.device)
        from ..launch.tickets import TicketWords

        tickets = TicketWords(4, device=p.device, stream=st, sync=False) if schedule == "ticket" else None
        dp.ready.record(st)
        dp.ready.synchronize()  # the table and the zero are complete: ordered before a run on any stream
        dp.order_after_upload = lambda handle, capturing: None
        return DSAIndexerRunner(p, dp, indices, scores, ws, schedule, tickets, caller_ws=workspace is not None)


def selftest():
    """``cake-rt selftest`` hook: a small call against the float64 reference -> (ok, detail).

    Small-integer q/k and power-of-two weights make every score exact in float32 whatever the summation
    order, so the chosen ids and scores must equal the reference exactly, ties included."""
    import cupy

    from ..reference.dsa import dsa_indexer_reference

    rng = np.random.default_rng(5)
    T, Tkv, H, D, topk = 24, 700, 32, 128, 64
    q = rng.integers(-3, 4, (T, H, D)).astype(BF16)
    k = rng.integers(-3, 4, (Tkv, D)).astype(BF16)
    w = (2.0 ** rng.integers(-3, 3, (T, H)) * rng.choice([-1, 1], (T, H))).astype(np.float32)
    idx, sc = dsa_indexer_det_topk(cupy.asarray(q), cupy.asarray(k), cupy.asarray(w), topk)
    want_i, want_s = dsa_indexer_reference(q, k, w, topk)
    same_i = bool(np.array_equal(idx.get(), np.asarray(want_i)))
    same_s = bool(np.array_equal(sc.get(), np.asarray(want_s, np.float32)))
    return same_i and same_s, (f"T={T} Tkv={Tkv} H={H} topk={topk} causal: ids "
                               f"{'equal' if same_i else 'DIFFERENT'}, scores {'equal' if same_s else 'DIFFERENT'}"
                               f" to the float64 reference")


# Opt-in shared memory per block of each target's GPUs (bytes), for planning programs without a GPU.
SMEM_OPTIN = {"sm_80": 166912, "sm_86": 101376, "sm_89": 101376, "sm_90a": 232448, "sm_100a": 232448}
# topk values with programs of their own in ``programs`` (a program depends on topk only through its candidate
# capacities, so nearby values share programs): the serving value 2048 and the test suite's.
PROGRAM_TOPKS = (1, 8, 16, 32, 37, 40, 50, 64, 100, 128, 256, 300, 512, 700, 1500, 2048, 3000)


def programs(target: str) -> list:
    """Every program of this op for ``target``: [(source path relative to cake_rt/kernels, defines)], the
    list ``cake-rt warmup`` and ``scripts/prewarm`` compile ahead of time."""
    smem = SMEM_OPTIN.get(target, 101376)
    seen = {}
    for H in (32, 64):
        for D in (64, 128):
            for topk in PROGRAM_TOPKS:
                for fast in (True, False):
                    try:
                        cfg = _try_config(H, D, topk, smem, wgmma_allowed(target), fast)
                    except ValueError:
                        cfg = None
                    if cfg is not None:
                        seen[tuple(sorted(cfg.defines.items()))] = cfg.defines
    return [(KERNEL_PATH, d) for d in seen.values()]
