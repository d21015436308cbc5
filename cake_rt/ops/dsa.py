"""Deterministic DSA indexer top-k: host side (validation, planning, launch).

    score(t, j) = sum_h weights[t, h] * max(0, dot(q[t, h, :], k[j, :]))

For every query ``t`` the ``topk`` visible keys of largest score (ties to the larger key id, NaN lowest,
-0.0 == 0.0), as global key ids in ascending order, padded with -1 / -inf. The result is bit-for-bit the
same for any schedule, key split, stream, number of free SMs and entry point. Contract:
``shared/spec/dsa_indexer.md``; user guide: ``docs/dsa.md``.

One kernel per call (``cake_rt/kernels/dsa/indexer.cu``, ``dsa_scan``): fused scores + exact streaming
top-k over work units (query block x key range); when a block's keys are split over several units, the
last of them to finish merges their parts in the same launch. One program per (architecture, H, D):
``q`` H any multiple of 8 from 8 to 128, D 64 or 128.
"""
from __future__ import annotations

import contextlib
import dataclasses
import threading
import weakref

import numpy as np

from .. import env
from ..interop import (BF16, add_host_metadata_key, as_device_array, as_host_int32, call_intake, check_aligned,
                       check_array, check_disjoint_spans, contiguous_span, is_device_metadata,
                       refuse_device_metadata_under_capture, torch_stream_to_order)
from ..launch.streams import (EVENTS_KEPT, MAX_STREAM_STATES, PER_THREAD, CaptureError, Guarded, GuardedLRU,
                              begin_call, collect, copy_breaks_capture, current_device, drop_completed_events, end_call,
                              external_stream, is_capturing, order_after, owns_handle, pool_empty, relaxed_capture_mode,
                              stream_event, stream_key, stream_state, UploadedTable)
from ..launch.streams import resolve as resolve_handle
from ..launch.tickets import state_ticket_words
from ..launch.workspace import state_workspace

try:  # bound once: the per-call path must not pay an import statement
    import cupy as _cupy
    from cupy import ndarray as _ndarray
    from cupy.cuda import Stream as _Stream
    from cupy_backends.cuda.api import runtime as _runtime
except ImportError:  # pragma: no cover - CuPy is a dependency; `cake-rt info` still imports without it
    _cupy = _ndarray = _Stream = _runtime = None

_INT32, _FLOAT32 = np.dtype(np.int32), np.dtype(np.float32)

KERNEL_PATH = "dsa/indexer.cu"
SCAN_THREADS = 256  # threads of the selection (layout.cuh NT): the block, or half of a warp-specialized one
MERGE_ROUND = SCAN_THREADS * 16  # keys the in-kernel merge appends per round (layout.cuh MERGE_ROUND)
RING = 4  # score tiles between the product and the selection warpgroups (layout.cuh RING, wgmma)
PAIRS = 128  # (query, head) columns of one block's score product (layout.cuh PAIRS)
CAP_MAX = 4096  # candidate capacity per query: the register selection's reach (layout.cuh REG_R <= 4)
CAP_MIN = 2048 + 256  # a block keeps topk = 2048 with room for a tile and a merge round
WIN_KEYS, MAX_WIN = 65536, 16  # a candidate's id: a 16-bit offset in one of a unit's windows (layout.cuh)
MAX_SPAN = MAX_WIN * WIN_KEYS  # keys of a unit (layout.cuh MAX_SPAN)
RFLOOR_TILES = 10  # the fewest tiles of a one-query split part that raises its running floor (layout.cuh)
_VARIANTS = ((False, False), (False, True), (True, False))  # (windows, running floor) of a configuration's programs
HEADS = tuple(range(8, 129, 8))
HEAD_DIMS = (64, 128)
SCHEDULES = ("ticket", "static")
# Default schedule per compile target, chosen by measurement (docs/dsa.md, "History of measurements"): on the H200 ticket was
# 8% faster on S1 (dynamic draws balance the causal triangle), equal on C1, and 1.0-1.06x under a held SM
# where static took 1.76x.
DEFAULT_SCHEDULE = {"sm_90a": "ticket"}
_FALLBACK_SCHEDULE = "ticket"
# Shared memory of a compile target's blocks (opt-in), for programs() and the CPU tests.
TARGET_SMEM = {"sm_90a": 232448, "sm_100a": 232448, "sm_80": 166912, "sm_86": 101376, "sm_89": 101376}

__all__ = [
    "dsa_indexer_det_topk",
    "prepare_dsa_indexer_det_topk",
    "dsa_indexer_workspace_bytes",
    "DSAIndexerRunner",
    "visible_pairs",
    "dsa_flops_bytes",
    "programs",
]


# ----------------------------------------------------------------------------------------------------
# Program configuration (pure host arithmetic: CPU-testable)
# ----------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class DsaConfig:
    """One compiled program: heads H, head dim D, queries per block BQ, keys per tile TILE, candidate
    capacity per query CAP, the tile loop (wgmma on sm_90a, else mma.sync), the queries per joint compaction
    CB and its dynamic shared memory.
    A function of (H, D, device) only, never of topk or the metadata: every call with the same H and D
    runs the same float32 operations per score."""

    H: int
    D: int
    BQ: int
    TILE: int
    CAP: int
    smem_scan: int
    merge_keys: int
    wgmma: bool = False
    CB: int = 1

    @property
    def defines(self) -> dict:
        d = {"DSA_H": self.H, "DSA_D": self.D, "DSA_BQ": self.BQ, "DSA_TILE": self.TILE, "DSA_CAP": self.CAP}
        if self.wgmma:
            d["DSA_WGMMA"] = 1
        if self.CB > 1:
            d["DSA_CB"] = self.CB
        return d

    def program_defines(self, windows: bool, running_floor: bool = False) -> dict:
        """The program of a plan (``DsaPlan.windows``, ``DsaPlan.running_floor``): ``defines``, plus DSA_WINDOWS where
        a unit spans several 65,536-key windows (a program of one-window units has the windows' code compiled out),
        else, on the wgmma loop, DSA_RFLOOR where a one-query split part raises its floor on the way (the code is
        compiled out of the other programs, whose calls have no such part). The same bits in every program."""
        if windows:
            return dict(self.defines, DSA_WINDOWS=1)
        if running_floor and self.wgmma:
            return dict(self.defines, DSA_RFLOOR=1)
        return self.defines

    def program_variants(self) -> list:
        """The defines of every program of this configuration: one-window units, their running-floor program (wgmma),
        several windows."""
        out = []
        for windows, running_floor in _VARIANTS:
            d = self.program_defines(windows, running_floor)
            if d not in out:
                out.append(d)
        return out

    @property
    def threads(self) -> int:
        """Threads per block: the wgmma program is warp-specialized (product + selection warpgroups)."""
        return 2 * SCAN_THREADS if self.wgmma else SCAN_THREADS

    @property
    def max_topk(self) -> int:
        """Largest topk: a compacted buffer takes a whole tile, the merge buffer a whole round."""
        return min(self.CAP - self.TILE, self.merge_keys - MERGE_ROUND)


def _round_up(x: int, m: int) -> int:
    return (int(x) + m - 1) // m * m


def _layout(H, D, BQ, TILE, CAP, wgmma, cb=1):
    """(bytes of dynamic shared memory, merge buffer keys): mirrors layout.cuh's Layout (QPASS, KBUF); compared with the
    header for every configuration by tests/dsa/test_dsa_layout_mirror_cpu.py."""
    qpass = -(-BQ * H // PAIRS) if wgmma else 1
    kbuf = 1 if qpass == 2 else 2
    qrows = PAIRS * qpass if wgmma else _round_up(BQ * H, 16)
    cand = kbuf * TILE * D * 2 + qrows * D * 2
    sc = cand + BQ * (CAP * 6 + 2 * MAX_WIN * 4)  # a query's block: CAP keys (u32), CAP ids (u16), window state
    hist = sc + (RING if wgmma else 1) * BQ * TILE * 4 + (qrows * 4 if wgmma else 0) + (cb - 1) * 2048 * 4
    end = hist + 2048 * 4 + 64 + 128 + 64 + 16 * 8 + 16 * 4 + (SCAN_THREADS + 4) * 4
    return (1024 if wgmma else 0) + end, sc // 8


def _widest_block(H: int, wgmma: bool) -> int:
    """Most queries a block may hold: PAIRS (query, head) pairs, or two product passes of PAIRS on the wgmma loop
    where H = 64 or 128 (four or two queries a key tile; layout.cuh QPASS)."""
    return 2 * PAIRS // H if wgmma and H in (64, 128) else PAIRS // H


def _try_config(H: int, D: int, smem_optin: int, wgmma: bool):
    """The largest block (then the largest capacity) that fits, preferring CAP >= CAP_MIN. The wgmma
    program compacts the buffers of a block of <= 4 queries together (CB = BQ) when their histograms fit
    beside the largest capacity, else in pairs (CB = 2, at the capacity that fits), else one by one."""
    best = None
    for TILE in ((128,) if wgmma else (128, 64)):
        for BQ in range(_widest_block(H, wgmma), 0, -1):
            cb = 1
            if wgmma and 2 <= BQ <= 4:
                cb = BQ if _layout(H, D, BQ, TILE, CAP_MAX, wgmma, BQ)[0] <= smem_optin else 2
            cap = CAP_MAX
            while cap >= 2 * 256 and _layout(H, D, BQ, TILE, cap, wgmma, cb)[0] > smem_optin:
                cap -= SCAN_THREADS
            if cb > 1 and cap < CAP_MIN:
                cb, cap = 1, CAP_MAX
                while cap >= 2 * 256 and _layout(H, D, BQ, TILE, cap, wgmma)[0] > smem_optin:
                    cap -= SCAN_THREADS
            smem, mkeys = _layout(H, D, BQ, TILE, cap, wgmma, cb)
            if smem > smem_optin or mkeys < 2 * MERGE_ROUND or cap < 2 * TILE:
                continue
            cfg = DsaConfig(H, D, BQ, TILE, cap, smem, mkeys, wgmma, cb)
            if cap >= CAP_MIN:
                return cfg
            if best is None or cfg.max_topk > best.max_topk:
                best = cfg
    return best


def wgmma_allowed(target) -> bool:
    """The Hopper wgmma scan is used on sm_90a unless ``CAKE_RT_DSA_MMA=sync`` asks for the mma.sync
    program (a testing / A-B knob: it runs the sm_80 tile loop on a Hopper; the two programs may differ in
    the last bits of a score)."""
    mma = env.choice("CAKE_RT_DSA_MMA", ("", "wgmma", "sync"), "")  # read on every target: a bad value is refused
    return target == "sm_90a" and mma != "sync"


def check_heads(H, D, name="q"):
    if H not in HEADS or D not in HEAD_DIMS:
        raise ValueError(f"{name}: expected H (dimension 1) a multiple of 8 from 8 to 128 and D (dimension 2) "
                         f"64 or 128, got H={H}, D={D}")


def config_for(H: int, D: int, smem_optin: int, target=None) -> DsaConfig:
    """The program for (H, D) on a device whose blocks may opt in to ``smem_optin`` bytes (topk-free)."""
    check_heads(H, D)
    cfg = _try_config(int(H), int(D), int(smem_optin), wgmma_allowed(target))
    if cfg is None:
        raise ValueError(f"q: H={H}, D={D} does not fit this device ({smem_optin} bytes of shared memory per block)")
    return cfg


def select_config(H: int, D: int, topk: int, smem_optin: int, target=None) -> DsaConfig:
    """``config_for(H, D, ...)`` checked against ``topk``: ValueError naming ``topk`` when the program's
    buffers cannot hold it (``max_topk``)."""
    cfg = config_for(H, D, smem_optin, target)
    if int(topk) > cfg.max_topk:
        raise ValueError(f"topk: {int(topk)} is larger than this device supports for H={H}, D={D} "
                         f"({smem_optin} bytes of shared memory per block); at most {cfg.max_topk}")
    return cfg


def max_topk(H: int, D: int, smem_optin: int, target=None) -> int:
    """Largest topk ``select_config`` accepts on such a device."""
    return config_for(H, D, smem_optin, target).max_topk


# (H, D) of the programs the GPU tests and the bench suite run: the bench geometries (H 32 / 64, D 128),
# every tested head count at D 64 (56: blocks of two queries, 72-104: of one), the extremes at D 128 and 24, 40 (blocks
# of five and three), 80-120 (one query); the mma.sync loop on sm_90a where the GPU tests run it through
# CAKE_RT_DSA_MMA=sync.
_PROGRAM_SHAPES = ((32, 128), (64, 128), (8, 128), (16, 128), (24, 128), (40, 128), (48, 128), (80, 128), (96, 128),
                   (112, 128), (120, 128), (128, 128),
                   (8, 64), (16, 64), (24, 64), (32, 64), (48, 64), (56, 64), (64, 64), (72, 64), (88, 64), (104, 64),
                   (128, 64))
_SYNC_ON_SM90 = ((32, 128), (64, 128), (8, 64))


def programs(target, every: bool = False) -> list:
    """Every (source path relative to ``cake_rt/kernels``, defines) the GPU tests and the bench suite
    compile for ``target``: per (loop, H, D) the programs of ``DsaConfig.program_variants`` (one-window units, with
    the running floor on the wgmma loop, several windows: ``DsaPlan.windows`` and ``DsaPlan.running_floor``; topk
    never changes a program, the metadata picks one). ``every``: those of
    every (H, D) the op takes (``HEADS`` x ``HEAD_DIMS``) as well, the list ``cake-rt warmup --shapes heads=...`` narrows."""
    smem = TARGET_SMEM.get(target, TARGET_SMEM["sm_80"])
    out, seen = [], set()
    wg = target == "sm_90a"
    pairs = _PROGRAM_SHAPES + (tuple((H, D) for D in HEAD_DIMS for H in HEADS) if every else ())
    shapes = [(H, D, wg) for H, D in pairs] + ([(H, D, False) for H, D in _SYNC_ON_SM90] if wg else [])
    for windows, running_floor in _VARIANTS:
        for H, D, loop in shapes:
            defines = _try_config(H, D, smem, loop).program_defines(windows, running_floor)
            key = tuple(sorted(defines.items()))
            if key not in seen:
                seen.add(key)
                out.append((KERNEL_PATH, defines))
    return out


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
    len_k - len_q per segment); host or device arrays (device ones copied to the host on CuPy's current stream;
    ``ValueError`` naming one when that stream is capturing a CUDA graph).
    """
    _refuse_under_capture(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, q_causal_offsets=q_causal_offsets)
    cu_q = as_host_int32(cu_seqlens_q, "cu_seqlens_q").astype(np.int64)
    cu_k = as_host_int32(cu_seqlens_k, "cu_seqlens_k").astype(np.int64)
    off = None if q_causal_offsets is None else as_host_int32(q_causal_offsets, "q_causal_offsets")
    cu_q, cu_k, off = _segments(None, None, cu_q, cu_k, off)
    total = 0
    for s in range(len(cu_q) - 1):
        total += int(_visible_counts(int(cu_q[s + 1] - cu_q[s]), int(cu_k[s + 1] - cu_k[s]), int(off[s]),
                                     causal).sum())
    return total


def _refuse_under_capture(**metadata) -> None:
    """For the entries without a ``stream=`` (their device metadata is copied on CuPy's current stream): ``ValueError``
    naming the first device array of ``metadata`` when that stream is capturing a CUDA graph."""
    if any(is_device_metadata(v) for v in metadata.values()):
        refuse_device_metadata_under_capture(metadata.items(), _cupy.cuda.get_current_stream().ptr)


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

    units: int32 [nunits, 12] = (q0, nq, ks0, lenk, pbase, klo, khi, slot, mblock, slot0, nparts, 0), longest
    first; a split block's units have slot = slot0 + part, mblock = its arrival word (0 .. nsplit), the last
    of its nparts units to finish merges the parts in the same launch; unsplit units have slot = mblock = -1.
    nslots: parts written to the workspace (slot = one split unit's BQ candidate lists).
    """

    units: np.ndarray
    nslots: int
    nsplit: int
    topk: int
    BQ: int
    causal: bool
    TILE: int = 128

    @property
    def nunits(self) -> int:
        return int(self.units.shape[0])

    @property
    def counts_offset(self) -> int:
        return _round_up(self.nslots * self.BQ * self.topk * 8, 256)

    @property
    def workspace_bytes(self) -> int:
        if self.nslots == 0:
            return 0
        return self.counts_offset + _round_up(self.nslots * self.BQ * 4, 256)

    @property
    def windows(self) -> bool:
        """Whether a unit spans more than one WIN_KEYS-key window: the launch then needs the program of several
        windows (``DsaConfig.program_defines(windows=True)``; layout.cuh DSA_WINDOWS)."""
        return bool(self.units.size) and int((self.units[:, 6] - self.units[:, 5]).max()) > WIN_KEYS

    @property
    def running_floor(self) -> bool:
        """Whether a one-query split part has ``RFLOOR_TILES`` tiles or more (and every unit one window): the wgmma
        launch then takes the program in which such a part raises its floor from its block's histogram a third of the
        way through its tiles (``DsaConfig.program_defines``; layout.cuh DSA_RFLOOR, docs/dsa.md round 55)."""
        if self.windows or not self.units.size:
            return False
        u = self.units
        tiles = -(-(u[:, 6] - u[:, 5]) // self.TILE)
        return bool(((u[:, 7] >= 0) & (u[:, 1] == 1) & (tiles >= RFLOOR_TILES)).any())

    @property
    def ticket_words(self) -> int:
        """uint32 words a launch needs: the ticket word, 3 spare, then per split block its record (layout.cuh
        SPLIT_WORDS: the arrival word, 3 spare, a 2048-bin histogram per query of the block), rounded up to a
        power of two so calls of similar plans share a stream's words."""
        n = 4 + self.nsplit * split_words(self.BQ)
        return 1 << (n - 1).bit_length()


def split_words(BQ: int) -> int:
    """uint32 words of one split block's record in the arrival words (layout.cuh SPLIT_WORDS)."""
    return 4 + BQ * 2048


def plan_units(T, Tkv, cu_q, cu_k, offsets, causal, topk, BQ, TILE, sm_count, key_split=None) -> DsaPlan:
    """Cut the problem into work units.

    A query block is BQ consecutive queries of one segment; it needs the keys [ks0, ks0 + L) where L is
    what its last query sees. Blocks are split along the keys only when there are fewer blocks than SMs
    (then into parts of about one wave of tiles) or when ``key_split`` (keys per part, rounded up to a
    whole tile) asks for it, and always into parts of at most MAX_SPAN keys (a candidate's id is a 16-bit offset
    in one of its unit's MAX_WIN windows). When the blocks are split and there are at most ``sm_count`` queries, every
    block holds one query, so the merges of the queries run in parallel (the matrix products are small).
    Units are ordered longest first (stable).
    """
    cu_q, cu_k, off = _segments(T, Tkv, cu_q, cu_k, offsets)

    def blocks_of(bq):
        out = []  # (q0, nq, ks0, lenk, pbase, L)
        for s in range(len(cu_q) - 1):
            qs0, qs1, ks0, ks1 = (int(v) for v in (cu_q[s], cu_q[s + 1], cu_k[s], cu_k[s + 1]))
            lenq, lenk = qs1 - qs0, ks1 - ks0
            if lenq <= 0:
                continue
            vis = _visible_counts(lenq, lenk, int(off[s]), causal)
            pbase = int(off[s]) - qs0
            for b in range(0, lenq, bq):
                nq = min(bq, lenq - b)
                L = int(vis[b:b + nq].max())
                out.append((qs0 + b, nq, ks0, lenk, pbase, L))
        return out

    blocks = blocks_of(BQ)
    split = (key_split is not None) or (0 < len(blocks) < sm_count)
    if split and BQ > 1 and int(T) <= sm_count:
        blocks = blocks_of(1)
    tiles = [(-(-L // TILE)) for (*_, L) in blocks]
    # A unit spans at most MAX_SPAN keys (a candidate's id is a 16-bit offset in one of its MAX_WIN windows): a longer
    # block is split into parts of at most that many.
    span_tiles = MAX_SPAN // TILE
    if key_split is None:
        chunk_tiles = min(max(1, -(-sum(tiles) // sm_count)), span_tiles) if split else span_tiles
    else:
        chunk_tiles = min(max(1, -(-int(key_split) // TILE)), span_tiles)
    units = []
    nslots = nsplit = 0
    for (q0, nq, ks0, lenk, pbase, L), nt in zip(blocks, tiles):
        parts = 1 if nt <= chunk_tiles else -(-nt // chunk_tiles)
        if parts == 1:
            units.append((q0, nq, ks0, lenk, pbase, ks0, ks0 + L, -1, -1, -1, 1, 0))
            continue
        step = chunk_tiles * TILE
        for p in range(parts):
            klo = ks0 + p * step
            units.append((q0, nq, ks0, lenk, pbase, klo, min(ks0 + L, klo + step), nslots + p, nsplit, nslots,
                          parts, 0))
        nslots += parts
        nsplit += 1
    u = np.asarray(units, dtype=np.int64).reshape(-1, 12)
    if u.size:
        span = u[:, 6] - u[:, 5]
        u = u[np.argsort(-span, kind="stable")]
    if u.size and (u.max() > np.iinfo(np.int32).max or u.min() < np.iinfo(np.int32).min):
        name = "q_causal_offsets" if offsets is not None else "cu_seqlens_q"
        raise ValueError(f"{name}: sizes or offsets overflow int32 in the work plan")
    return DsaPlan(units=u.astype(np.int32), nslots=nslots, nsplit=nsplit, topk=int(topk), BQ=BQ,
                   causal=bool(causal), TILE=int(TILE))


# ----------------------------------------------------------------------------------------------------
# Argument checking
# ----------------------------------------------------------------------------------------------------

def _check_topk(topk) -> int:
    if isinstance(topk, bool) or not isinstance(topk, (int, np.integer)):
        raise TypeError(f"topk: expected an int, got {type(topk).__name__}")
    if int(topk) < 1:
        raise ValueError(f"topk: expected >= 1, got {int(topk)}")
    return int(topk)


@dataclasses.dataclass
class _Problem:
    """A validated call: its arrays (CuPy views; None once memoized), sizes, host metadata and what a
    steady-state eager call reuses. Memoized per call signature (``_signature``); a prepared runner keeps its
    own problem, arrays included."""
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
    nbytes: tuple = ()        # bytes of q, k, weights, indices, scores (0 for a missing output)
    plan_key: tuple | None = None
    held: tuple | None = None  # (switches, _DevicePlan, cache key, _switch_texts()) of the last call: used while
    # cached, not retired and the switches' texts are the same
    checked: tuple = ()       # _check_memory's pointers and bytes of the last call that passed it
    target: str | None = None
    schedule: str | None = None
    key_split: int | None = None


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


_MAX_ROWS = np.iinfo(np.int32).max // 2  # queries or keys: their ids, and a tile past the last, stay in int32


def _check_rows(T: int, Tkv: int) -> None:
    """``ValueError`` naming ``q`` or ``k`` when its rows exceed what the kernels' int32 ids can number; before
    anything is planned (the plan's host arrays are sized by the rows)."""
    for name, n, what in (("q", T, "T (queries)"), ("k", Tkv, "Tkv (keys)")):
        if n > _MAX_ROWS:
            raise ValueError(f"{name}: {what} = {n} is over {_MAX_ROWS}: query and key ids must fit in int32")


def _check_arrays(q, k, weights, topk):
    topk = _check_topk(topk)
    q = as_device_array(q, "q")
    check_array(q, "q", dtypes=BF16, ndim=3)
    dev = q.device.id
    T, H, D = (int(v) for v in q.shape)
    if H not in HEADS:
        raise ValueError(f"q: expected H (dimension 1) a multiple of 8 from 8 to 128, got shape {tuple(q.shape)}")
    if D not in HEAD_DIMS:
        raise ValueError(f"q: expected D (dimension 2) of 64 or 128, got shape {tuple(q.shape)}")
    k = as_device_array(k, "k")
    check_array(k, "k", dtypes=BF16, shape=(None, D), device=dev)
    Tkv = int(k.shape[0])
    weights = as_device_array(weights, "weights")
    check_array(weights, "weights", dtypes=np.float32, shape=(T, H), device=dev)
    _check_rows(T, Tkv)
    for name, a in (("q", q), ("k", k), ("weights", weights)):
        check_aligned(a, name)
    return _Problem(q, k, weights, T, Tkv, H, D, topk, None, None, None, True, dev)


def _check_outputs(indices, scores, T, topk, dev, p=None):
    """Outputs: writable device arrays of the right shape/dtype, 16-byte aligned, overlapping no input
    (of ``p``) and not each other."""
    out = []
    for name, arr, dt in (("indices", indices, np.int32), ("scores", scores, np.float32)):
        if arr is None:
            out.append(None)
            continue
        a = as_device_array(arr, name, output=True)
        check_array(a, name, dtypes=dt, shape=(T, topk), device=dev)
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
    check_array(workspace, "workspace", dtypes=np.uint8, device=dev)
    _check_workspace_size(workspace, need)
    if need:
        check_aligned(workspace, "workspace")
        ptr = workspace.data.ptr
        ins = () if p is None else (("q", contiguous_span(p.q)), ("k", contiguous_span(p.k)),
                                    ("weights", contiguous_span(p.w)))
        outs = tuple((n, None if a is None else contiguous_span(a)) for n, a in (("indices", indices),
                                                                                 ("scores", scores)))
        # the outputs first, so that an overlap with one of them is reported as with an output
        check_disjoint_spans(outs + (("workspace", (ptr, ptr + need)),), ins)
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


def _plan(p: _Problem, cfg: DsaConfig, key_split) -> DsaPlan:
    """The work units of a validated call (``plan_units`` on this device's SM count)."""
    info = _device_facts(p.device)
    return plan_units(p.T, p.Tkv, p.cu_q, p.cu_k, p.offsets, p.causal, p.topk, cfg.BQ, cfg.TILE,
                      info.sm_count, key_split)


class _DevicePlan(UploadedTable):
    """A plan's unit table in device memory (an ``UploadedTable``: uploaded on the planning call's stream,
    other streams wait for it once, freed after the kernels that read it) plus its packed launch and, for the wgmma
    program, the tensor maps of k (``maps``: k as ``Tkv`` rows of D columns, 64 x 64 boxes in the 128-byte swizzle,
    memoized per k pointer; k is C-contiguous and 16-byte aligned, as a map needs)."""

    def __init__(self, plan: DsaPlan, cfg: DsaConfig, dev: int, Tkv: int, handle: int, stream_obj=None):
        from ..launch.compile import get_kernel
        from ..launch.grid import occupancy_per_sm
        from ..launch.tensormap import Tile2D, TileMaps

        host = np.ascontiguousarray(plan.units.reshape(-1) if plan.units.size else np.zeros(1, np.int32))
        scan = get_kernel(KERNEL_PATH, "dsa_scan", defines=cfg.program_defines(plan.windows, plan.running_floor),
                          device=dev)
        occ = occupancy_per_sm(scan, cfg.threads, cfg.smem_scan)
        if occ < 1:
            raise RuntimeError(f"dsa_scan cannot run with {cfg.smem_scan} B of shared memory on device {dev}")
        super().__init__(host, handle, stream_obj)
        self.plan, self.cfg, self.device, self.scan = plan, cfg, dev, scan
        self.grid = max(1, min(plan.nunits, occ * _device_facts(dev).sm_count))
        # What every call of the plan reads, computed once: the work units, the workspace bytes, the ticket words
        # (by schedule: 0 when a launch needs none), the workspace counts' offset.
        self.nunits, self.need = plan.nunits, plan.workspace_bytes
        self.words = {sch: plan.ticket_words if self.reads_words(sch) else 0 for sch in SCHEDULES}
        self.counts_offset = plan.counts_offset
        self.maps = TileMaps((Tile2D(cfg.D, Tkv, cfg.D * 2),)) if cfg.wgmma else None
        self._packed = {}
        self.owned = ()  # a runner's ticket words and workspace: freed with the plan

    def draws(self, schedule: str) -> bool:
        """Whether a launch draws its units from the ticket word: the ticket schedule where the grid has fewer CTAs
        than units. With a CTA for every unit (the split tails' plans) each CTA takes unit blockIdx.x, as under the
        static schedule: a draw is an L2 round trip before a CTA's first unit and another after its last, both on the
        call's critical path (docs/dsa.md round 58). A CTA whose SM another stream holds then runs its unit once a CTA
        exits, where a draw would have given that unit to the first CTA to finish: either way one SM runs two units."""
        return schedule == "ticket" and self.plan.nunits > self.grid

    def reads_words(self, schedule: str) -> bool:
        """Whether a launch reads ticket words: to draw units, or for the split blocks' arrival records (from word 4)."""
        return self.plan.nunits > 0 and (self.draws(schedule) or self.plan.nsplit > 0)

    def packed(self, schedule: str, pointers=None):
        """The ``PackedLaunch`` of dsa_scan; slots: q, k, w, tickets, arrivals, indices, scores, ent, cnt, and the
        wgmma program's blob: the map of k (``pointers``: their values, bound for good — a runner's launch on one
        stream — instead of slots, the map a copy of k's).

        Arguments: q, k, weights, unit table, nunits, ticket word, use_ticket, arrival words (ticket word + 4
        words, one record per split block), topk, causal, indices, scores, workspace parts, workspace part
        counts; the wgmma program: the tensor map of k."""
        hit = self._packed.get(schedule) if pointers is None else None
        if hit is not None:
            return hit
        from ..launch.grid import Blob, PackedLaunch, Slot
        from ..launch.tensormap import bound_copy

        plan, cfg = self.plan, self.cfg
        if pointers is None:
            q, k, w, tickets, arrivals, indices, scores, ent, cnt = (
                Slot(n) for n in ("q", "k", "w", "tickets", "arrivals", "indices", "scores", "ent", "cnt"))
        else:
            q, k, w, tickets, arrivals, indices, scores, ent, cnt = (np.uint64(v) for v in pointers)
        draw = self.draws(schedule)
        hit = PackedLaunch(
            self.scan, self.grid, cfg.threads,
            (q, k, w, np.uint64(self.ptr), np.int32(plan.nunits), tickets, np.int32(1 if draw else 0),
             arrivals, np.int32(plan.topk), np.int32(1 if plan.causal else 0), indices, scores, ent, cnt)
            + (() if self.maps is None else (Blob("tm_k"),) if pointers is None else
               (bound_copy(self.maps.get((int(pointers[1]),))[1][0]),)),
            shared_mem=cfg.smem_scan, tag=f"dsa_scan:{schedule}")
        if pointers is None:
            self._packed[schedule] = hit
        return hit


_PLAN_CACHE_SIZE = 64
_plan_cache = GuardedLRU(_PLAN_CACHE_SIZE)
_plan_lock = threading.Lock()
_NULL = contextlib.nullcontext()
# Validated call signatures -> _Problem, so a repeated call skips re-checking what cannot have changed.
_problems: dict = {}
_MEMO_SIZE = 256


def _switches(p: _Problem) -> tuple:
    """The switches that pick the program, read on every call: (wgmma allowed, -lineinfo)."""
    return wgmma_allowed(p.target), env.flag("CAKE_RT_LINEINFO")


def _switch_texts() -> tuple:
    """The raw values of the variables ``_switches`` reads: a held plan is used while they are those it was held
    under, without parsing them per call (a problem's target is fixed)."""
    return env.text("CAKE_RT_DSA_MMA"), env.text("CAKE_RT_LINEINFO")


def _plan_key(p: _Problem, key_split, target=None):
    """The plan cache key: shapes, topk, the metadata's bytes, causal, key split, and the switches that
    pick the program (``_switches``)."""
    if p.plan_key is None:  # target first: another thread may read the problem once plan_key is set
        p.target = target if target is not None else _device_facts(p.device).target
        b = [None if a is None else a.tobytes() for a in (p.cu_q, p.cu_k, p.offsets)]
        p.plan_key = (p.device, p.T, p.Tkv, p.H, p.D, p.topk, tuple(b), p.causal, key_split)
    return p.plan_key + (_switches(p),)


def _check_workspace_size(workspace, need: int) -> None:
    """``ValueError`` naming ``workspace`` when a caller's workspace holds fewer than ``need`` bytes."""
    if workspace is not None and need and workspace.nbytes < need:
        raise ValueError(f"workspace: expected at least {need} bytes (dsa_indexer_workspace_bytes), got "
                         f"{workspace.nbytes}")


def _cached_device_plan(p: _Problem, key_split, capturing: bool, handle: int, stream_obj=None,
                        target=None, workspace=None) -> _DevicePlan:
    """The device plan of a validated call. A memoized problem holds the plan of its last call and uses it
    while the switches are the same and the cache has not evicted it (``retired``), without building and
    hashing the cache key (the metadata's bytes); the plan is touched in the cache's LRU as a lookup would, so a
    plan used on every step is not evicted before cold ones. A new plan is checked against the caller's
    ``workspace`` before it is uploaded."""
    held = p.held
    texts = _switch_texts()  # before the switches are parsed: a change in between makes the next call look again
    if held is not None and not held[1].retired and held[3] == texts:
        _plan_cache.touch(held[2])
        return held[1]
    key = _plan_key(p, key_split, target)
    hit = _plan_cache.get(key)
    if hit is None:
        cfg = _config_for(p)
        plan = _plan(p, cfg, key_split)
        _check_workspace_size(workspace, plan.workspace_bytes)  # before the plan's table is uploaded
        if capturing:
            raise CaptureError(
                "dsa_indexer_det_topk: a new shape or metadata cannot be planned during CUDA graph capture "
                "(it uploads a work table); make one eager call with the same arguments before capturing, or "
                "capture a prepared runner (prepare_dsa_indexer_det_topk)")
        collect()
        dp = _DevicePlan(plan, cfg, p.device, p.Tkv, handle, stream_obj)
        hit = _plan_cache.put(key, dp)
    p.held = (key[-1], hit, key, texts)
    return hit


def _default_schedule(dev) -> str:
    return DEFAULT_SCHEDULE.get(_device_facts(dev).target, _FALLBACK_SCHEDULE)


def _launch_args(dp: _DevicePlan, qkw: tuple, indices, scores, workspace, tickets, schedule):
    """The pointers dsa_scan's ``PackedLaunch`` takes (``qkw``: those of q, k and weights); None when the
    plan has no work units. ``tickets`` (``plan.ticket_words`` words: the ticket word, then the records of
    split blocks from word 4): None where the launch reads none (``_DevicePlan.reads_words``)."""
    plan = dp.plan
    if dp.nunits == 0:
        return None
    ws_ptr = workspace.data.ptr if (workspace is not None and dp.need) else 0
    cnt = ws_ptr + dp.counts_offset if ws_ptr else 0
    tptr = tickets.ptr if tickets is not None else 0
    arrivals = tptr + 16 if (tptr and plan.nsplit) else 0
    return qkw + (tptr if schedule == "ticket" else 0, arrivals, indices.data.ptr, scores.data.ptr, ws_ptr, cnt)


def _run(dp: _DevicePlan, args: tuple, tickets, schedule, handle: int) -> None:
    """Launch dsa_scan, the only kernel of a call, on stream ``handle`` with ``_launch_args``' pointers (and, wgmma
    program, the map of this call's k: an encoding the driver refuses raises here, before any stream work; the pair
    is held through the launch, the driver copies the parameters then)."""
    scan = dp.packed(schedule)
    maps = () if dp.maps is None else dp.maps.get((args[1],))
    blobs = maps and maps[1]
    if tickets is None:
        scan.run(handle, args, blobs)
        return
    if tickets.dirty:
        tickets.before_launch(handle)
    try:
        scan.run(handle, args, blobs)
    except BaseException:
        tickets.mark_dirty()  # the next call re-zeroes the words on its own stream
        raise


def _signature(q, k, weights, indices, scores, workspace, topk, cu_seqlens_q, cu_seqlens_k, q_causal_offsets, causal,
               schedule, key_split):
    """Hashable signature of an eager call whose arrays are all C-contiguous CuPy arrays (outputs and
    workspace: or None) and whose metadata is host NumPy (or None): shapes, dtypes and devices of the arrays, the
    metadata's dtype, shape and bytes (a host array changed in place gives another signature), the scalars
    with their types. None when the call cannot be memoized (foreign arrays, device metadata)."""
    nd = _ndarray
    sig = []
    add = sig.append
    for a in (q, k, weights, indices, scores, workspace):
        if a is None:
            add(None)
        elif type(a) is nd and a._c_contiguous:  # strides follow from the shape (others fail validation)
            add(a.shape)
            add(a.dtype)
            add(a.data.device_id)
        else:
            return None
    if not add_host_metadata_key(sig, (cu_seqlens_q, cu_seqlens_k, q_causal_offsets)):
        return None
    sig.extend((type(topk), topk, type(causal), causal, schedule, type(key_split), key_split))
    return tuple(sig)


def _check_memory(p: _Problem, q, k, weights, indices, scores, workspace, need: int) -> tuple:
    """Per call, before any launch: 16-byte alignment of every array, outputs overlapping no input and not
    each other, the workspace's first ``need`` bytes overlapping none of them (``ValueError`` naming the
    argument). The arrays' shapes were checked when ``p`` was validated. Returns the pointers of q, k, w.
    The checks read the pointers, ``need`` and the problem's sizes alone, so those of the last call that passed
    them are kept (``p.checked``) and a call with the same ones passes without them."""
    qp, kp, wp = q.data.ptr, k.data.ptr, weights.data.ptr
    ip = 0 if indices is None else indices.data.ptr
    sp = 0 if scores is None else scores.data.ptr
    xp = workspace.data.ptr if (workspace is not None and need) else 0
    key = (qp, kp, wp, ip, sp, xp, need)
    if key == p.checked:
        return qp, kp, wp
    if (qp | kp | wp | ip | sp | xp) % 16:
        for name, a in (("q", q), ("k", k), ("weights", weights), ("indices", indices), ("scores", scores),
                        ("workspace", workspace if xp else None)):
            if a is not None:
                check_aligned(a, name)
    nb = p.nbytes
    ins = (("q", qp, qp + nb[0]), ("k", kp, kp + nb[1]), ("weights", wp, wp + nb[2]))
    outs = [o for o in (("indices", ip, ip + nb[3]), ("scores", sp, sp + nb[4])) if o[1] and o[2] > o[1]]
    if xp:
        _check_workspace_size(workspace, need)
        outs.append(("workspace", xp, xp + need))
    for i, (on, lo, hi) in enumerate(outs):
        for other in (outs[:i] + list(ins)) if i else ins:
            if lo < other[2] and other[1] < hi:
                kind = "another output" if other in outs else "an input"
                raise ValueError(f"{on}: its memory overlaps {other[0]} ({kind}); outputs may not alias inputs or "
                                 f"each other: pass a separate array")
    p.checked = key
    return qp, kp, wp


# ----------------------------------------------------------------------------------------------------
# Public entries
# ----------------------------------------------------------------------------------------------------

def _intake(q, stream, arrays):
    """``interop.call_intake`` for a DSA call's arrays (q, k, weights, then the outputs indices and scores): the device
    from ``q``. Device metadata is read after validation, on the call's stream, in ``dsa_indexer_det_topk``."""
    return call_intake(q, lambda: as_device_array(q, "q").device.id, stream, arrays, 3)


def dsa_indexer_workspace_bytes(q, k, weights, topk, *, cu_seqlens_q=None, cu_seqlens_k=None,
                                q_causal_offsets=None, causal=True, key_split=None, device=None) -> int:
    """Bytes a caller-owned ``workspace`` must hold for these arguments (0 when no key range is split).

    ``q`` [T, H, D], ``k`` [Tkv, D], ``weights`` [T, H]: arrays or objects with ``.shape`` (and ``.dtype``);
    metadata as for ``dsa_indexer_det_topk``. ``device``: the device whose program is planned (default:
    that of ``q`` when it is a device array, else the current device). Device metadata is copied to the host on
    CuPy's current stream; ``ValueError`` naming it when that stream is capturing a CUDA graph (pass host metadata).
    """
    topk = _check_topk(topk)
    _check_schedule(None, key_split)
    def shape_of(a, name, want):
        if not hasattr(a, "shape"):
            raise TypeError(f"{name}: expected an array or an object with .shape (shape {want}), got "
                            f"{type(a).__name__}")
        try:
            shape = tuple(int(v) for v in a.shape)
        except Exception:
            shape = None
        if shape is None or len(shape) != want.count(",") + 1 or min(shape) < 0:
            raise ValueError(f"{name}: expected shape {want}, got {a.shape!r}")
        return shape

    T, H, D = shape_of(q, "q", "[T, H, D]")
    if H not in HEADS or D not in HEAD_DIMS:
        raise ValueError(f"q: expected H a multiple of 8 from 8 to 128 and D in (64, 128), got shape "
                         f"{tuple(q.shape)}")
    Tkv, kD = shape_of(k, "k", "[Tkv, D]")
    if kD != D:
        raise ValueError(f"k: expected shape ({Tkv}, {D}), got {tuple(k.shape)}")
    if shape_of(weights, "weights", "[T, H]") != (T, H):
        raise ValueError(f"weights: expected shape ({T}, {H}), got {tuple(weights.shape)}")
    _check_rows(T, Tkv)
    _refuse_under_capture(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, q_causal_offsets=q_causal_offsets)
    cu_q, cu_k, off = _check_metadata(cu_seqlens_q, cu_seqlens_k, q_causal_offsets, causal, T, Tkv)
    if device is not None:
        import cupy

        from ..launch.arch import device_index

        device = device_index(device)  # a TypeError naming device for what is no index
        count = cupy.cuda.runtime.getDeviceCount()
        if not 0 <= device < count:
            raise ValueError(f"device: no CUDA device {device} here ({count} visible)")
    else:
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
        q: bf16 [T, H, D], H a multiple of 8 in [8, 128], D in (64, 128) (CuPy, or anything with DLPack / CUDA array interface).
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
        stream: None (CuPy's current; with PyTorch tensors, PyTorch's current stream then waits for the call),
            a CuPy stream, an object with ``.ptr``/``.cuda_stream``, or an int handle (checked with the driver: a
            stream of the inputs' device).
        schedule: None (measured default per arch), "ticket" or "static" (same bits).
        key_split: tuning/testing knob: keys per part when splitting a query block's key range (rounded up to
            a whole tile); None chooses automatically. Any value gives the same bits.

    Every device array must start on a 16-byte boundary. Under CUDA graph capture the call must have been
    made once, eagerly, with the same shapes and metadata on the same stream (its plan and the stream's
    library memory are then pinned for the life of the process); otherwise ``CaptureError``.

    Returns:
        (indices, scores) as CuPy arrays (the given outputs when passed).
    """
    cupy = _cupy
    sig = _signature(q, k, weights, indices, scores, workspace, topk, cu_seqlens_q, cu_seqlens_k, q_causal_offsets,
                     causal, schedule, key_split)
    try:
        p = None if sig is None else _problems.get(sig)
    except TypeError:  # an unhashable scalar argument: validated every call
        p = sig = None
    follow = None
    if p is None:
        _check_topk(topk)
        schedule, key_split = _check_schedule(schedule, key_split)
        with _intake(q, stream, (q, k, weights, indices, scores)):
            p = _check_arrays(q, k, weights, topk)
            # PyTorch's stream to order after the call (stream=None with PyTorch tensors; a memoized call takes CuPy
            # arrays alone): read from the caller's own objects, before they are replaced by CuPy views.
            follow = torch_stream_to_order((q, k, weights, indices, scores), p.device, stream)
            q, k, weights = p.q, p.k, p.w
            indices, scores = _check_outputs(indices, scores, p.T, p.topk, p.device, p)
        if workspace is not None:
            _check_workspace(workspace, 0, p.device)
    with current_device(p.device):
        st, handle = resolve_handle(stream, p.device)  # None: the current stream of the inputs' device
        capturing = is_capturing(handle)
        if p.nbytes == ():  # validated just now: the metadata (device metadata needs a device-to-host copy)
            meta = (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k),
                    ("q_causal_offsets", q_causal_offsets))
            on_device = refuse_device_metadata_under_capture(meta, handle, "pass host (NumPy) metadata or capture a "
                                                                           "prepared runner")
            # Device metadata is copied to the host on the call's stream (CuPy's ``get`` copies on the current
            # stream): ordered after the caller's work on it, which a non-blocking call stream would not be.
            with st if on_device else _NULL:
                p.cu_q, p.cu_k, p.offsets = _check_metadata(cu_seqlens_q, cu_seqlens_k, q_causal_offsets, causal,
                                                            p.T, p.Tkv)
            p.causal = bool(causal)
            p.schedule = schedule if schedule is not None else _default_schedule(p.device)
            p.key_split = key_split
            p.nbytes = tuple(0 if a is None else int(a.nbytes) for a in (q, k, weights, indices, scores))
            p.q = p.k = p.w = None  # the memo keeps no caller array alive (the call uses its own arrays)
            if sig is not None:
                if len(_problems) >= _MEMO_SIZE:
                    _problems.clear()
                _problems[sig] = p
        dp = _cached_device_plan(p, p.key_split, capturing, handle, st, workspace=workspace)
        need = dp.need
        qkw = _check_memory(p, q, k, weights, indices, scores, workspace, need)
        state = stream_state(p.device, handle, capturing, st)
        used = (dp, state)
        begin_call(used)
        try:
            if indices is None or scores is None:
                # From the call's stream's pool (stream-ordered reuse); entering the stream is skipped when it
                # is the current one already (a call with stream=None), as in ssd_combined.
                if cupy.cuda.get_current_stream(p.device).ptr == handle:  # by device: no device query
                    indices, scores = _allocate_outputs(p, indices, scores)
                else:
                    with st:
                        indices, scores = _allocate_outputs(p, indices, scores)
            ws = workspace
            if ws is None and need:
                ws = state_workspace(state, "dsa_indexer", need, handle=handle, stream_obj=st, capturing=capturing,
                                     in_call=True)
            tickets = None
            nwords = dp.words[p.schedule]
            if nwords:
                tickets = state.tickets.get(nwords)
                if tickets is None:
                    tickets = state_ticket_words(state, handle, p.device, nwords, st, capturing)
            if handle not in dp.ordered:
                dp.order_after_upload(handle, capturing)
            args = _launch_args(dp, qkw, indices, scores, ws, tickets, p.schedule)
            if args is not None:  # None: no work units, nothing to launch
                _run(dp, args, tickets, p.schedule, handle)
        finally:
            end_call(used, p.device, handle, capturing)
        if follow is not None:
            # After the launch (a call that raised queued no kernel to wait for): PyTorch's next op on its stream runs
            # after this call's kernel on CuPy's current stream (the call's: stream is None here).
            order_after(follow, handle, p.device)
    return indices, scores


def _allocate_outputs(p: _Problem, indices, scores) -> tuple:
    """(indices, scores) on the current stream: int32 / float32 [T, topk], those not given allocated (by the
    ``ndarray`` constructor that ``cupy.empty`` calls, without its Python frame, as ``ssd._allocate``)."""
    if indices is None:
        indices = _ndarray((p.T, p.topk), _INT32)
    if scores is None:
        scores = _ndarray((p.T, p.topk), _FLOAT32)
    return indices, scores


class _StreamMemory(Guarded):
    """A runner's ticket word and library workspace of one further stream (``memory``), freed after the runs queued on
    that stream (its call event) once the runner releases it, and only while no run of the runner is between its
    lookup and its event record (``busy``: such a run may hold it without having recorded the event yet)."""

    __slots__ = ("memory", "busy", "captured", "watch")

    def __init__(self, memory, busy):
        super().__init__()
        self.memory, self.busy = memory, busy
        self.captured = False
        self.watch = None

    def idle(self) -> bool:
        # Captured: a graph may replay with it (``_release`` keeps it with the runner; a capture that took it while
        # another thread released it leaves it here, never freed).
        return not self.captured and not self.busy and super().idle()


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
    dropped, its memory is freed after the kernels queued by its runs have completed. A further stream's memory
    is released (freed after that stream's queued runs) when its ``cupy.cuda.Stream`` object is collected, and the
    runner keeps that of at most ``MAX_STREAM_STATES`` further streams (the oldest released first: a released
    stream's next run makes its memory again); memory a graph captured is kept while the runner lives.
    """

    def __init__(self, p: _Problem, dp: _DevicePlan, indices, scores, workspace, schedule, tickets,
                 caller_ws=False):
        self._p, self._dp = p, dp
        self._qkw = (p.q.data.ptr, p.k.data.ptr, p.w.data.ptr)
        self.indices, self.scores = indices, scores
        self.workspace = workspace
        self.schedule = schedule
        self.tickets = tickets
        self.plan = dp.plan
        self.config = dp.cfg
        self._caller_ws = caller_ws
        # Ticket word, library workspace and launch pointers per stream: runs on two streams never share
        # them. The first stream the runner runs on (or is captured on) takes the ones made at prepare.
        # Entries are made under the lock (two threads' first runs must not both take the prepare ones).
        self._per_stream = {}
        self._per_stream_lock = threading.Lock()
        self._home = (tickets, workspace)
        # A further stream's memory is released when its CuPy stream object is collected (``_dead``) or, past
        # ``MAX_STREAM_STATES`` further streams, when it is the oldest: the rule every stream's state follows, so a
        # runner run on many short-lived streams does not keep a workspace for each. ``_busy`` holds one item per run
        # between its lookup of a stream's memory and its event record (a released entry is freed only once it is
        # empty); ``_kept``: released entries a graph captured, kept with the runner.
        self._further = 0
        self._prune_at = EVENTS_KEPT
        self._dead = []
        self._busy = []
        self._kept = []
        dp.owned = (self._per_stream, self._kept)
        weakref.finalize(self, dp.retire)

    def _stream_memory(self, handle: int, capturing: bool, released: list, stream_obj=None):
        """``(launch, tickets, event, workspace, guard)`` of the stream ``handle``, made on its first run: dsa_scan's
        launch with every pointer bound (None without work units), the stream's ticket word (or None), the
        stream's call event, recorded after each run (the plan, and the memory it owns, is freed after it), the
        workspace the bound launch points at (held here, never read) and, for a further stream, the ``_StreamMemory``
        that frees its memory once it is released (None for the prepare-time memory). Call it with an item in
        ``_busy``; the guards of the entries it releases meanwhile go to ``released``, for ``_release`` after the
        run (also when this raises: an entry out of the table and not retired would be freed under its runs)."""
        key = handle if handle != PER_THREAD else stream_key(self._p.device, handle)
        mem = self._per_stream.get(key)
        if mem is not None and not self._dead:
            return mem
        with self._per_stream_lock:
            while self._dead:  # further streams whose CuPy stream object was collected
                dkey, gref = self._dead.pop()
                guard = gref()
                if guard is not None and self._per_stream.get(dkey, (None,) * 5)[4] is guard:
                    released.append(self._drop(dkey))
            mem = self._per_stream.get(key)
            if mem is None:
                mem = self._per_stream[key] = self._new_stream_memory(handle, capturing, key, stream_obj)
                if mem[4] is not None:
                    self._further += 1
                    while self._further > MAX_STREAM_STATES:  # the oldest further stream's (dicts keep their order)
                        released.append(self._drop(next(k for k, m in self._per_stream.items() if m[4] is not None)))
                    self._prune_plan_events()
        return mem

    def _prune_plan_events(self) -> None:
        """Drop from the plan's release events (one per stream the runner ran on) those of released streams whose runs
        have completed, once they reach ``_prune_at``: bounded for a runner run on a stream per request. Only while no
        other run is in flight (a run that looked up a stream's memory before its release records that stream's event
        after it; the plan must keep it), else at the next new stream. Under the runner's lock."""
        evs = self._dp._events
        if len(evs) < self._prune_at or len(self._busy) > 1:
            return
        live = {id(m[2]) for m in self._per_stream.values()}
        drop_completed_events(evs, keep=lambda ev: id(ev) in live)
        self._prune_at = max(EVENTS_KEPT, 2 * len(evs))

    def _drop(self, key):
        mem = self._per_stream.pop(key)
        self._further -= 1
        return mem[4]

    def _release(self, released, capturing: bool) -> None:
        """Free the memory of released further streams after their runs (a graph captured one: kept with the runner).
        Called after the run's ``_busy`` item is gone, so the retirement's collect can free what no run holds (no
        collect under capture: its event queries would break a global or thread-local capture)."""
        for guard in released:
            if guard.captured:
                self._kept.append(guard)
            else:
                guard.retire(collect_now=not capturing)

    def _new_stream_memory(self, handle: int, capturing: bool, key=None, stream_obj=None):
        guard = None
        if not self._per_stream:
            tickets, ws = self._home
        else:
            if capturing:
                raise CaptureError(
                    "DSAIndexerRunner: a run on a further stream needs its own ticket word (and workspace), which "
                    "cannot be created during CUDA graph capture; run the runner once on this stream before "
                    "capturing")
            from ..launch.tickets import TicketWords

            s = external_stream(handle)
            tickets = (TicketWords(self.plan.ticket_words, device=self._p.device, stream=s, sync=False)
                       if self.tickets else None)
            ws = self.workspace
            if ws is not None and not self._caller_ws:
                ws = pool_empty(ws.nbytes, np.uint8, s)
            guard = _StreamMemory((tickets, ws), self._busy)
        args = _launch_args(self._dp, self._qkw, self.indices, self.scores, ws, tickets, self.schedule)
        launch = None if args is None else self._dp.packed(self.schedule, args)
        ekey, ev = stream_event(self._p.device, handle)
        self._dp._events[ekey] = ev
        if guard is not None:
            guard._events[ekey] = ev
            if stream_obj is not None and handle not in (0, 1, PER_THREAD) and owns_handle(stream_obj):
                # Released when the caller's stream object is collected (it destroys its handle, which a later stream
                # may take again). The callback holds the list and a weak reference to the guard (a strong one would
                # make a cycle through ``watch``, freed by the cyclic collector only), not the runner.
                dead = self._dead
                guard.watch = weakref.ref(stream_obj,
                                          lambda _ref, key=key, g=weakref.ref(guard): dead.append((key, g)))
        return launch, tickets, ev, ws, guard

    @property
    def launches_per_call(self) -> int:
        return 1 if self.plan.nunits else 0

    def __call__(self, stream=None):
        # The runner's plan (and the memory it owns) is retired only when the runner is gone, so a run needs
        # no in-flight count: it records its stream's event after the launch (under capture the graph holds
        # the launch and the caller holds the runner).
        p, rt = self._p, _runtime
        # The steady path: the inputs' device current; the current stream, or a CuPy stream that owns its
        # handle; a stream this runner has run on; no capture.
        if rt.getDevice() == p.device and (stream is None or (
                isinstance(stream, _Stream) and getattr(stream, "device_id", -1) == p.device
                and getattr(stream, "_foreign_stream_ref", None) is None)):
            handle = (_cupy.cuda.get_current_stream(p.device) if stream is None else stream).ptr
            busy = self._busy
            busy.append(None)  # before the lookup: a release of this stream's memory in between waits for the run
            try:
                mem = self._per_stream.get(handle) if handle != PER_THREAD and not self._dead else None
                if mem is not None and rt.streamIsCapturing(handle) != rt.streamCaptureStatusActive:
                    launch, tickets, ev = mem[0], mem[1], mem[2]
                    if launch is not None:
                        _run_bound(launch, tickets, handle)
                    rt.eventRecord(ev.ptr, handle)
                    return self.indices, self.scores
            finally:
                busy.pop()
        released = []
        with current_device(p.device):
            st, handle = resolve_handle(stream, p.device)
            capturing = is_capturing(handle)
            self._busy.append(None)
            try:
                launch, tickets, ev, _, guard = self._stream_memory(handle, capturing, released, st)
                if capturing and guard is not None:
                    guard.captured = True  # the graph points at this stream's memory: kept while the runner lives
                if launch is not None:
                    _run_bound(launch, tickets, handle)
                if not capturing:
                    rt.eventRecord(ev.ptr, handle)
            finally:
                self._busy.pop()
                if released:
                    self._release(released, capturing)
        return self.indices, self.scores

    run = __call__


def _run_bound(launch, tickets, handle: int) -> None:
    """A runner's launch on stream ``handle`` (re-zeroing its ticket word first after a failed launch): ``_run``
    for a bound launch. Kept apart from it (and from ``TicketWords.guard``, a context manager) because the
    steady run is host-time bound: one shared function cost it 0.2 us of its 1.3 us of Python."""
    if tickets is None:
        launch.run_bound(handle)
        return
    if tickets.dirty:
        tickets.before_launch(handle)
    try:
        launch.run_bound(handle)
    except BaseException:
        tickets.mark_dirty()
        raise


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
    with _intake(q, stream, (q, k, weights, indices, scores)):
        p = _check_arrays(q, k, weights, topk)
        indices, scores = _check_outputs(indices, scores, p.T, p.topk, p.device, p)
    with current_device(p.device):
        st, handle = resolve_handle(stream, p.device)
        if copy_breaks_capture(handle) or copy_breaks_capture(cupy.cuda.get_current_stream().ptr):
            raise CaptureError("prepare_dsa_indexer_det_topk: prepare before capturing a CUDA graph")
        # Neither stream captures: everything prepare does (its copies, allocations, uploads, the program's load and
        # the wait for its writes) is made in relaxed capture mode, which a capture on another stream survives.
        with relaxed_capture_mode():
            with st:  # device metadata is copied to the host on the prepare stream, after the caller's work on it
                p.cu_q, p.cu_k, p.offsets = _check_metadata(cu_seqlens_q, cu_seqlens_k, q_causal_offsets, causal, p.T,
                                                            p.Tkv)
            p.causal = bool(causal)
            cfg = _config_for(p)
            plan = _plan(p, cfg, key_split)
            need = plan.workspace_bytes
            ws = _check_workspace(workspace, need, p.device, p, indices, scores)  # before the plan is uploaded
            dp = _DevicePlan(plan, cfg, p.device, p.Tkv, handle, st)
            if ws is None and need:
                ws = pool_empty(need, np.uint8, st)
            if schedule is None:
                schedule = _default_schedule(p.device)
            from ..launch.tickets import TicketWords

            tickets = (TicketWords(dp.plan.ticket_words, device=p.device, stream=st, sync=False)
                       if dp.words[schedule] else None)
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
