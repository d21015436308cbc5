"""Mamba2 SSD combined prefill (spec: ssd_combined.md), the ``mamba_chunk_scan_combined`` convention.

    dt'   = clamp(softplus?(dt + dt_bias), lo, hi)
    h_t   = exp(dt'_t A_h) h_{t-1} + dt'_t outer(x_t, B_t)          h: [headdim, dstate] per head
    y_t   = h_t C_t + D_h x_t,   then  y_t *= z_t sigmoid(z_t)  when z is given

Two kernel families return the same bits: ``exact`` (one CTA per (segment, block of units) walks its
chunks in order; a unit is 64 headdim rows of one head) and ``chunkpar`` (one cooperative kernel, per
workspace slice of units: chunk-local states, a grid barrier, the cross-chunk scan, a grid barrier, the
outputs). ``family="auto"`` picks one per call (see ``select_family``); ``ssd_plan`` explains the choice.
A program holds one family's kernel (``program_defines``); ``programs(target)`` lists the programs the tests and
the bench suite compile.
"""
from __future__ import annotations

import dataclasses
import math
import threading
import weakref

import numpy as np

from ..interop import (BF16, FP16, FP32, INT32, add_host_metadata_key, as_device_array, as_host_int32, call_intake,
                       check_aligned, check_array, check_disjoint_spans, copy_to_host, dtype_name, parse_dtype,
                       torch_stream_to_order)
from .. import env
from ..launch.grid import Blob, PackedLaunch, Slot, cooperative_capacity
from ..launch.tensormap import Tile2D, TileMaps
from ..launch.streams import (PER_THREAD, CaptureError, GuardedLRU, begin_call, collect, current_device, end_call,
                              is_capturing, order_after, stream_state, UploadedTable)
from ..launch.streams import _dead as _dead_streams
from ..launch.streams import stream_states
from ..launch.streams import resolve as resolve_handle
from ..launch.tickets import state_ticket_words
from ..launch.workspace import state_workspace

try:  # bound once: the per-call path must not pay an import statement
    import cupy as _cupy
    from cupy import ndarray as _ndarray
    from cupy_backends.cuda.api import runtime as _runtime
except ImportError:  # pragma: no cover - CuPy is a dependency; `cake-rt info` still imports without it
    _cupy = _ndarray = _runtime = None

__all__ = ["ssd_combined", "ssd_plan", "SsdPlan", "ssd_flops_bytes", "select_family", "predict_us", "CostModel",
           "COST_MODELS", "cost_model_for", "cost_model_path", "DEFAULT_WORKSPACE_CAP", "last_plan", "programs"]

KERNEL_PATH = "ssd/ssd_combined.cu"
FAMILIES = ("exact", "chunkpar")  # kernel SSD_FAMILY 0, 1
KERNELS = ("ssd_exact", "ssd_chunkpar")  # the kernel of a program, by SSD_FAMILY
THREADS = 128                   # the math warpgroup: 4 warps (kernel: SSD_THREADS)
WG_THREADS = 256                # sm_90a: the math warpgroup and the producer warpgroup (kernel: SSD_CTA_THREADS)
PIPE_WORDS = 17                 # sm_90a: the load pipeline's 16 mbarriers and the slice epoch (kernel: SSD_PIPE_SLOTS)
WALK_PIPE_WORDS = 13            # the walk's: two tile mbarriers, four of its prep sets, two drawn tiles (3 each), a count
UNIT_ROWS = 64                  # headdim rows of one unit (a head's 64-row block; kernel: SSD_PB, units per head SSD_PBLKS)
SUB = 64                        # tokens per sub-block (kernel: SSD_SUB)
SCAN_VEC = 4                    # chunk-parallel scan: adjacent state columns per thread (kernel: SV)
HEADDIMS = (64, 128)
DSTATES = (64, 128, 256)
CHUNKS = (64, 128, 256)
ROW_PARTS = (1, 2, 4)           # chunk-parallel: phase-3 items a tile (kernel: SSD_ROWS; 2 and 4 where the chunk allows)
COL_PARTS = (1, 2, 4)           # chunk-parallel: phase-1 items a tile (kernel: SSD_COLS; 64 state columns an item or more)
DEFAULT_WORKSPACE_CAP = 256 * 1024 * 1024
ENV_MODE = "CAKE_RT_SSD_CHUNK_PARALLEL"
ENV_CAP = "CAKE_RT_SSD_WORKSPACE_CAP"
_CODES = {BF16: 0, FP16: 1, FP32: 2}
_F_D, _F_DP, _F_Z, _F_BIAS, _F_SOFTPLUS, _F_CLAMP, _F_INIT = 1, 2, 4, 8, 16, 32, 64


# ----------------------------------------------------------------------------------------------------
# Cost model. Times in microseconds. A "step" is one 64-token sub-block round of a chunk tile
# (``_steps_per_chunk``): the unit both families are made of; a tile is one chunk of one block of units
# (a unit: one head's 64 headdim rows; a block: the units that share C B^T in one CTA).
#   exact    = e0 + rounds * (e_step * steps + e_chunk) + e_pair * paired * rounds * steps
#     rounds = max(longest segment's chunks, chunk tiles / resident CTAs in whole waves)
#     paired = the share of SMs that run two exact-scan CTAs when the grid is full (a CTA's step is slower
#              when it shares its SM: m2-2.7b-b8 and varlen, 640 and 1024 CTAs, against seed / m2-2.7b /
#              nemotron-h, 8-128 CTAs, one an SM)
#   chunkpar = p0 + p1 * max(item steps, steps * chunk tiles / resident CTAs) + p2 * scan steps per CTA
#              + 3 * workspace bytes / bw + p_slice * slices                   (phase 1 writes S_loc, phase 2
#              reads it and writes S_prev, phase 3 reads S_prev; each slice adds grid barriers)
#     item steps = a tile's longest phase-1 item and longest phase-3 item (``_item_steps``): the whole tile's
#              steps, but for a call of few tiles whose program splits them (SSD_COLS, SSD_ROWS)
#   walk     = p0 + max(w_chain * longest segment's chunks, (w_tiles + w_chain) * chunk tiles / resident CTAs)
#              * the exact scan's chunk time (e_step * steps + e_chunk)                      (``predict_walk_us``)
# Built-in constants per compute capability, fitted to H200 measurements (docs/ssd.md: the run, the rows,
# the residuals); ``cake-rt calibrate`` fits and saves them for another GPU model (``cost_model_for``).
@dataclasses.dataclass(frozen=True)
class CostModel:
    e0: float
    e_step: float
    e_chunk: float
    e_pair: float         # exact: the extra cost of a step when two exact-scan CTAs share an SM
    p_slice: float        # chunk-parallel: cost of each workspace slice (its grid barriers and phases)
    p0: float
    p1: float
    p2: float
    bw_bytes_per_us: float
    w_chain: float        # the walk schedule: a walk's chunk, in the exact scan's chunk time
    w_tiles: float        # the walk schedule: an output tile's CTA time, in the same unit
    source: str


COST_MODELS = {
    (9, 0): CostModel(e0=8.849, e_step=0.5249, e_chunk=3.041, e_pair=0.1622, p_slice=0.0, p0=11.27, p1=0.773,
                      p2=0.0, bw_bytes_per_us=4.242e6, w_chain=0.2268, w_tiles=1.283,
                      source="H200, 2026-12-04: `cake-rt calibrate --repeats 5` on the six suite rows, both families, "
                             "tree cdc510a (the 12-04c record's kernels), the non-negative fit with the split-aware "
                             "item steps; the walk's w_chain / w_tiles fitted to the walk's times on seed, m2-2.7b and "
                             "nemotron-h by `cake-rt calibrate` on tree 0e04462 (the 12-04f kernels; docs/ssd.md)"),
}
_DEFAULT_MODEL = COST_MODELS[(9, 0)]


COST_MODEL_SCHEMA = "cake-rt-ssd-cost-model/3"
_saved_models: dict = {}   # GPU name -> (CostModel, note): read once per process
_kernels_hash: list = []


def kernels_fingerprint() -> str:
    """SHA-256 of the SSD kernel source, its headers inlined: the kernels a fit was measured on. ``cake-rt calibrate``
    saves it with the fit, and a fit of other kernels (made before an upgrade changed them) is not used: its
    constants time kernels that no longer run."""
    if not _kernels_hash:
        import hashlib

        from ..launch.compile import load_source

        _kernels_hash.append(hashlib.sha256(load_source(KERNEL_PATH).encode()).hexdigest())
    return _kernels_hash[0]


def cost_model_path(gpu_name: str):
    """Where ``cake-rt calibrate`` keeps the fitted cost model of a GPU model (None: disk cache off)."""
    import pathlib
    import re

    d = env.cache_dir()
    slug = re.sub(r"[^a-z0-9._-]+", "-", str(gpu_name).lower()).strip("-") or "gpu"
    return None if d is None else pathlib.Path(d) / "cost-models" / f"ssd-{slug}.json"


def cost_model_for(gpu_name: str, capability) -> tuple:
    """(CostModel, note) for a GPU: its saved ``cake-rt calibrate`` fit when there is one, else the built-in
    constants of its capability; the note (empty for a calibrated GPU or an H200) says which was used."""
    hit = _saved_models.get(gpu_name)
    if hit is not None:
        return hit
    from ..launch.compile import trusted_cache_dir

    model, note = None, ""
    path = cost_model_path(gpu_name)
    try:
        saved = path is not None and path.is_file()
    except OSError:  # a cache directory this user cannot search (pathlib raises EACCES): no fit can be read there
        saved = False
    # Read only from a trusted cache directory (as the cubins): a fit planted by another user would steer the
    # selection. trusted_cache_dir warns once when it is not.
    if saved and trusted_cache_dir() is not None:
        try:
            import json

            doc = json.loads(path.read_text())
            vals = doc["model"]
            if doc.get("schema") != COST_MODEL_SCHEMA:
                raise ValueError(f"schema {doc.get('schema')!r}, expected {COST_MODEL_SCHEMA!r}")
            if doc.get("gpu") != gpu_name:  # a file copied or renamed, or two names of one slug: another GPU's times
                raise ValueError(f"it was fitted on {doc.get('gpu')!r}, not on {gpu_name!r}")
            if doc.get("kernels") != kernels_fingerprint():
                raise ValueError("it was measured on other SSD kernels than this cake-rt's (a fit made before an "
                                 "upgrade changed them, or by a cake-rt that did not record them)")
            model = CostModel(**{f.name: (str(vals[f.name]) if f.name == "source" else float(vals[f.name]))
                                 for f in dataclasses.fields(CostModel)})
            bad = [f.name for f in dataclasses.fields(CostModel)
                   if f.name != "source" and not (math.isfinite(getattr(model, f.name)) and getattr(model, f.name) >= 0)]
            if bad:
                raise ValueError(f"constants {bad} are not finite non-negative numbers")
            if not model.bw_bytes_per_us > 0:  # predict_us divides by it: 0 would fail every call's plan
                raise ValueError(f"bw_bytes_per_us is {model.bw_bytes_per_us!r}, not a positive number")
        except Exception as exc:
            import warnings

            warnings.warn(f"cake-rt: ignoring the SSD cost model {path}: {exc.__class__.__name__}: {exc}; "
                          f"run `cake-rt calibrate` again", stacklevel=3)
            model = None
    if model is None:
        model = COST_MODELS.get(tuple(capability), _DEFAULT_MODEL)
        if "H200" not in str(gpu_name):
            note = (f"cost model: the built-in H200 constants, no saved fit for {gpu_name} "
                    f"(run `cake-rt calibrate` once on this GPU)")
    _saved_models[gpu_name] = (model, note)
    return model, note


def forget_cost_models() -> None:
    """Read the saved cost models again on the next call (``cake-rt calibrate`` calls it after saving)."""
    _saved_models.clear()


def _steps_per_chunk(Q: int, N: int, hb: int = 1) -> float:
    """64-token rounds of one tile, weighted by its units: C B^T once per block, the rest per unit."""
    nsub = Q // SUB
    pairs = nsub * (nsub + 1) // 2
    per_unit = pairs * 0.5 + nsub * (N / 128.0) * 2.0  # M X (half the C B^T work), C S^T and the state
    return pairs * (N / 128.0) + hb * per_unit


def _item_steps(Q: int, N: int, hb: int, rows: int, cols: int) -> float:
    """Steps of a chunk-parallel tile's longest phase-1 item (its state product over N / cols columns) and longest
    phase-3 item (its row blocks, ``ssd_next_row``: all, a pair from both ends, or one); ``rows = cols = 1``: the
    tile's ``_steps_per_chunk``. Row block i is C B^T of i + 1 blocks, M X of i + 1 (half the work) and C S^T."""
    nsub, n = Q // SUB, N / 128.0
    parts = [list(range(nsub))] if rows == 1 else (
        [[p] for p in range(nsub)] if rows == nsub else [[p, nsub - 1 - p] for p in range(rows)])
    phase3 = max(sum((i + 1) * n + hb * ((i + 1) * 0.5 + n) for i in part) for part in parts)
    return hb * nsub * n / cols + phase3


def _exact_rounds(items: float, tiles: float, max_chunks: int, slots: int) -> float:
    """Chunk steps of the busiest exact-scan CTA slot: the longest segment, or the tiles spread over the
    slots, counted in whole waves when the items outnumber the slots."""
    spread = tiles / slots
    if items > slots:
        spread *= math.ceil(items / slots) / (items / slots)
    return max(max_chunks, spread)


def predict_us(model: CostModel, *, nseg: int, nheads: int, headdim: int, dstate: int, chunk: int,
               max_chunks: int, total_chunks: int, sm_count: int, ws_bytes: int, coop_slots: int | None = None,
               hb: int = 1, hbx: int = 1, exact_slots: int | None = None, slices: int = 1, rows: int = 1,
               cols: int = 1) -> dict:
    """Predicted microseconds of each family for a call's quantities (``hb`` / ``hbx``: units per CTA of
    the chunk-parallel / exact programs; ``*_slots``: resident CTAs, 2 per SM when not given; ``rows`` /
    ``cols``: the chunk-parallel program's phase-3 / phase-1 items a tile)."""
    units = nheads * (headdim // UNIT_ROWS)
    slots_x = exact_slots if exact_slots else 2 * sm_count
    items = nseg * units / hbx
    rounds = _exact_rounds(items, total_chunks * units / hbx, max_chunks, slots_x)
    paired = min(1.0, max(0.0, min(items, slots_x) / sm_count - 1.0))
    steps_x = _steps_per_chunk(chunk, dstate, hbx)
    exact = model.e0 + rounds * (model.e_step * steps_x + model.e_chunk) + model.e_pair * paired * rounds * steps_x
    slots = coop_slots if coop_slots else 2 * sm_count
    tiles = total_chunks * units / hb
    scan = max(max_chunks, total_chunks * units * (UNIT_ROWS * dstate / THREADS) / slots)  # scan chunk steps per CTA
    steps = _steps_per_chunk(chunk, dstate, hb)
    chunkpar = (model.p0 + model.p1 * max(_item_steps(chunk, dstate, hb, rows, cols), steps * tiles / slots)
                + model.p2 * scan + 3.0 * ws_bytes / model.bw_bytes_per_us + model.p_slice * slices)
    return {"exact": exact, "chunkpar": chunkpar}


# The walk schedule of the chunk-parallel kernel (SSD_WALK, docs/ssd.md "The walk schedule"): one CTA a (segment,
# unit) item walks its chunks (the state pass and the recurrence), the others take the output tiles as their chunks'
# round_T(S_prev) are published. A walk takes the cost model's w_chain of the exact scan's time a chunk, an output
# tile w_tiles of it in CTA time; the walks hold their CTAs, so the tiles and the walks share the grid's CTA time.
# `cake-rt calibrate` fits both (H200, thirtieth session: seed 451.8 / m2-2.7b 233.4 / nemotron-h 713.1 us measured,
# 450.0 / 232.5 / 714.2 predicted).
WALK_MIN_RING = 16   # the ring's least depth (or the items' chunks, when fewer) for the walk to be planned
_SCHEDULE = None     # tests and `cake-rt calibrate`: "phases" or "walk" forces the chunk-parallel schedule
_WALK_RING = None    # tests: the walk's ring depth (to make it wrap)


def predict_walk_us(model: CostModel, *, nseg: int, nheads: int, headdim: int, dstate: int, chunk: int,
                    max_chunks: int, total_chunks: int, slots: int) -> float:
    """Predicted microseconds of the walk schedule: its longest walk, or the CTA time of every walk and every output
    tile over the grid, whichever is longer (the exact scan's chunk time, e_step * steps + e_chunk, is the unit)."""
    units = nheads * (headdim // UNIT_ROWS)
    per_chunk = model.e_step * _steps_per_chunk(chunk, dstate, 1) + model.e_chunk
    # the grid's CTA time: every tile and every walk (an item's chunks, as its tiles)
    cta_time = (model.w_tiles + model.w_chain) * total_chunks * units * per_chunk
    return model.p0 + max(model.w_chain * max_chunks * per_chunk, cta_time / slots)


def walk_layout(c: "_Problem", ring: int) -> tuple:
    """(offsets of the S_prev ring and the prep ring, workspace bytes) of the walk schedule with a ring of ``ring``
    chunks an item: the words ([items] chunks published, [items][ring] slot reads, the ticket), round_T(S_prev)
    [items][ring][64][N], the saved cs and dt' [items][ring][2][Q] (no fp32 local states, no decays)."""
    items = c.nseg * c.nheads * (c.headdim // UNIT_ROWS)
    o1 = _align((items * (ring + 1) + 1) * 4)
    o2 = o1 + _align(items * ring * UNIT_ROWS * c.dstate * np.dtype(c.x.dtype).itemsize)
    return o1, o2, o2 + items * ring * 2 * c.chunk * 4


def walk_ring(c: "_Problem", cap: int, slots: int, defs: dict) -> int:
    """The walk's ring depth for a call (0: the walk does not apply): sm_90a 16-bit programs of one unit a tile and
    one pass of the state columns (dstate <= 128), at most half the cooperative grid walking, tiles for every CTA,
    and a ring of at least min(WALK_MIN_RING, longest segment's chunks) chunks under the workspace cap."""
    items = c.nseg * c.nheads * (c.headdim // UNIT_ROWS)
    if not (defs["SSD_WG"] and defs["SSD_HB"] == 1 and c.dstate <= 128 and c.max_chunks > 0):
        return 0
    if 2 * items > slots or (c.total_chunks * (items // c.nseg) < slots and _SCHEDULE != "walk"):
        return 0  # (forced, tests and sanitizers run it on fewer tiles than CTAs: the spare CTAs draw none)
    if _WALK_RING:
        return _WALK_RING
    per_chunk = walk_layout(c, 1)[2] - walk_layout(c, 0)[2]  # bytes of one more ring chunk (alignment aside)
    ring = min(c.max_chunks, max(0, (cap - walk_layout(c, 0)[2] - 1024) // max(per_chunk, 1)))
    while ring > 0 and walk_layout(c, ring)[2] > cap:
        ring -= 1
    return ring if ring >= min(WALK_MIN_RING, c.max_chunks) else 0


@dataclasses.dataclass
class SsdPlan:
    """What ``ssd_combined`` does for a call: the family, why, and the numbers behind it."""
    family: str
    reason: str
    workspace_bytes: int
    workspace_cap: int
    predicted_us: dict
    mode: str
    segments: int
    nheads: int
    work_items: int          # exact-scan CTAs: segments x units / units per CTA
    total_chunks: int
    max_chunks: int
    sm_count: int
    cooperative_capacity: int | None = None
    grid: int | None = None  # chunk-parallel grid (when chosen)
    slice_units: int = 0     # chunk-parallel: units (head x 64 headdim rows) per workspace slice
    walk_ring: int = 0       # chunk-parallel: the walk schedule's S_prev ring, chunks an item (0: the three phases)
    defines: dict | None = None  # the defines of the chosen family's program (dtypes, shape, units per CTA, buffers,
    # phase-3 items a tile)
    model_inputs: dict | None = None  # the call's quantities: predicted_us == predict_us(model, **model_inputs), but
    # for a walk plan, whose predicted_us holds predict_walk_us's time as chunkpar and the three phases' as chunkpar_phases

    @property
    def row_parts(self) -> int:
        """Chunk-parallel: phase-3 items per tile (its program's SSD_ROWS; 1 for the exact scan)."""
        return (self.defines or {}).get("SSD_ROWS", 1)

    @property
    def col_parts(self) -> int:
        """Chunk-parallel: phase-1 items per tile (its program's SSD_COLS; 1 for the exact scan)."""
        return (self.defines or {}).get("SSD_COLS", 1)

    def __str__(self):
        pred = ", ".join(f"{k} {v:.1f} us" for k, v in self.predicted_us.items())
        return (f"ssd plan: {self.family} ({self.reason}); workspace {self.workspace_bytes} B "
                f"(cap {self.workspace_cap}); predicted {pred}")


def select_family(*, family: str, mode: str, ws_bytes: int, cap: int, coop_error: str | None, predicted: dict):
    """The selection rule (pure; CPU-testable). Returns (family, reason) or raises for explicit chunkpar.

    ``family`` ("auto", "exact", "chunkpar") wins over ``mode`` (CAKE_RT_SSD_CHUNK_PARALLEL: auto, always,
    never). Chunk-parallel needs the workspace within ``cap`` and a possible cooperative launch
    (``coop_error`` is None); under auto it must also be the family the cost model predicts faster (a tie goes to
    the exact scan, which holds no workspace).
    """
    if family == "exact":
        return "exact", "family='exact' requested"
    if family == "chunkpar":
        if ws_bytes > cap:
            raise ValueError(f"family='chunkpar': the chunk-parallel workspace needs {ws_bytes} bytes, over the "
                             f"cap of {cap} bytes ({ENV_CAP}); use family='exact' or 'auto'")
        if coop_error is not None:
            from ..launch.grid import CooperativeLaunchError
            raise CooperativeLaunchError(f"family='chunkpar': a cooperative launch is impossible here: {coop_error}")
        return "chunkpar", "family='chunkpar' requested"
    if mode == "never":
        return "exact", f"{ENV_MODE}=never"
    if ws_bytes > cap:
        return "exact", f"chunk-parallel workspace {ws_bytes} B over the cap {cap} B"
    if coop_error is not None:
        return "exact", f"cooperative launch impossible: {coop_error}"
    if mode == "always":
        return "chunkpar", f"{ENV_MODE}=always"
    if predicted["chunkpar"] >= predicted["exact"]:
        return "exact", (f"cost model: exact {predicted['exact']:.1f} us vs chunk-parallel "
                         f"{predicted['chunkpar']:.1f} us")
    return "chunkpar", (f"cost model: chunk-parallel {predicted['chunkpar']:.1f} us vs exact "
                        f"{predicted['exact']:.1f} us")


# ----------------------------------------------------------------------------------------------------
# Validation and segments.
@dataclasses.dataclass
class _Problem:
    """A validated call: its arrays (CuPy views; once memoized, ``_Spec`` s of their shapes and dtypes), sizes,
    flags, segment table and everything a steady-state call reuses. Memoized per call signature
    (``_signature``): a later call with the same signature brings its own arrays and reuses the rest (the
    plan, the packed launches)."""
    x: object
    dt: object
    A: object
    B: object
    C: object
    D: object
    z: object
    dt_bias: object
    init: object
    out: object
    batch: int
    seqlen: int
    nheads: int
    headdim: int
    ngroups: int
    dstate: int
    chunk: int
    state_dtype: np.dtype
    flags: int
    lo: float
    hi: float
    table: np.ndarray     # int64: segments [nseg][8], order [nseg], chunk -> segment [total_chunks]
    nseg: int
    total_chunks: int
    max_chunks: int
    total_ckpts: int
    nfinal: int
    nvarlen: int
    want_final: bool
    want_varlen: bool
    want_chunks: bool
    device: int
    table_key: tuple = ()     # (device, table bytes): the device-table cache key (bytes hash once)
    in_spans: tuple = ()      # (index in _ARRAYS, bytes) of each input with bytes, for the per-call overlap check
    out_nbytes: int = 0       # bytes of out
    state_alloc: tuple = ()   # (slot, shape) of each state asked for; slot 0 final, 1 varlen, 2 chunk
    held_table: object = None  # the device table of the last call: used while the cache has not retired it
    scalars: tuple = ()       # the kernel's scalar arguments
    planned: tuple | None = None  # (the switches in force, the plan made under them)
    want_states: bool = False      # any state returned
    executable: tuple | None = None  # _executable(self, plan) of the last plan
    held_stream: tuple | None = None  # _stream_parts' held part of the last chunk-parallel call
    checked: tuple = ()       # the pointers (in _ARRAYS order) of the last call that passed _check_memory


def _as_bool(v, name):
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name}: expected a bool, got {type(v).__name__}")
    return bool(v)


def _dev(v, name):
    return as_device_array(v, name)


def _segments_from_runs(seq_idx_host, batch, seqlen):
    """(row, start, end, init_index or -1, last_of_row) for runs of equal seq_idx in each row."""
    segs = []
    for b in range(batch):
        if seqlen == 0:
            segs.append((b, 0, 0, b, True))
            continue
        row = seq_idx_host[b]
        cuts = (np.nonzero(row[1:] != row[:-1])[0] + 1).tolist()
        starts = [0] + cuts
        ends = cuts + [seqlen]
        for k, (s0, s1) in enumerate(zip(starts, ends)):
            segs.append((b, s0, s1, b if k == 0 else -1, k == len(starts) - 1))
    return segs


def _build_table(segs, seqlen, chunk, varlen):
    nseg = len(segs)
    rec = np.zeros((nseg, 8), np.int64)
    chunk_base = ckpt_base = 0
    chunk_seg = []
    max_chunks = 0
    for i, (b, s0, s1, ii, last) in enumerate(segs):
        ln = s1 - s0
        nch = -(-ln // chunk)
        rec[i] = (b * seqlen + s0, ln, ii, chunk_base, ckpt_base, b if last else -1, i if varlen else -1, 0)
        chunk_seg.extend([i] * nch)
        chunk_base += nch
        ckpt_base += ln // chunk
        max_chunks = max(max_chunks, nch)
    lens = rec[:, 1]
    order = np.argsort(-lens, kind="stable").astype(np.int64)  # exact scan: longest segments first
    table = np.concatenate([rec.reshape(-1), order, np.asarray(chunk_seg, np.int64)])
    return table, nseg, chunk_base, max_chunks, ckpt_base


_tables_host: dict = {}  # (seqlen, chunk, batch, cu_seqlens, seq_idx) -> _build_table's result


def _validate(x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states, seq_idx, cu_seqlens, dt_softplus,
              dt_limit, return_final_states, return_varlen_states, return_chunk_states, state_dtype, family, out):
    if family not in ("auto", "exact", "chunkpar"):
        raise ValueError(f"family: expected 'auto', 'exact' or 'chunkpar', got {family!r}")
    x = _dev(x, "x")
    check_array(x, "x", dtypes=(BF16, FP16, FP32), ndim=4)
    dev = x.device.id
    batch, seqlen, nheads, headdim = (int(v) for v in x.shape)
    if headdim not in HEADDIMS:
        raise ValueError(f"x: headdim (x.shape[3]) must be one of {HEADDIMS}, got {headdim}")
    if nheads < 1 or batch < 1:
        raise ValueError(f"x: expected batch >= 1 and nheads >= 1, got shape {tuple(x.shape)}")
    if isinstance(chunk_size, (bool, np.bool_)) or not isinstance(chunk_size, (int, np.integer)) \
            or int(chunk_size) not in CHUNKS:
        raise ValueError(f"chunk_size: expected one of {CHUNKS}, got {chunk_size!r}")
    chunk = int(chunk_size)
    dt = check_array(_dev(dt, "dt"), "dt", dtypes=tuple({FP32, x.dtype}), shape=(batch, seqlen, nheads), device=dev)
    A = check_array(_dev(A, "A"), "A", dtypes=(FP32,), shape=(nheads,), device=dev)
    B = check_array(_dev(B, "B"), "B", dtypes=(x.dtype,), ndim=4, device=dev)
    ngroups, dstate = int(B.shape[2]), int(B.shape[3])
    check_array(B, "B", shape=(batch, seqlen, None, None))
    if dstate not in DSTATES:
        raise ValueError(f"B: dstate (B.shape[3]) must be one of {DSTATES}, got {dstate}")
    if ngroups < 1 or nheads % ngroups != 0:
        raise ValueError(f"B: nheads ({nheads}) must be a multiple of ngroups (B.shape[2] = {ngroups})")
    C = check_array(_dev(C, "C"), "C", dtypes=(x.dtype,), shape=(batch, seqlen, ngroups, dstate), device=dev)
    flags = 0
    if D is not None:
        D = check_array(_dev(D, "D"), "D", dtypes=(FP32,), device=dev)
        if tuple(D.shape) == (nheads,):
            flags |= _F_D
        elif tuple(D.shape) == (nheads, headdim):
            flags |= _F_D | _F_DP
        else:
            raise ValueError(f"D: expected shape ({nheads},) or ({nheads}, {headdim}), got {tuple(D.shape)}")
    if z is not None:
        z = check_array(_dev(z, "z"), "z", dtypes=(x.dtype,), shape=tuple(x.shape), device=dev)
        flags |= _F_Z
    if dt_bias is not None:
        dt_bias = check_array(_dev(dt_bias, "dt_bias"), "dt_bias", dtypes=(FP32,), shape=(nheads,), device=dev)
        flags |= _F_BIAS
    if _as_bool(dt_softplus, "dt_softplus"):
        flags |= _F_SOFTPLUS
    # Numbers only (a 0-d array or tensor is one): float() alone would also take a string ("01" is a pair of
    # digits) and bools.
    try:
        if isinstance(dt_limit, (str, bytes)) or any(isinstance(v, (str, bytes, bool, np.bool_)) for v in dt_limit):
            raise TypeError
        lo, hi = (float(v) for v in dt_limit)
    except Exception:
        raise TypeError(f"dt_limit: expected a pair (lo, hi) of floats, got {dt_limit!r}") from None
    if math.isnan(lo) or math.isnan(hi) or lo > hi:
        raise ValueError(f"dt_limit: expected lo <= hi, got ({lo}, {hi})")
    big = float(np.finfo(np.float32).max)
    if any(math.isfinite(v) and abs(v) > big for v in (lo, hi)):  # the kernel takes float32 bounds
        raise ValueError(f"dt_limit: finite bounds must fit in float32 (|v| <= {big:.4g}), got ({lo}, {hi}); "
                         f"pass inf for no bound")
    if (lo, hi) != (0.0, math.inf):
        flags |= _F_CLAMP
    want_final = _as_bool(return_final_states, "return_final_states")
    want_varlen = _as_bool(return_varlen_states, "return_varlen_states")
    want_chunks = _as_bool(return_chunk_states, "return_chunk_states")
    sdt = FP32 if state_dtype is None else parse_dtype(state_dtype, "state_dtype", (FP32, BF16, FP16))

    cu = None
    if cu_seqlens is not None:
        cu = as_host_int32(cu_seqlens, "cu_seqlens")
        if batch != 1:
            raise ValueError(f"cu_seqlens: needs batch == 1 (packed sequences), got batch {batch}")
        if cu.size < 2:
            raise ValueError(f"cu_seqlens: expected at least 2 entries (nseq + 1), got {cu.size}")
        if cu[0] != 0:
            raise ValueError(f"cu_seqlens: must start at 0, got {int(cu[0])}")
        if np.any(np.diff(cu.astype(np.int64)) < 0):
            raise ValueError("cu_seqlens: must be non-decreasing")
        if int(cu[-1]) != seqlen:
            raise ValueError(f"cu_seqlens: must end at seqlen ({seqlen}), got {int(cu[-1])}")
    elif want_varlen:
        raise ValueError("return_varlen_states: needs cu_seqlens")
    sidx = None
    if seq_idx is not None:
        if isinstance(seq_idx, np.ndarray):
            sidx = seq_idx
        else:
            sidx = _dev(seq_idx, "seq_idx")
            check_array(sidx, "seq_idx", device=dev, contiguous=False)
        if sidx.dtype != INT32:
            raise TypeError(f"seq_idx: expected dtype int32, got {dtype_name(sidx.dtype)}")
        if tuple(sidx.shape) != (batch, seqlen):
            raise ValueError(f"seq_idx: expected shape ({batch}, {seqlen}), got {tuple(sidx.shape)}")
        sidx = np.asarray(sidx if isinstance(sidx, np.ndarray) else copy_to_host(sidx))

    if cu is not None:
        nseq = cu.size - 1
        segs = [(0, int(cu[s]), int(cu[s + 1]), s, s == nseq - 1) for s in range(nseq)]
        if sidx is not None:
            runs = _segments_from_runs(sidx, 1, seqlen)
            want = [(s0, s1) for (_, s0, s1, _, _) in segs if s1 > s0]
            got = [(s0, s1) for (_, s0, s1, _, _) in runs if s1 > s0]
            if want != got:
                raise ValueError("seq_idx: does not agree with cu_seqlens (its runs must be the non-empty sequences)")
        n_init = nseq
    elif sidx is not None:
        segs = _segments_from_runs(sidx, batch, seqlen)
        n_init = batch
    else:
        segs = [(b, 0, seqlen, b, True) for b in range(batch)]
        n_init = batch
    if initial_states is not None:
        initial_states = check_array(_dev(initial_states, "initial_states"), "initial_states", dtypes=(sdt,),
                                     ndim=4, device=dev)
        if tuple(initial_states.shape) != (n_init, nheads, headdim, dstate):
            lead = "nseq" if cu is not None else "batch"
            raise ValueError(f"initial_states: expected shape ({n_init} [{lead}], {nheads}, {headdim}, {dstate}), "
                             f"got {tuple(initial_states.shape)}")
        flags |= _F_INIT
    if out is not None:
        out = check_array(_dev(out, "out"), "out", dtypes=(x.dtype,), shape=tuple(x.shape), device=dev)

    key = (seqlen, chunk, batch, None if cu is None else cu.tobytes(), None if sidx is None else sidx.tobytes())
    hit = _tables_host.get(key)
    if hit is None:
        hit = _build_table(segs, seqlen, chunk, cu is not None)
        if len(_tables_host) >= 256:
            _tables_host.clear()
        _tables_host[key] = hit
    table, nseg, total_chunks, max_chunks, total_ckpts = hit
    if total_chunks >= 2**31 or nseg * nheads * (headdim // UNIT_ROWS) >= 2**31:
        raise ValueError(f"x: too many chunks ({total_chunks}) or work items for one call")
    p = _Problem(x=x, dt=dt, A=A, B=B, C=C, D=D, z=z, dt_bias=dt_bias, init=initial_states, out=out,
                 batch=batch, seqlen=seqlen, nheads=nheads, headdim=headdim, ngroups=ngroups, dstate=dstate,
                 chunk=chunk, state_dtype=sdt, flags=flags, lo=lo, hi=hi, table=table, nseg=nseg,
                 total_chunks=total_chunks, max_chunks=max_chunks, total_ckpts=total_ckpts,
                 nfinal=1 if cu is not None else batch, nvarlen=nseg if cu is not None else 0,
                 want_final=want_final, want_varlen=want_varlen, want_chunks=want_chunks, device=dev)
    p.table_key = (dev, table.tobytes())
    nbytes = [0 if a is None else int(a.nbytes) for a in _arrays_of(p)]
    p.in_spans = tuple((i, n) for i, n in enumerate(nbytes[:9]) if n)
    p.out_nbytes = nbytes[9]
    shape = (nheads, headdim, dstate)
    p.state_alloc = tuple((i, (n,) + shape) for i, (n, want) in enumerate(((p.nfinal, want_final),
                                                                            (p.nvarlen, want_varlen),
                                                                            (total_ckpts, want_chunks))) if want)
    p.want_states = want_final or want_varlen or want_chunks
    p.scalars = (np.int32(nseg), np.int32(total_chunks), np.int32(nheads), np.int32(ngroups), np.int32(flags),
                 np.float32(lo), np.float32(hi))
    return p


_ARRAYS = ("x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states", "out")  # order of every array tuple
_problems: dict = {}  # call signature -> validated _Problem
_MEMO_SIZE = 256


class _Spec:
    """The shape and dtype of an array a problem was validated with."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


def _arrays_of(p: _Problem) -> tuple:
    return (p.x, p.dt, p.A, p.B, p.C, p.D, p.z, p.dt_bias, p.init, p.out)


def _signature(arrays, ptrs, chunk_size, seq_idx, cu_seqlens, dt_softplus, dt_limit, final, varlen, chunks,
               state_dtype, family):
    """Hashable signature of a call whose arrays are all C-contiguous CuPy arrays (or None) and whose metadata
    is host NumPy (or None): shapes, dtypes and devices of the arrays, the metadata's dtype, shape and
    bytes (a host array changed in place gives another signature), the scalars with their types (True and
    1 differ; each type precedes its value). None when the call cannot be memoized (foreign arrays, device
    metadata, unhashable values). Appends the arrays' pointers (0 for None) to ``ptrs``."""
    nd = _ndarray
    sig = []
    add = sig.append
    put = ptrs.append
    for a in arrays:
        if a is None:
            add(None)
            put(0)
        elif type(a) is nd and a._c_contiguous:  # strides follow from the shape (others fail validation)
            d = a.data
            add((a.shape, a.dtype, d.device_id))
            put(d.ptr)
        else:
            return None
    if not add_host_metadata_key(sig, (seq_idx, cu_seqlens)):
        return None
    if type(dt_limit) is not tuple or len(dt_limit) != 2:
        return None
    lo, hi = dt_limit
    # Each type before its value: ``ssd_combined`` compares a signature with the last one (==) before hashing it,
    # and a value of another type (an array, whose == is elementwise) must never reach the comparison of values.
    add((type(chunk_size), chunk_size, type(dt_softplus), dt_softplus, type(lo), type(hi), lo, hi, type(final), final,
         type(varlen), varlen, type(chunks), chunks, type(state_dtype), state_dtype, type(family), family))
    return tuple(sig)


def _check_memory(p: _Problem, arrays, ptrs: list) -> None:
    """Before any launch: every device array 16-byte aligned (the kernels' vector accesses), and ``out``
    overlapping no input (``ValueError`` naming the argument). ``ptrs``: the arrays' pointers (0 for None).
    The checks read the pointers and the problem's sizes alone, so the pointers of the last call that passed
    them are kept (``p.checked``) and a call with the same pointers passes without them."""
    key = tuple(ptrs)
    if key == p.checked:
        return
    bad = 0
    for v in ptrs:
        bad |= v
    if bad & 15:
        for name, a in zip(_ARRAYS, arrays):
            if a is not None:
                check_aligned(a, name)
    o = ptrs[9]
    if o and p.out_nbytes:  # every array here passed the C-contiguity check: it spans [ptr, ptr + nbytes)
        oe = o + p.out_nbytes
        for i, n in p.in_spans:
            q = ptrs[i]
            if q < oe and o < q + n:
                check_disjoint_spans((("out", (o, oe)),), ((_ARRAYS[i], (q, q + n)),))
    p.checked = key


# ----------------------------------------------------------------------------------------------------
# Programs: one source, one define set per (family, dtypes, shape, configuration); one kernel in each.
OPTIN_SMEM_H200 = 232448        # bytes a block may opt in to on sm_90 (227 KiB); per SM: 233472
_SMEM = {"sm_80": (166912, 167936), "sm_86": (101376, 102400), "sm_89": (101376, 102400),
         "sm_90a": (232448, 233472), "sm_100a": (232448, 233472)}   # (per block opt-in, per SM) by target


def smem_bytes(itemsize: int, dstate: int, chunk: int, hb: int, nbuf: int, exact: bool, wg: bool = False,
               walk: bool = False) -> int:
    """Dynamic shared memory of a program (mirrors ``SsdLayout`` in ssd_tile.cuh; ``wg``: the sm_90a warpgroup
    layout, swizzled unpadded tiles from a 1024-byte aligned base, plus 1024 bytes to align it; ``walk``: a
    chunk-parallel program of the walk schedule, with a second prep set and the walk's barriers and words)."""
    arrays = 4 * 4 * hb * chunk + 4 * hb * (chunk // 32) + 4 * hb
    if wg:  # in place of the off-diagonal factors: chunk-parallel, the raw dt staged by the producer, twice as large
        # (phase 3's saved cs and dt'); exact, the second prep set (cs, dt', w and the decays) that the producer fills;
        # the mbarriers, 8-byte aligned
        tile_n = SUB * dstate * 2
        tiles = tile_n + nbuf * tile_n + (nbuf + 1) * hb * SUB * UNIT_ROWS * 2 + hb * tile_n  # + the z tiles
        extra = hb * UNIT_ROWS * (dstate + 8) * 4 + 2 * 4 * hb * chunk + 4 * hb if exact else 4 * hb * chunk
        if walk:  # the second prep set's cs, dt', w (the staged dt's part holds two of the three) and decays
            extra += 4 * hb * chunk + 4 * hb
        body = tiles + extra + arrays
        return 1024 + (body + 7) // 8 * 8 + 8 * (PIPE_WORDS + (WALK_PIPE_WORDS if walk else 0))
    pad = 4 if itemsize == 4 else 8
    ldn, ldx, ldf = dstate + pad, UNIT_ROWS + pad, dstate + 8
    c_off = (arrays + 15) // 16 * 16
    tile_n = SUB * ldn * itemsize
    tile_x = SUB * ldx * itemsize
    s_unit = UNIT_ROWS * ldf * 4 if exact else UNIT_ROWS * ldn * itemsize
    return c_off + tile_n + nbuf * tile_n + nbuf * hb * tile_x + hb * s_unit


def choose_config(itemsize: int, dstate: int, chunk: int, units_per_group: int, exact: bool,
                  optin: int = OPTIN_SMEM_H200, per_sm: int = OPTIN_SMEM_H200 + 1024, wg: bool = False):
    """(units per CTA, B/X buffers) of a program. Two units per CTA (C B^T shared) only in the exact scan with
    16-bit inputs and dstate 64, double-buffered, two CTAs per SM: in the chunk-parallel kernel they bought
    4% on the long rows and cost 35% on the short one (half the tiles); elsewhere ptxas spills. Otherwise
    one unit, double-buffered when two CTAs still share an SM, else the first layout that fits at all."""
    def fits(hb, nb, n_per_sm):
        nbytes = smem_bytes(itemsize, dstate, chunk, hb, nb, exact, wg)
        return n_per_sm * (nbytes + 1024) <= per_sm and nbytes <= optin
    if exact and itemsize == 2 and dstate <= 64 and units_per_group % 2 == 0 and fits(2, 2, 2):
        return 2, 2
    for nb in (2, 1):
        if fits(1, nb, 2):
            return 1, nb
    for nb in (2, 1):
        if fits(1, nb, 1):
            return 1, nb
    raise ValueError(f"x: no SSD program fits {optin} bytes of shared memory per block for "
                     f"{itemsize}-byte inputs, dstate {dstate}, chunk {chunk}")


def program_defines(x_code: int, dt_code: int, sd_code: int, headdim: int, dstate: int, chunk: int,
                    units_per_group: int, target: str = "sm_90a", *, family: str, rows: int = 1,
                    smem: tuple | None = None) -> dict:
    """The defines of the ``family`` program ("exact" or "chunkpar") that serves these dtypes (codes 0 bf16, 1 fp16,
    2 fp32) and shape: the shared ones and the family kernel's own, none of the other's (programs that differ only in
    what their kernel does not read would be identical twins in the cache). ``rows``: the chunk-parallel program's
    phase-3 items a tile (``row_parts``; a compile-time choice, so the programs of one item a tile carry no code of
    the split); its phase-1 items a tile follow from it (``col_parts``). ``smem``: the device's (opt-in bytes a
    block, bytes an SM), which bound the target's table (a GPU of a target the table does not name, sm_87 or
    sm_120, has less than the sm_90a figures it falls back to)."""
    itemsize = 4 if x_code == 2 else 2
    optin, per_sm = _SMEM.get(target, _SMEM["sm_90a"])
    if smem is not None:
        optin, per_sm = min(optin, int(smem[0])), min(per_sm, int(smem[1]))
    wg = target == "sm_90a" and itemsize == 2  # wgmma exists on sm_90a only; fp32 inputs use fp32 FMAs
    shared = {"SSD_FAMILY": FAMILIES.index(family), "SSD_T": x_code, "SSD_DT": dt_code, "SSD_SD": sd_code,
              "SSD_P": headdim, "SSD_N": dstate, "SSD_Q": chunk, "SSD_WG": int(wg)}
    if family == "exact":
        hbx, nbx = choose_config(itemsize, dstate, chunk, units_per_group, True, optin, per_sm, wg)
        return {**shared, "SSD_HBX": hbx, "SSD_NBUFX": nbx}
    if rows not in ROW_PARTS or rows > chunk // SUB:
        raise ValueError(f"rows: expected one of {ROW_PARTS} and at most chunk / {SUB}, got {rows!r}")
    hb, nb = choose_config(itemsize, dstate, chunk, units_per_group, False, optin, per_sm, wg)
    return {**shared, "SSD_HB": hb, "SSD_NBUF": nb, "SSD_ROWS": rows, "SSD_COLS": col_parts(dstate, rows)}


# The cases whose chunk-parallel program also runs the walk schedule in the GPU tests and the bench suite (sm_90a).
_WALK_CASES = {(0, 2, 2, 64, 128, 128, 16), (0, 2, 2, 64, 128, 256, 80), (0, 2, 2, 64, 128, 128, 4),
               (1, 2, 2, 64, 128, 128, 4), (0, 2, 2, 128, 64, 64, 4), (0, 2, 2, 64, 128, 256, 4),
               (1, 2, 2, 64, 128, 256, 4), (1, 2, 2, 64, 64, 128, 4), (0, 2, 2, 128, 128, 128, 8),
               (0, 0, 0, 64, 128, 128, 4), (0, 2, 2, 64, 128, 64, 32), (1, 2, 2, 64, 128, 64, 32),
               (0, 2, 2, 64, 64, 128, 4)}


# (x, dt, state dtype codes, headdim, dstate, chunk, units per group) of every call the GPU tests
# (tests/ssd, tests/acceptance), the selftest and the bench suite make: ``programs`` compiles these.
_PROGRAM_CASES = sorted(
    {(xd, 1 if xd == 1 else 2, sd, 64, 64, 128, 1) for xd in (0, 1, 2) for sd in (0, 1, 2)}   # dtype x state
    | {(0, 0, 2, 64, 64, 128, 1)}                                                                # dt in bf16
    | {(0, 2, 2, 64, 128, q, u) for q in (64, 128, 256) for u in (1, 8)}                         # chunks, groups
    | {(0, 2, 2, 128, 256, 256, 4), (2, 2, 2, 128, 64, 64, 4), (1, 2, 2, 64, 256, 128, 2),
       (2, 2, 2, 128, 128, 256, 4), (0, 2, 2, 64, 64, 256, 2), (0, 2, 2, 128, 128, 128, 4),
       (0, 2, 2, 128, 128, 256, 4), (0, 2, 2, 64, 256, 64, 2), (0, 2, 2, 64, 256, 256, 2),
       (2, 2, 2, 64, 256, 128, 2), (2, 2, 2, 64, 128, 128, 8), (2, 2, 2, 64, 128, 64, 4)}         # headdim, dstate
    | {(xd, 2, 2, 64, 64, 64, 4) for xd in (0, 1, 2)}                                            # varlen, selftest
    | {(0, 2, 2, 64, 64, 64, 1), (0, 2, 2, 64, 128, 128, 8), (2, 2, 2, 64, 128, 256, 8),
       (0, 2, 2, 64, 128, 256, 8), (0, 2, 2, 64, 64, 64, 132), (0, 2, 2, 64, 64, 256, 256),
       (1, 2, 2, 64, 128, 256, 8), (0, 2, 2, 128, 64, 128, 8), (0, 2, 2, 64, 128, 128, 32),
       (0, 2, 2, 64, 128, 64, 32), (1, 2, 2, 64, 128, 64, 32), (0, 2, 2, 64, 128, 256, 32)}         # misc GPU tests
    | {(0, 2, 2, 64, 64, 64, 4), (1, 2, 2, 64, 64, 128, 2), (2, 2, 2, 64, 64, 256, 4),
       (0, 2, 2, 64, 128, 64, 2), (2, 2, 2, 64, 64, 64, 2), (0, 2, 2, 64, 64, 64, 2),
       (0, 2, 0, 64, 64, 64, 2), (0, 2, 2, 64, 128, 256, 2)}                                     # acceptance
    | {(0, 2, 2, 64, 64, 128, 4), (0, 2, 2, 128, 128, 64, 2), (0, 2, 2, 64, 128, 128, 32),
       (0, 2, 2, 128, 64, 128, 8)}                                                               # sanitize script
    | {(0, 2, 2, 64, 128, 256, 80), (0, 2, 2, 64, 128, 128, 16)}                                 # bench suite
    | _WALK_CASES)


# Every case a call can make, for ``programs(every=True)``: (x, dt) dtype codes as the op takes them (dt in x's dtype
# or float32), state dtypes, headdims, dstates, chunks; units per group enter a program only through their parity
# (two units a CTA in the exact scan, ``choose_config``), so 1 and 2 stand for every count.
_EVERY_CASE = sorted({(xd, dd, sd, p, n, q, u) for xd, dd in ((0, 0), (0, 2), (1, 1), (1, 2), (2, 2))
                      for sd in (0, 1, 2) for p in (64, 128) for n in (64, 128, 256) for q in (64, 128, 256)
                      for u in (1, 2)})


def programs(target: str = "sm_90a", every: bool = False) -> list:
    """Every (source path relative to cake_rt/kernels, defines) the GPU tests and the bench suite compile for
    ``target`` (to prewarm the kernel cache or sanitize them): each case's exact-scan program and its chunk-parallel
    programs of every phase-3 split its chunk allows (which one a call runs depends on its tiles and grid), once
    each. A case whose shape fits no program on the target (sm_86 / sm_89: 99 KiB of shared memory a block leaves out
    the largest; a call of that shape there raises) has none. ``every``: those of every case a call can make as well
    (every dtype, headdim, dstate and chunk the op takes, and the walk's program wherever a call may walk), the list
    ``cake-rt warmup --shapes`` narrows to a workload's shape."""
    out, seen = [], set()
    for case in (sorted(set(_PROGRAM_CASES) | set(_EVERY_CASE)) if every else _PROGRAM_CASES):
        variants = [("exact", 1)] + [("chunkpar", r) for r in ROW_PARTS if r <= case[5] // SUB]
        for family, rows in variants:
            try:
                d = program_defines(*case, target=target, family=family,
                                    **({"rows": rows} if family == "chunkpar" else {}))
            except ValueError:  # no layout of this shape fits the target's shared memory
                continue
            key = tuple(sorted(d.items()))
            if key not in seen:
                seen.add(key)
                out.append((KERNEL_PATH, d))
            # and its walk's (``walk_ring``: one unit a tile, dstate <= 128; the tested cases alone without ``every``)
            walks = case in _WALK_CASES or (every and d.get("SSD_HB") == 1 and d["SSD_N"] <= 128)
            if family == "chunkpar" and rows == 1 and walks and d["SSD_WG"]:
                w = walk_defines(d)
                if tuple(sorted(w.items())) not in seen:
                    seen.add(tuple(sorted(w.items())))
                    out.append((KERNEL_PATH, w))
    return out


def _defines(c: _Problem, family: str) -> dict:
    from ..launch.arch import device_info, target_for_capability

    upg = (c.nheads // c.ngroups) * (c.headdim // UNIT_ROWS)
    info = device_info(c.device)
    target = target_for_capability(info.capability)
    return program_defines(_CODES[np.dtype(c.x.dtype)], _CODES[np.dtype(c.dt.dtype)], _CODES[np.dtype(c.state_dtype)],
                           c.headdim, c.dstate, c.chunk, upg, target, family=family,
                           smem=(info.smem_per_block_optin, info.smem_per_sm))


def program_smem(itemsize: int, defs: dict) -> int:
    """Dynamic shared memory of a program's kernel (``itemsize``: bytes of an x element)."""
    wg = bool(defs["SSD_WG"])
    if defs["SSD_FAMILY"] == 0:
        return smem_bytes(itemsize, defs["SSD_N"], defs["SSD_Q"], defs["SSD_HBX"], defs["SSD_NBUFX"], True, wg)
    return smem_bytes(itemsize, defs["SSD_N"], defs["SSD_Q"], defs["SSD_HB"], defs["SSD_NBUF"], False, wg,
                      bool(defs.get("SSD_WALK")))


def cap_slice_units(c: _Problem, hb: int, cap: int) -> int:
    """The most units (head x 64 headdim rows) a chunk-parallel slice can hold under the workspace cap, a
    multiple of ``hb``; 0 when not even one block of units fits. A call cut into slices holds two prep parts
    (``workspace_bytes``)."""
    units = c.nheads * (c.headdim // UNIT_ROWS)
    if workspace_bytes(c) <= cap:
        return units
    per_unit = c.total_chunks * (UNIT_ROWS * c.dstate * (4 + np.dtype(c.x.dtype).itemsize) + 2 * 2 * c.chunk * 4)
    n = min(units, max(0, (cap - _align(c.total_chunks * c.nheads * 4)) // per_unit)) // hb * hb
    while n > 0 and workspace_bytes(c, n) > cap:  # the parts' 256-B alignment
        n -= hb
    return n


def slice_units(c: _Problem, hb: int, cap: int, slots: int) -> int:
    """Units per chunk-parallel slice: of the sizes the cap allows (``cap_slice_units``, multiples of ``hb``) that need
    no more slices than the largest, the one whose slices take the fewest rounds of the grid (``slots`` resident
    CTAs): first phase-1 / phase-3 tile rounds, then phase-2 item rounds (an item walks all its segment's chunks,
    so a partly filled round costs a whole walk); the largest size on ties. So a call the cap does not cut stays
    one slice, and a cut call never gets more slices, tile rounds or phase-2 rounds than the largest size gives.
    0 when not even one block of units fits."""
    most = cap_slice_units(c, hb, cap)
    units = c.nheads * (c.headdim // UNIT_ROWS)
    if most == 0 or most >= units:
        return most
    nslices = -(-units // most)

    def rounds(n: int) -> tuple:
        grid = chunkpar_grid(c, n, hb, slots)
        work = [chunkpar_work(c, k, hb) for k in [n] * (units // n) + ([units % n] if units % n else [])]
        return sum(-(-tiles // grid) for tiles, _ in work), sum(-(-items // grid) for _, items in work)

    best, best_rounds = most, rounds(most)
    for n in range(most - hb, 0, -hb):
        if -(-units // n) > nslices:
            break
        r = rounds(n)
        if r < best_rounds:
            best, best_rounds = n, r
    return best


def chunkpar_work(c: _Problem, units: int, hb: int) -> tuple:
    """(phase-1 / phase-3 tiles, phase-2 items) of a chunk-parallel slice of ``units`` units."""
    return c.total_chunks * units // hb, c.nseg * units * (UNIT_ROWS * c.dstate // (THREADS * SCAN_VEC))


def chunkpar_grid(c: _Problem, units: int, hb: int, slots: int) -> int:
    """The chunk-parallel grid for slices of ``units`` units: as many CTAs as a phase has work, at most ``slots``
    (the co-resident CTAs)."""
    return max(1, min(max(chunkpar_work(c, units, hb)), slots))


def row_parts(c: _Problem, units: int, hb: int, grid: int) -> int:
    """Phase-3 items per chunk-parallel tile for slices of ``units`` units on ``grid`` CTAs (the program's
    SSD_ROWS): the most of ``ROW_PARTS`` (at most the chunk's 64-token row blocks) whose items all fit the grid at
    once, so a call of few tiles spreads each tile's chain of row blocks over idle CTAs (the kernel's
    ``ssd_next_row``) and a call with a round of tiles or more keeps one item a tile."""
    tiles = chunkpar_work(c, units, hb)[0]
    nsub = c.chunk // SUB
    return max(r for r in ROW_PARTS if r <= nsub and (r == 1 or tiles * r <= grid))


def col_parts(dstate: int, rows: int) -> int:
    """Phase-1 items per chunk-parallel tile (the program's SSD_COLS) of a program with ``rows`` phase-3 items a
    tile: the most of ``COL_PARTS`` up to ``rows`` that leave each item whole 64-column panels of the state (the
    tensor-map boxes). A tile's phase 1 is its chunk prep and then its state product, a chain of the chunk's
    sub-blocks; split by state columns, each item repeats the prep and walks the sub-blocks with 1 / COLS of the
    columns, on CTAs that idle otherwise. A program splits phase 3 only when its tiles times ``rows`` fit the grid
    at once (``row_parts``), so its phase-1 items fit too; one item a tile keeps one phase-1 item (main's program)."""
    return max(k for k in COL_PARTS if k <= rows and dstate // k >= 64)


def workspace_bytes(c: _Problem, units: int | None = None) -> int:
    """Chunk-parallel workspace for slices of ``units`` units (default: all of them, one slice): fp32 local states,
    round_T(S_prev), per-chunk decays and the prep's cs and dt' per chunk and unit (256-B aligned); two prep parts
    when the units are cut into slices (phase 1 of a slice writes one while phase 3 of the previous reads the other)."""
    everything = c.nheads * (c.headdim // UNIT_ROWS)
    if units is None:
        units = everything
    n = c.total_chunks * units * UNIT_ROWS * c.dstate
    it = np.dtype(c.x.dtype).itemsize
    parts = 2 if units < everything else 1
    return (_align(n * 4) + _align(n * it) + _align(c.total_chunks * c.nheads * 4)
            + _align(parts * c.total_chunks * units * 2 * c.chunk * 4))


def _align(n, a=256):
    return (int(n) + a - 1) // a * a


def _workspace_cap() -> int:
    return env.byte_count(ENV_CAP, DEFAULT_WORKSPACE_CAP)


def _env_mode() -> str:
    return env.choice(ENV_MODE, ("auto", "always", "never"), "auto")


def _kernel(c: _Problem, defs: dict):
    """The kernel of the loaded program (``get_kernel`` memoizes it per device, source, kernel and defines)."""
    from ..launch.compile import get_kernel

    return get_kernel(KERNEL_PATH, KERNELS[defs["SSD_FAMILY"]], defines=defs, device=c.device)


def cta_threads(defs: dict) -> int:
    """Threads of a program's CTAs: the sm_90a programs add a producer warpgroup to the math warpgroup."""
    return WG_THREADS if defs["SSD_WG"] else THREADS


def walk_defines(defs: dict) -> dict:
    """The walk schedule's program of a chunk-parallel program of one item a tile (``programs`` lists it, a plan
    that walks loads it)."""
    return {**defs, "SSD_WALK": 1}


_plan_memo: dict = {}


def _plan(c: _Problem, family: str) -> SsdPlan:
    """The plan of a call, memoized on everything it depends on (shapes, dtypes, segment counts, the
    switches in force, read on every call); the returned object is shared: treat it as read-only."""
    envs = (env.text(ENV_MODE), env.text(ENV_CAP), _SCHEDULE, _WALK_RING)
    planned = c.planned
    if planned is not None and planned[0] == envs:  # the problem's family is part of its signature
        return planned[1]
    key = (c.device, family, c.x.dtype, c.dt.dtype, c.state_dtype, c.nheads, c.headdim, c.ngroups, c.dstate,
           c.chunk, c.nseg, c.total_chunks, c.max_chunks, envs)
    hit = _plan_memo.get(key)
    if hit is None:
        hit = _plan_uncached(c, family)
        if len(_plan_memo) >= 256:
            _plan_memo.clear()
        _plan_memo[key] = hit
    c.planned = (envs, hit)
    return hit


def _plan_uncached(c: _Problem, family: str) -> SsdPlan:
    from ..launch.arch import device_info
    from ..launch.grid import CooperativeLaunchError

    info = device_info(c.device)
    mode = _env_mode()
    cap = _workspace_cap()
    defs_x = _defines(c, "exact")
    defs = _defines(c, "chunkpar")
    hb, hbx = defs["SSD_HB"], defs_x["SSD_HBX"]
    units = c.nheads * (c.headdim // UNIT_ROWS)
    fits = cap_slice_units(c, hb, cap) > 0
    model, model_note = cost_model_for(info.name, info.capability)
    coop_error, capacity = None, None
    need_coop = family == "chunkpar" or (family == "auto" and mode != "never" and fits)
    if need_coop:
        try:
            k = _kernel(c, defs)
            capacity = cooperative_capacity(k, cta_threads(defs), program_smem(np.dtype(c.x.dtype).itemsize, defs))
        except CooperativeLaunchError as exc:
            coop_error = str(exc)
    slots = capacity or 2 * info.sm_count
    su = slice_units(c, hb, cap, slots)
    slices = -(-units // su) if su else 0
    ws = workspace_bytes(c, su) if su else workspace_bytes(c, hb)  # over the cap when no slice fits
    grid = chunkpar_grid(c, su, hb, slots) if su else None
    rows = row_parts(c, su, hb, grid) if su else 1
    inputs = dict(nseg=c.nseg, nheads=c.nheads, headdim=c.headdim, dstate=c.dstate, chunk=c.chunk,
                  max_chunks=c.max_chunks, total_chunks=c.total_chunks, sm_count=info.sm_count,
                  ws_bytes=workspace_bytes(c), coop_slots=capacity, hb=hb, hbx=hbx, slices=max(slices, 1),
                  rows=rows, cols=col_parts(c.dstate, rows))
    pred = predict_us(model, **inputs)
    ring = walk_ring(c, cap, slots, defs) if capacity and _SCHEDULE != "phases" else 0
    if ring:
        walk_us = predict_walk_us(model, nseg=c.nseg, nheads=c.nheads, headdim=c.headdim, dstate=c.dstate,
                                  chunk=c.chunk, max_chunks=c.max_chunks, total_chunks=c.total_chunks, slots=slots)
        if _SCHEDULE == "walk" or walk_us < pred["chunkpar"]:
            pred = {**pred, "chunkpar": walk_us, "chunkpar_phases": pred["chunkpar"]}
            ws, su, grid, rows = walk_layout(c, ring)[2], units, slots, 1
            inputs = {**inputs, "rows": 1, "cols": 1}  # (the walk's program: one item a tile in both phases)
        else:
            ring = 0
    fam, reason = select_family(family=family, mode=mode, ws_bytes=ws, cap=cap, coop_error=coop_error, predicted=pred)
    if model_note:
        reason = f"{reason}; {model_note}"
    items = c.nseg * units // hbx
    plan = SsdPlan(family=fam, reason=reason, workspace_bytes=ws if fam == "chunkpar" else 0, workspace_cap=cap,
                   predicted_us=pred, mode=mode, segments=c.nseg, nheads=c.nheads, work_items=items,
                   total_chunks=c.total_chunks, max_chunks=c.max_chunks, sm_count=info.sm_count,
                   cooperative_capacity=capacity)
    plan.defines = defs if fam == "chunkpar" else defs_x
    plan.slice_units, plan.model_inputs = su, inputs
    if fam == "chunkpar":
        plan.grid = grid
        # (capacity is one item a tile's; a split program has the same launch bounds and shared memory, and
        # PackedLaunch checks the grid against the kernel it launches)
        plan.defines = {**defs, "SSD_ROWS": rows, "SSD_COLS": inputs["cols"]}
        if ring:
            plan.defines = walk_defines(plan.defines)
            plan.walk_ring = ring
            plan.reason += f"; the walk schedule (a ring of {ring} chunks)"
    return plan


_tables = GuardedLRU(64)
_tls = threading.local()
_stream_states = stream_states()


def _device_table(c: _Problem, handle: int, stream_obj, capturing: bool) -> UploadedTable:
    """The segment table on the device, cached by content (no upload on repeated layouts)."""
    key = c.table_key
    hit = _tables.get(key)
    if hit is not None:
        return hit
    if capturing:
        raise CaptureError(
            "ssd_combined: a new sequence layout cannot be uploaded during CUDA graph capture; make one eager "
            "call with the same shapes and cu_seqlens / seq_idx on this stream before capturing")
    collect()
    return _tables.put(key, UploadedTable(c.table, handle, stream_obj))


def last_plan():
    """The plan of this thread's last ``ssd_combined`` call (None before the first)."""
    return getattr(_tls, "plan", None)


def ssd_plan(x, dt, A, B, C, chunk_size, *, D=None, z=None, dt_bias=None, initial_states=None, seq_idx=None,
             cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, math.inf), return_final_states=False,
             return_varlen_states=False, return_chunk_states=False, state_dtype=None, family="auto", out=None,
             stream=None) -> SsdPlan:
    """The plan ``ssd_combined`` would follow for these arguments (same arguments; nothing is launched):
    the chosen family, the reason, the workspace bytes, the predicted time of each family.

    Device metadata (``cu_seqlens``, ``seq_idx``) is copied to the host on ``stream`` (default: the current stream),
    as the call does; ``ValueError`` naming it when that stream is capturing a CUDA graph."""
    with _intake(x, stream, (("seq_idx", seq_idx), ("cu_seqlens", cu_seqlens)),
                 (x, dt, A, B, C, D, z, dt_bias, initial_states, out)):
        c = _validate(x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states, seq_idx, cu_seqlens, dt_softplus,
                      dt_limit, return_final_states, return_varlen_states, return_chunk_states, state_dtype, family,
                      out)
    with current_device(c.device):
        return _plan(c, family)


def _intake(x, stream, named, arrays):
    """``interop.call_intake`` for an SSD call: the device from ``x``, ``out`` (the last of ``_ARRAYS``) an output."""
    return call_intake(x, lambda: _dev(x, "x").device.id, stream, arrays, _ARRAYS.index("out"), named,
                       "pass host (NumPy) metadata, or make one eager call with the same host metadata before "
                       "capturing")


def ssd_combined(x, dt, A, B, C, chunk_size, *, D=None, z=None, dt_bias=None, initial_states=None, seq_idx=None,
                 cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, math.inf), return_final_states=False,
                 return_varlen_states=False, return_chunk_states=False, state_dtype=None, family="auto", out=None,
                 stream=None):
    """Mamba2 SSD combined prefill:  h_t = exp(dt'_t A) h_{t-1} + dt'_t x_t B_t^T,  y_t = h_t C_t + D x_t
    (times z_t sigmoid(z_t) when z is given), dt' = clamp(softplus?(dt + dt_bias), dt_limit).

    x: [batch, seqlen, nheads, headdim] bf16/fp16/fp32 (headdim 64 or 128); dt: [batch, seqlen, nheads]
    float32 or x's dtype; A: [nheads] float32; B, C: [batch, seqlen, ngroups, dstate] x's dtype (dstate 64,
    128 or 256); chunk_size: 64, 128 or 256; D: [nheads] or [nheads, headdim] float32; z: like x;
    dt_bias: [nheads] float32; initial_states: [batch (or nseq with cu_seqlens), nheads, headdim, dstate]
    of state_dtype; seq_idx: int32 [batch, seqlen]; cu_seqlens: int32 [nseq + 1] (batch == 1);
    state_dtype: float32 (default), bfloat16 or float16 for every state returned or taken;
    family: "auto" | "exact" | "chunkpar"; out: optional y; stream: optional (None: CuPy's current stream; with
    PyTorch tensors, PyTorch's current stream then waits for the call).

    Returns y, or (y, final_states?, varlen_states?, chunk_states?) for those asked for:
    final_states [batch (1 with cu_seqlens), nheads, headdim, dstate], varlen_states [nseq, ...],
    chunk_states [total complete chunks, ...] (segment-major).
    """
    global _last_call
    arrays = (x, dt, A, B, C, D, z, dt_bias, initial_states, out)
    ptrs = []
    sig = _signature(arrays, ptrs, chunk_size, seq_idx, cu_seqlens, dt_softplus, dt_limit, return_final_states,
                     return_varlen_states, return_chunk_states, state_dtype, family)
    p = follow = None
    if sig is not None:
        last = _last_call
        if last[0] == sig:  # a repeated call (every layer of a model has the same signature): no hash
            p = last[1]
        else:
            try:
                p = _problems.get(sig)
            except TypeError:  # an unhashable scalar argument: validated every call
                sig = None
            else:
                if p is not None:
                    _last_call = (sig, p)
    if p is None:
        with _intake(x, stream, (("seq_idx", seq_idx), ("cu_seqlens", cu_seqlens)), arrays):
            if out is not None:  # inside: a refused out leaves the caller's current device and stream as they were
                out = as_device_array(out, "out", output=True)  # writable (a JAX array or read-only export is refused)
            p = _validate(x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states, seq_idx, cu_seqlens, dt_softplus,
                          dt_limit, return_final_states, return_varlen_states, return_chunk_states, state_dtype,
                          family, out)
        # PyTorch's stream to order after the call (stream=None with PyTorch tensors; a memoized call takes CuPy arrays
        # alone): read from the caller's own objects, before they are replaced by the problem's arrays.
        follow = torch_stream_to_order(arrays, p.device, stream)
        arrays = _arrays_of(p)
        ptrs = [0 if a is None else a.data.ptr for a in arrays]
        # The problem keeps the arrays' shapes and dtypes, never the caller's arrays (the memo must not keep
        # device memory alive).
        (p.x, p.dt, p.A, p.B, p.C, p.D, p.z, p.dt_bias, p.init, p.out) = (
            None if a is None else _Spec(a.shape, a.dtype) for a in arrays)
        if sig is not None:
            if len(_problems) >= _MEMO_SIZE:
                _problems.clear()
            _problems[sig] = p
            _last_call = (sig, p)
    _check_memory(p, arrays, ptrs)
    if follow is None:
        if _runtime.getDevice() == p.device:  # current_device without a context manager when it is current
            return _launch(p, family, stream, arrays[9], ptrs)
        with current_device(p.device):
            return _launch(p, family, stream, arrays[9], ptrs)
    with current_device(p.device):
        res = _launch(p, family, stream, arrays[9], ptrs)
        # After the launches (a call that raised queued no kernel to wait for): PyTorch's next op on its stream runs
        # after this call's kernel on CuPy's current stream (the call's: stream is None here).
        order_after(follow, _cupy.cuda.get_current_stream(p.device).ptr, p.device)
    return res


_last_call = (None, None)  # (signature, problem) of the last memoized call


def _launch(p: _Problem, family: str, stream, y, ptrs: list):
    """Plan the call, allocate the outputs the caller did not give and launch the plan's kernel on ``stream``
    (``ptrs``: the pointers of the call's arrays in ``_ARRAYS`` order), with ``p.device`` current. Returns what
    ``ssd_combined`` returns."""
    s, handle = resolve_handle(stream, p.device)
    capturing = is_capturing(handle)
    plan = _tls.plan = _plan(p, family)
    ex = p.executable
    if ex is None or ex[0] is not plan:
        ex = p.executable = _executable(p, plan)
    pk, coop, maps = ex[1], ex[2], ex[6]
    # The tensor maps of this call's x, B, C, z (an encoding the driver refuses raises here, before any allocation
    # or stream work); the pair is held through the launch (the driver copies the parameters then).
    blobs = () if maps is None else maps.get((ptrs[0], ptrs[3], ptrs[4], ptrs[6]))
    table = p.held_table
    if table is None or table.retired:
        table = _tables.get(p.table_key)
        if table is None:
            table = _device_table(p, handle, s, capturing)
        p.held_table = table
    else:
        _tables.touch(p.table_key)  # as recently used as with a lookup (the key's bytes keep their hash)
    if coop:
        # The stream's state and the pointers of its workspace and ticket words as the last call of this executable
        # on this stream took them, while the state lives, is not retired nor grown out of that workspace, and no
        # collected stream awaits its state's release (a new stream may reuse its handle).
        held = p.held_stream
        state = held[1]() if held is not None and held[0] == handle and held[4] is ex and not _dead_streams else None
        if state is None or state.retired or state.workspace_version != held[2]:
            state, held = _stream_parts(p, ex, handle, s, capturing)
        else:
            _stream_states.touch(state.key)  # the state stays as recently used as with a lookup
        used = (table, state)
    else:
        used = (table,)
    begin_call(used)
    try:
        while coop and state.workspace_version != held[2]:
            # Another thread's call on this stream grew the workspace after the check above and before this call's
            # begin: take the new one's pointers (a growth after the begin keeps the old buffer for this call). A
            # state made here was looked up before its begin: its version is checked again after that begin.
            state2, held = _stream_parts(p, ex, handle, s, capturing)
            if state2 is not state:
                begin_call((state2,))
                used = (*used, state2)
                state = state2
        states = ()
        if y is None or p.want_states:
            # Allocated from the call's stream's pool (stream-ordered reuse); entering the stream costs 1 us
            # on the H200 host, skipped when it is the current one already (a call with stream=None). The
            # current stream of p.device (current here): asked by device, CuPy makes no device query.
            if _cupy.cuda.get_current_stream(p.device).ptr == handle:
                y, states, tail = _allocate(p, y)
            else:
                with s:
                    y, states, tail = _allocate(p, y)
            ptrs[9] = y.data.ptr
            ptrs += tail
        else:
            ptrs += (0, 0, 0)
        ptrs.append(table.ptr)
        if handle not in table.ordered:
            table.order_after_upload(handle, capturing)
        if not coop:
            pk.run(handle, ptrs, blobs and blobs[1])
        else:
            words = state.tickets[4]
            if words.dirty:
                words.before_launch(handle)
            ptrs += held[3]
            try:
                pk.run(handle, ptrs, blobs and blobs[1])
            except BaseException:
                words.mark_dirty()  # the next call re-zeroes the words on its own stream
                raise
    finally:
        end_call(used, p.device, handle, capturing)
    if not p.want_states:  # y alone when no state was asked for (whether or not y was allocated here)
        return y
    return (y, *states)


def _stream_parts(p: _Problem, ex: tuple, handle: int, s, capturing: bool) -> tuple:
    """(the stream's state, (handle, a weak reference to the state, its workspace version, the pointers of the
    workspace parts and of the ticket words, ``ex``)) for a chunk-parallel call of executable ``ex`` on stream
    ``handle``: the state made or looked up, its workspace grown to the plan's bytes, its ticket words made. The
    second part is held by the problem (not for the per-thread default stream, another stream in every thread); the
    reference is weak so that a released state's memory is freed after its work, as without the problem."""
    plan = ex[0]
    state = stream_state(p.device, handle, capturing, s)
    # The version read before the workspace: a growth by another thread between the two reads (or by this call) leaves
    # the held version older than the pointers, so the check after the call's begin takes them again; read after, it
    # could name pointers into a buffer grown out of and released before that begin.
    version = state.workspace_version
    ws = state.workspaces.get("ssd_chunkpar")
    if ws is None or ws.nbytes < plan.workspace_bytes:
        ws = state_workspace(state, "ssd_chunkpar", plan.workspace_bytes, cap=plan.workspace_cap, handle=handle,
                             stream_obj=s, capturing=capturing)
    words = state.tickets.get(4)
    if words is None:
        words = state_ticket_words(state, handle, p.device, 4, s, capturing)
    o1, o2, o3 = ex[3:6]
    base = ws.data.ptr  # local states [0, o1), round_T(S_prev) [o1, o2), decays [o2, o3), prep parts [o3, workspace_bytes)
    held = (handle, weakref.ref(state), version, (base, base + o1, base + o2, base + o3, words.ptr), ex)
    if handle != PER_THREAD:
        p.held_stream = held
    return state, held


def _allocate(p: _Problem, y):
    """(y, the states asked for (final, varlen, chunk order), the three state pointers (0 for one not asked
    for)) on the current stream; y allocated when None. The arrays are made by the ``ndarray`` constructor that
    ``cupy.empty`` calls (from the current allocator, on the current stream), without its Python frame."""
    if y is None:
        y = _ndarray(p.x.shape, p.x.dtype)
    states, tail = [], [0, 0, 0]
    for i, shape in p.state_alloc:
        a = _ndarray(shape, p.state_dtype)
        states.append(a)
        tail[i] = a.data.ptr
    return y, states, tail


def _executable(p: _Problem, plan: SsdPlan) -> tuple:
    """(plan, PackedLaunch, cooperative, o1, o2, o3, maps) of the plan's program for this problem. cooperative:
    the chunk-parallel kernel, whose launch also takes the workspace parts and the ticket words; o1 .. o3: its
    workspace offsets of round_T(S_prev), the decays and the saved prep (0 for the exact scan; o1 is 0 for an empty
    problem too, so it never tells the families apart); maps: the ``TileMaps`` of x, B, C, z (the sm_90a programs,
    SSD_WG, whose producer copies whole sub-blocks by tensor map) or None."""
    defs = plan.defines
    smem = program_smem(np.dtype(p.x.dtype).itemsize, defs)
    maps = _tile_maps(p) if defs["SSD_WG"] else None
    if plan.family == "exact":
        pk = _packed(p, _kernel(p, defs), plan.work_items, smem, cta_threads(defs), False, maps)
        return (plan, pk, False, 0, 0, 0, maps)
    k = _kernel(p, defs)
    if plan.walk_ring:  # the walk: words, the S_prev ring, the prep ring; the kernel's last argument is the ring
        o1, o2, _ = walk_layout(p, plan.walk_ring)
        o3 = o2
        last = plan.walk_ring
    else:
        n = p.total_chunks * plan.slice_units * UNIT_ROWS * p.dstate
        o1 = _align(n * 4)
        o2 = o1 + _align(n * np.dtype(p.x.dtype).itemsize)
        o3 = o2 + _align(p.total_chunks * p.nheads * 4)
        last = plan.slice_units
    # plan.grid is capped at this kernel's real occupancy (the plan measured it; PackedLaunch checks again).
    pk = _packed(p, k, plan.grid, smem, cta_threads(defs), True, maps, np.int32(last))
    return plan, pk, True, o1, o2, o3, maps


def _tile_maps(p: _Problem) -> TileMaps:
    """The tensor maps of x, B, C, z for the sm_90a producer: [tokens][columns] views of each (every batch row's
    tokens in a row, as the kernels index them), 64 x 64 boxes. Memoized per pointer tuple, so the maps of a problem
    called with the same arrays are encoded once."""
    batch, seqlen, nheads, headdim = p.x.shape
    ngroups, dstate = p.B.shape[2], p.B.shape[3]
    it = np.dtype(p.x.dtype).itemsize
    xz = Tile2D(nheads * headdim, batch * seqlen, nheads * headdim * it)
    bc = Tile2D(ngroups * dstate, batch * seqlen, ngroups * dstate * it)
    return TileMaps((xz, bc, bc, xz))


def _packed(p: _Problem, kernel, grid: int, smem: int, threads: int, cooperative: bool, maps, *extra) -> PackedLaunch:
    """The ``PackedLaunch`` of a program for this problem: slots for the 10 arrays, the 3 returned states,
    the segment table (and, chunk-parallel: 4 workspace parts and the ticket words); scalars packed once; the tensor
    maps of x, B, C, z last (``maps``: the sm_90a programs)."""
    ptr_slots = tuple(Slot(n) for n in _ARRAYS + ("final", "varlen", "chunk", "table"))
    args = ptr_slots + p.scalars
    if cooperative:
        args += (Slot("ws_states"), Slot("ws_prev"), Slot("ws_decays"), Slot("ws_prep"), Slot("tickets")) + extra
    if maps is not None:
        args += (Blob("tm_x"), Blob("tm_B"), Blob("tm_C"), Blob("tm_z"))
    return PackedLaunch(kernel, grid, threads, args, shared_mem=smem, cooperative=cooperative,
                        tag="ssd_chunkpar" if cooperative else "ssd_exact")


def ssd_flops_bytes(*, batch, seqlen, nheads, headdim, dstate, ngroups=1, chunk_size=256, dtype_bytes=2,
                    dt_bytes=4, state_bytes=4, has_z=True, has_D=True, has_init=False, return_final=True,
                    nseq=None):
    """Minimal FLOPs and bytes of one call (floor columns of the benchmark).

    FLOPs per chunk of Q tokens: C B^T causal half once per group (Q^2 N), the masked product with X
    causal half (Q^2 P per head), C S_prev and the chunk state (2 Q P N each per head), multiply-adds as 2.
    Bytes: read x, B, C, dt (and z, initial states), write y (and the final states).
    """
    Q = int(chunk_size)
    nchunks_tokens = batch * seqlen / Q  # chunk-equivalents of tokens (partial chunks counted pro rata)
    flops = nchunks_tokens * (ngroups * Q * Q * dstate + nheads * (Q * Q * headdim + 4 * Q * headdim * dstate))
    tok = batch * seqlen
    nb = tok * nheads * headdim * dtype_bytes * (2 + (1 if has_z else 0))
    nb += 2 * tok * ngroups * dstate * dtype_bytes + tok * nheads * dt_bytes
    nstate = (nseq if nseq is not None else batch) * nheads * headdim * dstate * state_bytes
    nb += nstate * ((1 if has_init else 0) + (1 if return_final else 0))
    return int(flops), int(nb)


# ----------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------
def selftest():
    """``cake-rt selftest`` hook: a small bf16 varlen call through both families -> (ok, detail).

    Checks the families are bitwise equal and within the bf16 bar of the float64 reference."""
    import cupy

    from ..reference.ssd import ssd_reference_chunked

    rng = np.random.default_rng(7)
    lens = [0, 37, 64, 130]
    L, H, P, N = sum(lens), 4, 64, 64
    host = {
        "x": rng.standard_normal((1, L, H, P)).astype(np.float32).astype(BF16),
        "B": rng.standard_normal((1, L, 1, N)).astype(np.float32).astype(BF16),
        "C": rng.standard_normal((1, L, 1, N)).astype(np.float32).astype(BF16),
        "dt": (rng.standard_normal((1, L, H)) * 0.5).astype(np.float32),
        "A": (-rng.uniform(1.0, 16.0, H)).astype(np.float32),
        "dt_bias": np.full(H, -3.0, np.float32),
    }
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)

    def dev(a):
        return cupy.asarray(a.view(np.uint16)).view(a.dtype) if a.dtype == BF16 else cupy.asarray(a)

    d = {k: dev(v) for k, v in host.items()}
    outs = {}
    for fam in ("exact", "chunkpar"):
        outs[fam] = ssd_combined(d["x"], d["dt"], d["A"], d["B"], d["C"], 64, dt_bias=d["dt_bias"], dt_softplus=True,
                                 cu_seqlens=cu, return_varlen_states=True, family=fam)
    cupy.cuda.Device().synchronize()
    same = all(a.view(cupy.uint8).get().tobytes() == b.view(cupy.uint8).get().tobytes()
               for a, b in zip(outs["exact"], outs["chunkpar"]))
    ref = ssd_reference_chunked(*(host[k].astype(np.float64) for k in ("x", "dt", "A", "B", "C")), 64,
                                dt_bias=host["dt_bias"].astype(np.float64), dt_softplus=True, cu_seqlens=cu,
                                return_varlen_states=True)
    y = outs["exact"][0].view(cupy.uint16).get().view(BF16).astype(np.float64)
    err = float(np.linalg.norm(y - ref[0]) / np.linalg.norm(ref[0]))
    ok = same and err < 1e-2
    return ok, f"exact vs chunkpar bitwise {'equal' if same else 'DIFFERENT'}; y rel L2 vs float64 {err:.2e}"


