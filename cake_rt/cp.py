"""Context-parallel (CP) zigzag layouts for the DSA indexer: which queries and keys each rank holds.

Zigzag CP with ``W = cp_size`` ranks cuts every document of length ``L`` into ``2W`` equal chunks of
``c = L / 2W`` tokens; rank ``r`` holds chunks ``r`` and ``2W-1-r`` of every document, so every rank
gets the same number of query tokens and (nearly) the same causal work. On a rank, each chunk becomes
one indexer *segment*:

    queries : the chunk's tokens            document positions  j*c .. (j+1)*c - 1
    keys    : the document's keys 0 .. end  document positions  0   .. (j+1)*c - 1
    offset  : the chunk's start             q_causal_offsets[s] = j*c

so the local query ``i`` of chunk ``j`` sits at causal position ``j*c + i`` and sees exactly the keys
``0 .. j*c + i`` of its document: the same keys it sees in a single causal call over the whole
document. The union over ranks of every (query, visible key) pair is the full causal mask of every
document, each pair exactly once.

Worked example: ``doc_lens = [8, 16]``, ``cp_size = 2`` (4 chunks: 2 tokens each for doc 0, 4 for
doc 1). Packed token ids of the full batch are 0..7 (doc 0) and 8..23 (doc 1)::

    doc 0 | 0 1 | 2 3 | 4 5 | 6 7 |             doc 1 | 8 9 10 11 | 12 13 14 15 | 16 17 18 19 | 20 21 22 23 |
    chunk |  0  |  1  |  2  |  3  |             chunk |     0     |      1      |      2      |      3      |
    rank  |  0  |  1  |  1  |  0  |             rank  |     0     |      1      |      1      |      0      |

    rank 0: segments (doc 0, chunk 0) (doc 0, chunk 3) (doc 1, chunk 0) (doc 1, chunk 3)
        q_index          = [0 1 | 6 7 | 8 9 10 11 | 20 21 22 23]
        k_index          = [0 1 | 0 1 2 3 4 5 6 7 | 8 9 10 11 | 8 9 ... 23]
        cu_seqlens_q     = [0, 2, 4, 8, 12]
        cu_seqlens_k     = [0, 2, 10, 14, 30]
        q_causal_offsets = [0, 6, 0, 12]
    rank 1: segments (doc 0, chunk 1) (doc 0, chunk 2) (doc 1, chunk 1) (doc 1, chunk 2)
        q_index          = [2 3 | 4 5 | 12 13 14 15 | 16 17 18 19]
        k_index          = [0 1 2 3 | 0 1 2 3 4 5 | 8 9 ... 15 | 8 9 ... 19]
        cu_seqlens_q     = [0, 2, 4, 8, 12]
        cu_seqlens_k     = [0, 4, 10, 18, 30]
        q_causal_offsets = [2, 4, 4, 8]

The rank's query order (for each document: its chunk ``r``, then its chunk ``2W-1-r``) is the order of
the THD-format CP partition used by Megatron-LM / TransformerEngine, so an engine's local tokens
already are ``full[q_index]``.

Document lengths must be multiples of ``2 * cp_size`` (the convention of Megatron-LM and
TransformerEngine, whose data loaders pad each sequence to that multiple); any other length raises a
``ValueError`` naming ``doc_lens``. Zero-length documents are allowed: they give two empty segments.
Segment ``2d`` is chunk ``r`` and segment ``2d+1`` is chunk ``2W-1-r`` of document ``d``, always.
"""
from __future__ import annotations

import dataclasses
import operator

import numpy as np

__all__ = ["CPZigzagLayout", "cp_zigzag_layout"]

_INT32_MAX = np.iinfo(np.int32).max


@dataclasses.dataclass(frozen=True, eq=False)
class CPZigzagLayout:
    """One rank's share of a zigzag context-parallel split (see the module docstring for a picture).

    Every array is a read-only host (NumPy) array. ``S = 2 * len(doc_lens)`` segments,
    ``T = sum(doc_lens) / cp_size`` local queries, ``Tkv = num_keys`` local keys.

    Attributes:
        cp_size, rank: the split (``W`` ranks) and this rank.
        doc_lens: int64 ``[ndocs]``, the full documents, in packed order.
        doc_cu_seqlens: int32 ``[ndocs+1]``, the full documents' boundaries in the packed batch
            (the ``cu_seqlens_q`` = ``cu_seqlens_k`` of the equivalent single-GPU call).
        cu_seqlens_q: int32 ``[S+1]``, this rank's query segments.
        cu_seqlens_k: int32 ``[S+1]``, this rank's key segments.
        q_causal_offsets: int32 ``[S]``, each segment's chunk start in its document.
        q_index: int64 ``[T]``, packed token id of each local query: ``q_rank = q_full[q_index]``.
        k_index: int64 ``[Tkv]``, packed token id of each local key, segment after segment:
            ``k_rank = k_full[k_index]``; maps the indexer's local key ids back to global ones.
        k_index_allgather: int64 ``[Tkv]``, the same keys as row numbers into the rank-major
            all-gather of every rank's local tokens (``concat(k_full[q_index of rank 0..W-1])``):
            ``k_rank = k_allgathered[k_index_allgather]`` with no reordering in between.
        segment_doc, segment_chunk: int32 ``[S]``, the document and chunk (``0 .. 2W-1``) of each
            segment.
    """

    cp_size: int
    rank: int
    doc_lens: np.ndarray
    doc_cu_seqlens: np.ndarray
    cu_seqlens_q: np.ndarray
    cu_seqlens_k: np.ndarray
    q_causal_offsets: np.ndarray
    q_index: np.ndarray
    k_index: np.ndarray
    k_index_allgather: np.ndarray
    segment_doc: np.ndarray
    segment_chunk: np.ndarray

    @property
    def num_segments(self) -> int:
        return int(self.q_causal_offsets.shape[0])

    @property
    def num_queries(self) -> int:
        return int(self.q_index.shape[0])

    @property
    def num_keys(self) -> int:
        return int(self.k_index.shape[0])

    @property
    def total_tokens(self) -> int:
        return int(self.doc_cu_seqlens[-1])

    def indexer_kwargs(self) -> dict:
        """The segment keywords of ``dsa_indexer_det_topk`` for this rank (host arrays, causal)."""
        return {
            "cu_seqlens_q": self.cu_seqlens_q,
            "cu_seqlens_k": self.cu_seqlens_k,
            "q_causal_offsets": self.q_causal_offsets,
        }

    def to_global_keys(self, indices):
        """Map local key ids (rows of this rank's ``k``) to packed token ids: ``k_index[indices]``, ``-1`` kept.

        Args:
            indices: integer array of any shape (e.g. the indexer's ``[T, topk]`` output), NumPy or a
                device array (CuPy / anything with ``__cuda_array_interface__`` or ``__dlpack__``).
                Values must be ``-1`` (padding) or in ``[0, num_keys)``.

        Returns an int64 array of the same shape on the same side (NumPy in, NumPy out; device in,
        CuPy out on that device — one host-to-device copy of ``k_index`` per call, and the range check's
        device-to-host copy, both on CuPy's current stream: ``ValueError`` when that stream is capturing a
        CUDA graph).
        """
        if isinstance(indices, np.ndarray):
            _check_local_ids(indices, self.num_keys, lambda a: (int(a.min()), int(a.max())))
            out = np.full(indices.shape, -1, dtype=np.int64)
            valid = indices >= 0
            out[valid] = self.k_index[indices[valid]]
            return out
        if not (hasattr(indices, "__cuda_array_interface__") or hasattr(indices, "__dlpack__")):
            raise TypeError(
                f"indices: expected a NumPy or device integer array, got {type(indices).__name__}"
            )
        import cupy

        from cake_rt.interop import as_device_array
        from cake_rt.launch.streams import copy_breaks_capture, relaxed_capture_mode

        arr = as_device_array(indices, "indices")
        with arr.device:
            if copy_breaks_capture(cupy.cuda.get_current_stream().ptr):
                raise ValueError("indices: device ids cannot be range-checked during CUDA graph capture (the check "
                                 "needs a device-to-host copy, and k_index a host-to-device one); map them outside "
                                 "the capture")
            # Both copies, and the pool allocations beside them, on a stream that is not capturing: relaxed, so that a
            # capture on another stream stays valid (interop.copy_to_host).
            with relaxed_capture_mode():
                _check_local_ids(arr, self.num_keys, lambda a: (int(a.min()), int(a.max())))
                table = cupy.asarray(self.k_index)
                safe = cupy.maximum(arr, 0).astype(np.int64)
                return cupy.where(arr >= 0, table[safe], np.int64(-1))


def _check_local_ids(arr, num_keys, minmax):
    if arr.dtype.kind not in "iu":
        raise TypeError(f"indices: expected an integer array, got dtype {arr.dtype}")
    if arr.size == 0:
        return
    lo, hi = minmax(arr)
    if lo < -1 or hi >= num_keys:
        raise ValueError(
            f"indices: expected values in [-1, {num_keys}) (this rank's keys), got range [{lo}, {hi}]"
        )


def _as_count(value, name, minimum):
    if isinstance(value, bool) or isinstance(value, np.bool_):
        raise TypeError(f"{name}: expected an int, got bool")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}") from None
    if v < minimum:
        raise ValueError(f"{name}: expected an int >= {minimum}, got {v}")
    return v


def _on_cuda_device(x) -> bool:
    if hasattr(x, "__cuda_array_interface__"):
        return True
    dev = getattr(x, "__dlpack_device__", None)
    if dev is None:
        return False
    try:
        return int(dev()[0]) in (2, 13)  # DLPack kDLCUDA, kDLCUDAManaged
    except Exception:
        return False


def _host_doc_lens(doc_lens) -> np.ndarray:
    """doc_lens as a 1-D int64 NumPy array; accepts sequences, NumPy, host tensors and device arrays."""
    if isinstance(doc_lens, (list, tuple)):
        # Python ints past int64 become an object or a float64 array in NumPy, and would be refused as a wrong dtype:
        # they are lengths out of range.
        for i, v in enumerate(doc_lens):
            if isinstance(v, int) and not isinstance(v, bool) and not -2**63 <= v < 2**63:
                if v < 0:
                    raise ValueError(f"doc_lens: expected lengths >= 0, got {v} at position {i}")
                raise ValueError(f"doc_lens: length {v} at position {i} does not fit the indexer's int32 cu_seqlens")
    if isinstance(doc_lens, np.ndarray) or isinstance(doc_lens, (list, tuple, range)):
        arr = np.asarray(doc_lens)
        if arr.size == 0:
            arr = arr.astype(np.int64)
    elif _on_cuda_device(doc_lens):
        import cupy

        from cake_rt.interop import as_device_array, copy_to_host, refuse_device_metadata_under_capture

        refuse_device_metadata_under_capture((("doc_lens", doc_lens),), cupy.cuda.get_current_stream().ptr,
                                             "pass host doc_lens (a list or a NumPy array)")
        arr = copy_to_host(as_device_array(doc_lens, "doc_lens"))  # a small device-to-host copy
    elif hasattr(doc_lens, "__array__"):  # host tensors (PyTorch CPU, JAX on CPU, ...)
        arr = np.asarray(doc_lens)
    else:
        raise TypeError(
            f"doc_lens: expected a sequence or array of document lengths, got {type(doc_lens).__name__}"
        )
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
        raise TypeError(f"doc_lens: expected integer lengths, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"doc_lens: expected a 1-D list of lengths, got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError("doc_lens: expected at least one document, got none")
    if arr.dtype.kind == "u" and arr.max() > np.iinfo(np.int64).max:
        raise ValueError(f"doc_lens: lengths too large, got max {arr.max()}")
    arr = arr.astype(np.int64)
    if arr.min() < 0:
        bad = int(np.flatnonzero(arr < 0)[0])
        raise ValueError(f"doc_lens: expected lengths >= 0, got {int(arr[bad])} at position {bad}")
    return arr


def _ranges(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """concat(arange(s, s + n) for s, n in zip(starts, lens)) as int64, vectorised."""
    lens = lens.astype(np.int64)
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    excl = np.cumsum(lens) - lens
    return np.arange(total, dtype=np.int64) + np.repeat(starts.astype(np.int64) - excl, lens)


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _rank_pieces(doc_starts, chunk, W, rank):
    """Per-segment (q_start, k_start, len_q, len_k, offset, chunk id) of one rank, segment-major."""
    n = doc_starts.shape[0]
    seg_chunk = np.tile(np.array([rank, 2 * W - 1 - rank], dtype=np.int64), n)
    seg_doc = np.repeat(np.arange(n, dtype=np.int64), 2)
    c = chunk[seg_doc]
    offset = seg_chunk * c
    return {
        "doc": seg_doc,
        "chunk": seg_chunk,
        "q_start": doc_starts[seg_doc] + offset,
        "len_q": c,
        "k_start": doc_starts[seg_doc],
        "len_k": offset + c,
        "offset": offset,
    }


def cp_zigzag_layout(doc_lens, cp_size, rank) -> CPZigzagLayout:
    """Zigzag CP share of rank ``rank``: chunks ``r`` and ``2W-1-r`` of every document, as indexer segments.

    For ``W = cp_size``, document ``d`` of length ``L_d`` (starting at packed token ``s_d``) and
    ``c_d = L_d / 2W``, rank ``r`` gets, for ``j`` in ``(r, 2W-1-r)``, one segment with

        queries  = packed tokens  s_d + j*c_d .. s_d + (j+1)*c_d - 1
        keys     = packed tokens  s_d         .. s_d + (j+1)*c_d - 1
        q_causal_offsets = j*c_d

    so query ``s_d + j*c_d + i`` sees keys ``s_d .. s_d + j*c_d + i``: its full causal prefix. See the
    module docstring for a worked example.

    Args:
        doc_lens: ``[ndocs]`` document lengths (list, tuple, NumPy, or a device array, which is copied
            to the host on CuPy's current stream: ``ValueError`` when that stream is capturing a CUDA graph),
            each a multiple of ``2 * cp_size`` (``ValueError`` otherwise), >= 0.
        cp_size: ``W``, the number of CP ranks, >= 1.
        rank: this rank, ``0 <= rank < cp_size``.

    Returns a :class:`CPZigzagLayout`; pass ``layout.indexer_kwargs()`` (``cu_seqlens_q``,
    ``cu_seqlens_k``, ``q_causal_offsets``) to ``dsa_indexer_det_topk`` with ``q_full[q_index]``,
    ``weights_full[q_index]`` and ``k_full[k_index]``, and map the returned key ids back with
    ``layout.to_global_keys(indices)``.
    """
    W = _as_count(cp_size, "cp_size", 1)
    r = _as_count(rank, "rank", 0)
    if r >= W:
        raise ValueError(f"rank: expected 0 <= rank < cp_size = {W}, got {r}")
    lens = _host_doc_lens(doc_lens)
    # Overflow checks in Python ints before any NumPy arithmetic or allocation sized from these values.
    if W > _INT32_MAX:
        raise ValueError(f"cp_size: expected at most {_INT32_MAX} ranks, got {W}")
    too_long = np.flatnonzero(lens > _INT32_MAX)
    if too_long.size:
        i = int(too_long[0])
        raise ValueError(f"doc_lens: length {int(lens[i])} at position {i} does not fit the indexer's int32 "
                         f"cu_seqlens")
    total = sum(int(v) for v in lens.tolist()) if lens.shape[0] < 4096 else int(lens.sum(dtype=object))
    if total > _INT32_MAX:
        raise ValueError(f"doc_lens: the packed batch ({total} tokens) does not fit the indexer's int32 cu_seqlens")
    bad = np.flatnonzero(lens % (2 * W))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"doc_lens: every length must be a multiple of 2 * cp_size = {2 * W} (zigzag chunks of "
            f"L / {2 * W}); got {int(lens[i])} at position {i} ({bad.size} such document(s)); "
            "pad each document to that multiple, as Megatron-LM / TransformerEngine do"
        )
    # Rank r holds, per document, the key prefixes of chunk r ((r+1) c keys) and of chunk 2W-1-r ((2W-r) c keys):
    # (2W+1) c = L + c keys, the same on every rank, and the end of its cu_seqlens_k.
    max_keys = total + int((lens // (2 * W)).sum())
    if total > _INT32_MAX or max_keys > _INT32_MAX:
        raise ValueError(
            f"doc_lens: the packed batch ({total} tokens, up to {max_keys} keys on one rank) does not fit "
            "the indexer's int32 cu_seqlens"
        )

    doc_cu = np.zeros(lens.shape[0] + 1, dtype=np.int64)
    np.cumsum(lens, out=doc_cu[1:])
    doc_starts = doc_cu[:-1]
    chunk = lens // (2 * W)

    p = _rank_pieces(doc_starts, chunk, W, r)
    q_index = _ranges(p["q_start"], p["len_q"])
    k_index = _ranges(p["k_start"], p["len_k"])
    cu_q = np.zeros(p["len_q"].shape[0] + 1, dtype=np.int64)
    cu_k = np.zeros_like(cu_q)
    np.cumsum(p["len_q"], out=cu_q[1:])
    np.cumsum(p["len_k"], out=cu_k[1:])

    # Row of each local key in the rank-major all-gather of every rank's local tokens (all ranks hold
    # total / W tokens, so rank w's block starts at w * total / W). Key at document d, position p: chunk
    # j = p // c_d is held by rank w = min(j, 2W-1-j), where it sits after the 2 c_d' tokens of every earlier
    # document, and after that rank's first chunk of d when j is its second one.
    per_rank = total // W
    if k_index.size:
        d = np.searchsorted(doc_cu, k_index, side="right") - 1
        pos = k_index - doc_starts[d]
        c = chunk[d]
        j = pos // c
        w = np.minimum(j, 2 * W - 1 - j)
        before = np.zeros(lens.shape[0] + 1, dtype=np.int64)
        np.cumsum(2 * chunk, out=before[1:])
        k_index_allgather = w * per_rank + before[d] + np.where(j == w, 0, c) + pos % c
    else:
        k_index_allgather = np.zeros(0, dtype=np.int64)

    return CPZigzagLayout(
        cp_size=W,
        rank=r,
        doc_lens=_readonly(lens.copy()),
        doc_cu_seqlens=_readonly(doc_cu.astype(np.int32)),
        cu_seqlens_q=_readonly(cu_q.astype(np.int32)),
        cu_seqlens_k=_readonly(cu_k.astype(np.int32)),
        q_causal_offsets=_readonly(p["offset"].astype(np.int32)),
        q_index=_readonly(q_index),
        k_index=_readonly(k_index),
        k_index_allgather=_readonly(k_index_allgather),
        segment_doc=_readonly(p["doc"].astype(np.int32)),
        segment_chunk=_readonly(p["chunk"].astype(np.int32)),
    )
