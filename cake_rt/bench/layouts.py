"""Row geometry for the bench suites: DSA segment layouts and the FLOP / byte counts behind the floors.

Pure NumPy: importable and testable without a GPU.

DSA layouts (``layout`` field of a row in ``suites/dsa.json``):

    tail    one segment, T queries bottom-right aligned in Tkv keys: query i sees keys 0 .. Tkv - T + i.
    zigzag  context-parallel zigzag with W = cp ranks: a document of length L is cut into 2W chunks of
            c = L / 2W tokens; rank r holds chunks r and 2W - 1 - r; chunk j becomes a segment with c
            queries, keys 0 .. (j + 1) c of its document (its own copy in ``k``) and causal offset j c.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DsaLayout:
    """Segment metadata of one DSA row (int32 host arrays, the op's argument convention)."""

    cu_seqlens_q: np.ndarray  # [S+1]
    cu_seqlens_k: np.ndarray  # [S+1]
    q_causal_offsets: np.ndarray  # [S]

    @property
    def T(self) -> int:
        return int(self.cu_seqlens_q[-1])

    @property
    def Tkv(self) -> int:
        return int(self.cu_seqlens_k[-1])

    @property
    def segments(self) -> int:
        return int(self.cu_seqlens_q.size - 1)

    @property
    def visible_pairs(self) -> int:
        return visible_pairs(self.cu_seqlens_q, self.cu_seqlens_k, self.q_causal_offsets)


def visible_pairs(cu_seqlens_q, cu_seqlens_k, q_causal_offsets) -> int:
    """Number of (query, key) pairs a causal call scores: query i of segment s sees keys
    0 .. min(offset_s + i, len_k - 1); none when offset_s + i < 0."""
    cq = np.asarray(cu_seqlens_q, dtype=np.int64)
    ck = np.asarray(cu_seqlens_k, dtype=np.int64)
    off = np.asarray(q_causal_offsets, dtype=np.int64)
    total = 0
    for s in range(cq.size - 1):
        lq, lk = int(cq[s + 1] - cq[s]), int(ck[s + 1] - ck[s])
        if lq == 0 or lk == 0:
            continue
        pos = off[s] + np.arange(lq, dtype=np.int64)
        total += int(np.clip(pos + 1, 0, lk).sum())
    return total


def tail_layout(T: int, Tkv: int) -> DsaLayout:
    """One segment of ``T`` queries bottom-right aligned in ``Tkv`` keys (offset Tkv - T)."""
    if T < 1 or Tkv < 1:
        raise ValueError(f"tail layout: expected T >= 1 and Tkv >= 1, got T={T}, Tkv={Tkv}")
    return DsaLayout(
        np.array([0, T], dtype=np.int32), np.array([0, Tkv], dtype=np.int32), np.array([Tkv - T], dtype=np.int32)
    )


def zigzag_layout(documents, cp: int, rank: int) -> DsaLayout:
    """CP zigzag rank ``rank`` of ``cp`` ranks over ``documents`` (lengths, each divisible by 2*cp):
    two segments per document, chunk ``rank`` first, then chunk ``2*cp - 1 - rank``.
    Through the library's ``cake_rt.cp_zigzag_layout`` when it is there, else ``zigzag_layout_own``."""
    try:
        from cake_rt.cp import cp_zigzag_layout
    except ImportError:
        return zigzag_layout_own(documents, cp, rank)
    lay = cp_zigzag_layout(np.asarray(documents, dtype=np.int64), int(cp), int(rank))
    return DsaLayout(np.asarray(lay.cu_seqlens_q, np.int32), np.asarray(lay.cu_seqlens_k, np.int32),
                     np.asarray(lay.q_causal_offsets, np.int32))


def zigzag_layout_own(documents, cp: int, rank: int) -> DsaLayout:
    """The bench's own zigzag layout from the definition in the spec (kept to cross-check the library's)."""
    if cp < 1 or not 0 <= rank < cp:
        raise ValueError(f"zigzag layout: expected cp >= 1 and 0 <= rank < cp, got cp={cp}, rank={rank}")
    cu_q, cu_k, offs = [0], [0], []
    for L in documents:
        L = int(L)
        if L < 2 * cp or L % (2 * cp):
            raise ValueError(f"zigzag layout: document length {L} is not a positive multiple of 2*cp = {2 * cp}")
        c = L // (2 * cp)
        for j in (rank, 2 * cp - 1 - rank):
            cu_q.append(cu_q[-1] + c)
            cu_k.append(cu_k[-1] + (j + 1) * c)
            offs.append(j * c)
    return DsaLayout(np.array(cu_q, np.int32), np.array(cu_k, np.int32), np.array(offs, np.int32))


def dsa_layout(row: dict) -> DsaLayout:
    """The layout of a row of ``suites/dsa.json``."""
    kind = row.get("layout")
    if kind == "tail":
        return tail_layout(int(row["T"]), int(row["Tkv"]))
    if kind == "zigzag":
        return zigzag_layout(row["documents"], int(row["cp"]), int(row["rank"]))
    raise ValueError(f"DSA row {row.get('name')!r}: unknown layout {kind!r} (expected 'tail' or 'zigzag')")


def dsa_counts(layout: DsaLayout, heads: int, head_dim: int, topk: int):
    """(flops, bytes) of one causal DSA indexer call.

    flops: 2 * H * D per visible (query, key) pair -- the head dot products, the part a tensor core runs
    (the weighted head sum and the selection are not counted).
    bytes: q, k and weights read once, indices and scores written once."""
    T, Tkv = layout.T, layout.Tkv
    flops = 2 * heads * head_dim * layout.visible_pairs
    nbytes = T * heads * head_dim * 2 + Tkv * head_dim * 2 + T * heads * 4 + T * topk * 8
    return int(flops), int(nbytes)


_ELEM = {"bfloat16": 2, "float16": 2, "float32": 4}


def ssd_segments(row: dict):
    """Token counts of every segment of an SSD row (batch rows, or the cu_seqlens lengths)."""
    lengths = row.get("cu_seqlens_lengths")
    if lengths:
        if int(row["batch"]) != 1 or sum(lengths) != int(row["seqlen"]):
            raise ValueError(f"SSD row {row.get('name')!r}: cu_seqlens lengths must sum to seqlen with batch 1")
        return [int(v) for v in lengths]
    return [int(row["seqlen"])] * int(row["batch"])


def ssd_counts(row: dict, defaults: dict | None = None):
    """(flops, bytes) of one SSD combined call, counted here (used when ``cake_rt.ops.ssd.ssd_flops_bytes``
    is not available).

    flops, per chunk of l tokens: C B^T once per group (2 l^2 N), and per head the masked product with X
    (2 l^2 P), the chunk state X^T (decay B) (2 l P N) and the carried-state output C S_prev (2 l P N):
    the dense matrix work of the chunked algorithm (the causal half of the l x l tiles counted in full).
    bytes: x, z, B, C, dt read once; y, final (and varlen) states written once."""
    d = dict(defaults or {})
    d.update(row)
    H, P, N, G, Q = (int(d[k]) for k in ("nheads", "headdim", "dstate", "ngroups", "chunk"))
    flops = 0
    segs = ssd_segments(d)
    for L in segs:
        full, rem = divmod(L, Q)
        for l, n in ((Q, full), (rem, 1 if rem else 0)):
            flops += n * (G * 2 * l * l * N + H * (2 * l * l * P + 4 * l * P * N))
    e = _ELEM[d.get("dtype", "bfloat16")]
    s = _ELEM[d.get("state_dtype", "float32")]
    tokens = int(d["batch"]) * int(d["seqlen"])
    nbytes = tokens * H * P * e * (3 if d.get("z") else 2)  # x, y (and z)
    nbytes += tokens * G * N * e * 2  # B, C
    nbytes += tokens * H * 4  # dt
    nstates = 0
    if d.get("return_final_states"):
        nstates += int(d["batch"])
    if d.get("return_varlen_states"):
        nstates += len(segs)
    nbytes += nstates * H * P * N * s
    return int(flops), int(nbytes)


def ssd_floor_counts(row: dict, defaults: dict | None = None):
    """(flops, bytes, source) for an SSD row's floor: the op's own ``cake_rt.ops.ssd.ssd_flops_bytes`` (minimal
    work: causal halves of the l x l tiles) when the library has it, else ``ssd_counts``."""
    d = dict(defaults or {})
    d.update(row)
    segs = ssd_segments(d)
    nstates = (int(d["batch"]) if d.get("return_final_states") else 0) + (len(segs) if d.get("return_varlen_states") else 0)
    try:
        from cake_rt.ops.ssd import ssd_flops_bytes
    except ImportError:
        f, b = ssd_counts(d)
        return f, b, "cake_rt.bench.layouts.ssd_counts"
    f, b = ssd_flops_bytes(batch=int(d["batch"]), seqlen=int(d["seqlen"]), nheads=int(d["nheads"]),
                           headdim=int(d["headdim"]), dstate=int(d["dstate"]), ngroups=int(d["ngroups"]),
                           chunk_size=int(d["chunk"]), dtype_bytes=_ELEM[d.get("dtype", "bfloat16")],
                           state_bytes=_ELEM[d.get("state_dtype", "float32")], has_z=bool(d.get("z", True)),
                           has_D=bool(d.get("D", True)), return_final=nstates > 0, nseq=max(nstates, 1))
    return int(f), int(b), "cake_rt.ops.ssd.ssd_flops_bytes"


def dsa_floor_counts(layout: DsaLayout, heads: int, head_dim: int, topk: int):
    """(flops, bytes, source) for a DSA row's floor: ``cake_rt.ops.dsa.dsa_flops_bytes`` when the library has
    it (it adds 3 H per pair for ReLU, weight and head sum), else ``dsa_counts`` (the spec's 2 H D)."""
    try:
        from cake_rt.ops.dsa import dsa_flops_bytes
    except ImportError:
        f, b = dsa_counts(layout, heads, head_dim, topk)
        return f, b, "cake_rt.bench.layouts.dsa_counts"
    f, b = dsa_flops_bytes(layout.T, layout.Tkv, heads, head_dim, topk, layout.visible_pairs)
    return int(f), int(b), "cake_rt.ops.dsa.dsa_flops_bytes"
