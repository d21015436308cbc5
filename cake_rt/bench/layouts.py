"""Row geometry for the bench suites: DSA segment layouts and the FLOP / byte counts behind the floors,
all through the library's own definitions (``cake_rt.cp``, the ops' counts). Needs no GPU.

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
        from cake_rt.ops.dsa import visible_pairs

        return visible_pairs(self.cu_seqlens_q, self.cu_seqlens_k, self.q_causal_offsets)


def tail_layout(T: int, Tkv: int) -> DsaLayout:
    """One segment of ``T`` queries bottom-right aligned in ``Tkv`` keys (offset Tkv - T)."""
    if T < 1 or Tkv < 1:
        raise ValueError(f"tail layout: expected T >= 1 and Tkv >= 1, got T={T}, Tkv={Tkv}")
    return DsaLayout(
        np.array([0, T], dtype=np.int32), np.array([0, Tkv], dtype=np.int32), np.array([Tkv - T], dtype=np.int32)
    )


def zigzag_layout(documents, cp: int, rank: int) -> DsaLayout:
    """CP zigzag rank ``rank`` of ``cp`` ranks over ``documents`` (lengths, each divisible by 2*cp), through the
    library's ``cake_rt.cp_zigzag_layout``: two segments per document, chunk ``rank`` then ``2*cp - 1 - rank``."""
    from cake_rt.cp import cp_zigzag_layout

    lay = cp_zigzag_layout(np.asarray(documents, dtype=np.int64), int(cp), int(rank))
    return DsaLayout(np.asarray(lay.cu_seqlens_q, np.int32), np.asarray(lay.cu_seqlens_k, np.int32),
                     np.asarray(lay.q_causal_offsets, np.int32))


def dsa_layout(row: dict) -> DsaLayout:
    """The layout of a row of ``suites/dsa.json``."""
    kind = row.get("layout")
    if kind == "tail":
        return tail_layout(int(row["T"]), int(row["Tkv"]))
    if kind == "zigzag":
        return zigzag_layout(row["documents"], int(row["cp"]), int(row["rank"]))
    raise ValueError(f"DSA row {row.get('name')!r}: unknown layout {kind!r} (expected 'tail' or 'zigzag')")


_ELEM = {"bfloat16": 2, "float16": 2, "float32": 4}


def ssd_segments(row: dict):
    """Token counts of every segment of an SSD row (batch rows, or the cu_seqlens lengths)."""
    lengths = row.get("cu_seqlens_lengths")
    if lengths:
        if int(row["batch"]) != 1 or sum(lengths) != int(row["seqlen"]):
            raise ValueError(f"SSD row {row.get('name')!r}: cu_seqlens lengths must sum to seqlen with batch 1")
        return [int(v) for v in lengths]
    return [int(row["seqlen"])] * int(row["batch"])


def ssd_floor_counts(row: dict, defaults: dict | None = None):
    """(flops, bytes, source) of an SSD row's floor: the op's own ``cake_rt.ops.ssd.ssd_flops_bytes``."""
    from cake_rt.ops.ssd import ssd_flops_bytes

    d = dict(defaults or {})
    d.update(row)
    segs = ssd_segments(d)
    nstates = (int(d["batch"]) if d.get("return_final_states") else 0) + (len(segs) if d.get("return_varlen_states") else 0)
    f, b = ssd_flops_bytes(batch=int(d["batch"]), seqlen=int(d["seqlen"]), nheads=int(d["nheads"]),
                           headdim=int(d["headdim"]), dstate=int(d["dstate"]), ngroups=int(d["ngroups"]),
                           chunk_size=int(d["chunk"]), dtype_bytes=_ELEM[d.get("dtype", "bfloat16")],
                           state_bytes=_ELEM[d.get("state_dtype", "float32")], has_z=bool(d.get("z", True)),
                           has_D=bool(d.get("D", True)), return_final=nstates > 0, nseq=max(nstates, 1))
    return int(f), int(b), "cake_rt.ops.ssd.ssd_flops_bytes"


def dsa_floor_counts(layout: DsaLayout, heads: int, head_dim: int, topk: int):
    """(flops, bytes, source) of a DSA row's floor: the op's own ``cake_rt.ops.dsa.dsa_flops_bytes``."""
    from cake_rt.ops.dsa import dsa_flops_bytes

    f, b = dsa_flops_bytes(layout.T, layout.Tkv, heads, head_dim, topk, layout.visible_pairs)
    return int(f), int(b), "cake_rt.ops.dsa.dsa_flops_bytes"
