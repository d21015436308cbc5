"""Tensor maps (TMA descriptors) for sm_90+ kernels, encoded by the driver's ``cuTensorMapEncodeTiled`` through
ctypes on libcuda (``arch.libcuda``; CuPy has no wrapper) and passed by value as ``__grid_constant__`` kernel
parameters (``grid.Blob``).

A map is a function of the tensor's address, shape and strides alone, so a kernel's maps are memoized per pointer
tuple (``TileMaps``): a repeated call with the same arrays pays a tuple comparison, a call with other arrays one
driver call per map (about 1-2 us each through ctypes), remembered for the next time.
"""
from __future__ import annotations

import ctypes

from .arch import libcuda

MAP_BYTES = 128                 # sizeof(CUtensorMap); 64-byte aligned
_DATA_TYPE_UINT16 = 1           # CU_TENSOR_MAP_DATA_TYPE_UINT16: 16-bit elements copied as bits (bf16, fp16)
_INTERLEAVE_NONE = 0
_SWIZZLE_128B = 3               # CU_TENSOR_MAP_SWIZZLE_128B
_L2_PROMOTION_256B = 3          # CU_TENSOR_MAP_L2_PROMOTION_L2_256B
_OOB_FILL_NONE = 0              # out-of-bounds elements read as zeros

_encode = None


def _entry():
    global _encode
    if _encode is None:
        f = libcuda().cuTensorMapEncodeTiled
        u32p, u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
        f.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p, u32p, u32p,
                      ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        f.restype = ctypes.c_int
        _encode = f
    return _encode


class Tile2D:
    """The fixed part of a 2-D map of 16-bit elements: ``rows`` rows of ``cols`` elements, ``row_bytes`` apart, read
    in boxes of ``box_cols`` x ``box_rows`` in the 128-byte swizzle (``box_cols`` * 2 <= 128)."""

    __slots__ = ("rows", "_args")

    def __init__(self, cols: int, rows: int, row_bytes: int, box_cols: int = 64, box_rows: int = 64):
        if box_cols * 2 > 128 or row_bytes % 16:
            raise ValueError(f"tensor map: a {box_cols}-column box or a row pitch of {row_bytes} B does not fit the "
                             f"128-byte swizzle")
        self.rows = int(rows)
        self._args = ((ctypes.c_uint64 * 2)(int(cols), int(rows)), (ctypes.c_uint64 * 1)(int(row_bytes)),
                      (ctypes.c_uint32 * 2)(int(box_cols), int(box_rows)), (ctypes.c_uint32 * 2)(1, 1))

    def encode(self, dst: int, ptr: int) -> None:
        """Write the map of the tensor at device address ``ptr`` to host address ``dst`` (64-byte aligned); a null
        pointer or an empty tensor writes zeros (a map the kernel never reads)."""
        if not ptr or not self.rows:
            ctypes.memset(dst, 0, MAP_BYTES)
            return
        dims, strides, box, elem = self._args
        err = _entry()(dst, _DATA_TYPE_UINT16, 2, ptr, dims, strides, box, elem, _INTERLEAVE_NONE, _SWIZZLE_128B,
                       _L2_PROMOTION_256B, _OOB_FILL_NONE)
        if err:
            raise RuntimeError(f"cuTensorMapEncodeTiled failed (CUresult {err}) for a {dims[1]} x {dims[0]} tensor at "
                               f"{ptr:#x}")


def bound_copy(address: int) -> ctypes.Array:
    """A copy of the map at host address ``address`` (64-byte aligned, owned by the array) to pass by value in a launch
    packed once with every argument bound (``grid.PackedLaunch`` without blobs): no memo entry has to outlive it."""
    buf = ctypes.create_string_buffer(MAP_BYTES + 64)
    off = (-ctypes.addressof(buf)) % 64
    m = (ctypes.c_uint8 * MAP_BYTES).from_buffer(buf, off)  # holds buf
    ctypes.memmove(m, address, MAP_BYTES)
    return m


class TileMaps:
    """The maps of one kernel's tensors (``tiles``: one ``Tile2D`` a tensor), memoized per pointer tuple (at most
    ``capacity`` tuples, then the memo starts over). ``get(ptrs)`` returns ``(buffer, addresses)``: the host addresses
    of the maps, one a tensor in order, for ``grid.Blob`` parameters; the caller holds the pair until its launch is
    made (the driver copies parameters at launch), so a memo cleared by another thread frees no buffer in use."""

    __slots__ = ("tiles", "capacity", "_memo", "_last")

    def __init__(self, tiles, capacity: int = 64):
        self.tiles = tuple(tiles)
        self.capacity = capacity
        self._memo: dict = {}
        self._last = (None, None)  # (pointer tuple, its entry): one attribute, so a thread reads a matching pair

    def get(self, ptrs: tuple) -> tuple:
        last = self._last
        if last[0] == ptrs:
            return last[1]
        hit = self._memo.get(ptrs)
        if hit is None:
            n = len(self.tiles)
            buf = ctypes.create_string_buffer(n * MAP_BYTES + 64)
            base = (ctypes.addressof(buf) + 63) & ~63
            for i, (tile, ptr) in enumerate(zip(self.tiles, ptrs)):
                tile.encode(base + i * MAP_BYTES, ptr)
            if len(self._memo) >= self.capacity:
                self._memo.clear()
            hit = self._memo[ptrs] = (buf, tuple(base + i * MAP_BYTES for i in range(n)))
        self._last = (ptrs, hit)
        return hit
