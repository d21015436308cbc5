"""Array intake: CuPy arrays, and anything speaking DLPack or the CUDA array interface (PyTorch, JAX),
become CuPy views without a copy; small host metadata (cu_seqlens, offsets) becomes NumPy int32.

Validation helpers raise ``TypeError`` (wrong kind or dtype) or ``ValueError`` (rank, shape, layout,
device, values) whose message starts with the argument's name and says what was expected and what came.
Nothing here copies or casts a tensor: a host (NumPy) array where a device array is needed is an error.
"""
from __future__ import annotations

import contextlib
import sys

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
FP16 = np.dtype(np.float16)
FP32 = np.dtype(np.float32)
INT32 = np.dtype(np.int32)

_NAMES = {BF16: "bfloat16", FP16: "float16", FP32: "float32", np.dtype(np.float64): "float64",
          INT32: "int32", np.dtype(np.int64): "int64", np.dtype(np.uint8): "uint8"}


def dtype_name(dt) -> str:
    """Readable dtype name ("bfloat16", "float32", ...)."""
    try:
        dt = np.dtype(dt)
    except TypeError:
        return str(dt)
    if dt.byteorder == ">":  # a big-endian int32 is not int32 to the kernels: say why it was refused
        return f"{_NAMES.get(dt.newbyteorder('<'), dt.name)} (big-endian)"
    return _NAMES.get(dt, dt.name)


def parse_dtype(value, name: str, allowed) -> np.dtype:
    """A dtype given as a dtype, a type or a name ("bfloat16", "bf16", "float32", ...) -> np.dtype."""
    aliases = {"bf16": BF16, "bfloat16": BF16, "fp16": FP16, "float16": FP16, "half": FP16,
               "fp32": FP32, "float32": FP32, "float": FP32}
    if isinstance(value, str):
        dt = aliases.get(value.lower())
        if dt is None:
            raise ValueError(f"{name}: unknown dtype name {value!r}; expected one of "
                             f"{', '.join(dtype_name(a) for a in allowed)}")
    else:
        try:
            dt = np.dtype(value)
        except TypeError:
            dt = None
        if dt is None:
            # torch dtypes and similar: match on their printed name ("torch.bfloat16")
            dt = aliases.get(str(value).rsplit(".", 1)[-1].lower())
        if dt is None:
            raise TypeError(f"{name}: expected a dtype or dtype name, got {value!r}")
    if dt not in [np.dtype(a) for a in allowed]:
        raise TypeError(f"{name}: expected one of {', '.join(dtype_name(a) for a in allowed)}, got {dtype_name(dt)}")
    return dt


def _foreign_read_only(x) -> str | None:
    """Why ``x`` may not be written in place, or None. JAX arrays are immutable (their DLPack export
    gives a view of a buffer JAX may share or reuse); a CUDA array interface may say ``readonly``;
    NumPy-style ``flags.writeable`` False is honoured too."""
    mod = type(x).__module__ or ""
    if mod.split(".")[0] in ("jax", "jaxlib"):
        return "a JAX array is immutable"
    try:
        cai = x.__cuda_array_interface__
    except Exception:
        cai = None
    if isinstance(cai, dict):
        data = cai.get("data")
        if data is not None and len(data) > 1 and bool(data[1]):
            return "its __cuda_array_interface__ is read-only"
    flags = getattr(x, "flags", None)
    if flags is not None and getattr(flags, "writeable", True) is False:
        return "it is read-only (flags.writeable is False)"
    return None


_DL_CPU, _DL_CUDA, _DL_CUDA_MANAGED = 1, 2, 13  # DLPack device types


def _dlpack_device(x) -> tuple | None:
    """``(device type, device id)`` as ``x.__dlpack_device__()`` reports them, or None when it reports none."""
    dev = getattr(x, "__dlpack_device__", None)
    if dev is None:
        return None
    try:
        kind, index = dev()[:2]
        return int(kind), int(index)
    except Exception:
        return None


def _dlpack_device_type(x) -> int | None:
    """The DLPack device type ``x.__dlpack_device__()`` reports, or None when it reports none."""
    dev = _dlpack_device(x)
    return None if dev is None else dev[0]


def as_device_array(x, name: str, *, output: bool = False):
    """``x`` as a CuPy array on its CUDA device, without a copy.

    Accepts CuPy arrays, objects with ``__dlpack__`` (PyTorch, JAX, ...) and objects with
    ``__cuda_array_interface__``. A NumPy array or a CPU tensor is a ``TypeError`` naming ``name``.
    A PyTorch tensor with ``requires_grad`` is read through ``detach()`` as an input (no gradient flows
    through cake-rt); as an output (``output=True``) it is a ``ValueError``, as is any read-only export
    (a JAX array, a read-only CUDA array interface, a DLPack 1.0 export flagged read-only) and a DLPack export the
    producer flags as a copy (the results would not reach the caller's array).
    """
    import cupy

    if isinstance(x, cupy.ndarray):
        return x
    if isinstance(x, np.ndarray) or np.isscalar(x):
        raise TypeError(f"{name}: expected a CUDA device array (CuPy, PyTorch, JAX), got a host "
                        f"{type(x).__name__}; move it to the GPU first (cake-rt never copies silently)")
    if output:
        why = _foreign_read_only(x)
        if why is not None:
            raise ValueError(f"{name}: cannot be written in place: {why}; pass a writable array (CuPy, PyTorch) "
                             f"or None to get a new one")
    if getattr(x, "requires_grad", False) is True and hasattr(x, "detach"):
        if output:
            raise ValueError(f"{name}: a tensor that requires grad cannot be an output (cake-rt writes it in "
                             f"place, outside autograd); pass a tensor without requires_grad")
        x = x.detach()  # an input is only read: a documented read-only view, no gradient
        if isinstance(x, cupy.ndarray):
            return x
    if hasattr(x, "__dlpack__"):
        kind = _dlpack_device_type(x)
        if kind is not None and kind not in (_DL_CUDA, _DL_CUDA_MANAGED):
            raise TypeError(f"{name}: expected a CUDA device array, got a {type(x).__name__} on a "
                            f"non-CUDA device (DLPack device type {kind})")
        refuse_export_joining_a_capture(x, name)
        try:
            # An output's export is checked for DLPack 1.0's read-only and is-copied flags, which cupy.from_dlpack
            # does not look at: a write into either would be lost or forbidden, and come back as no error.
            return cupy.from_dlpack(_WritableExport(x, name) if output else x)
        except _NotWritable as exc:
            raise ValueError(str(exc)) from None
        except Exception as exc:
            if not hasattr(x, "__cuda_array_interface__"):
                raise TypeError(f"{name}: could not take {type(x).__name__} through DLPack: {exc}") from None
    if hasattr(x, "__cuda_array_interface__"):
        _refuse_interface_sync_breaking_a_capture(x, name)
        from .launch.streams import relaxed_capture_mode

        try:
            # CuPy synchronizes the interface's stream (version 3's rule): a host wait, made in relaxed capture mode
            # like the library's other host work, so that a capture on another stream is not invalidated by it.
            with relaxed_capture_mode():
                return cupy.asarray(x)
        except Exception as exc:
            raise TypeError(f"{name}: could not take {type(x).__name__} through the CUDA array interface: "
                            f"{exc}") from None
    raise TypeError(f"{name}: expected a CUDA device array (CuPy array, or an object with __dlpack__ or "
                    f"__cuda_array_interface__), got {type(x).__name__}")


_DLPACK_FLAG_READ_ONLY, _DLPACK_FLAG_IS_COPIED = 1, 2  # DLManagedTensorVersioned.flags bits (DLPack 1.0)


class _NotWritable(ValueError):
    """An output's DLPack export that may not, or need not, be written in place (raised inside its export)."""


def _capsule_flags(capsule) -> int:
    """The ``flags`` of a versioned DLPack capsule (``dltensor_versioned``, major version 1), else 0: an unversioned
    capsule carries none. Read through private ctypes prototypes: the shared ``ctypes.pythonapi`` functions' argtypes
    are not changed under other code."""
    import ctypes

    api = _capsule_api()
    if not api[0](capsule, b"dltensor_versioned"):
        return 0
    ptr = api[1](capsule, b"dltensor_versioned")
    if not ptr or ctypes.c_uint32.from_address(ptr).value != 1:  # DLPackVersion.major: the layout below is 1.x's
        return 0
    # DLManagedTensorVersioned: DLPackVersion (2 x uint32), manager_ctx, deleter, then the uint64 flags
    return ctypes.c_uint64.from_address(ptr + 8 + 2 * ctypes.sizeof(ctypes.c_void_p)).value


_capsule_fns: list = []


def _capsule_api():
    if not _capsule_fns:
        import ctypes

        is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
            ("PyCapsule_IsValid", ctypes.pythonapi))
        get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
            ("PyCapsule_GetPointer", ctypes.pythonapi))
        _capsule_fns[:] = [is_valid, get]
    return _capsule_fns


class _WritableExport:
    """``x`` as ``cupy.from_dlpack`` sees it, for an output: the same device and the same export (CuPy names the stream
    and version, and its fallback for producers without ``max_version`` still works: their ``TypeError`` passes
    through), but a capsule flagged read-only (the producer forbids writes) or is-copied (the producer made a copy:
    the kernel's results would land in memory the caller never sees) raises ``_NotWritable`` naming the argument. The
    refused capsule is dropped unconsumed, so its destructor releases it (DLPack's rule for capsules)."""

    __slots__ = ("x", "name")

    def __init__(self, x, name):
        self.x, self.name = x, name

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()

    def __dlpack__(self, *args, **kwargs):
        capsule = self.x.__dlpack__(*args, **kwargs)
        flags = _capsule_flags(capsule)
        why = ("its DLPack export is read-only" if flags & _DLPACK_FLAG_READ_ONLY else
               "its DLPack export is a copy (results written there would not reach it)"
               if flags & _DLPACK_FLAG_IS_COPIED else None)
        if why is not None:
            raise _NotWritable(f"{self.name}: cannot be written in place: {why}; pass a writable array (CuPy, "
                               f"PyTorch) or None to get a new one")
        return capsule


def _refuse_interface_sync_breaking_a_capture(x, name: str) -> None:
    """``ValueError`` naming ``name``, before ``cupy.asarray`` takes ``x``, when its ``__cuda_array_interface__`` names a
    stream whose synchronization (CuPy makes it, as version 3 of the interface asks) would break a CUDA graph capture:
    that stream captures, or it is the legacy default stream while a blocking stream captures
    (``launch.streams.copy_breaks_capture``). The driver refuses such a wait and invalidates the caller's capture."""
    try:
        cai = x.__cuda_array_interface__
        stream = cai.get("stream") if isinstance(cai, dict) else None
    except Exception:
        return  # read again by cupy.asarray, whose error names the argument
    if stream is None or isinstance(stream, bool) or not isinstance(stream, int):
        return
    try:
        from cupy import _util

        if not getattr(_util, "CUDA_ARRAY_INTERFACE_SYNC", True):  # CUPY_CUDA_ARRAY_INTERFACE_SYNC=0: no wait made
            return
    except ImportError:
        pass
    from .launch.streams import copy_breaks_capture

    if copy_breaks_capture(stream):
        raise ValueError(f"{name}: its __cuda_array_interface__ names stream {stream:#x}, which is capturing a CUDA "
                         f"graph (or joined to one): taking the array synchronizes that stream (the interface's rule, "
                         f"which CuPy follows) and a capture forbids it; pass a CuPy array or a DLPack one "
                         f"(__dlpack__), or call outside the capture")


def refuse_export_joining_a_capture(x, name: str) -> None:
    """``ValueError`` naming ``name``, before any export, when taking PyTorch tensor ``x`` through DLPack on CuPy's
    current stream (the stream ``cupy.from_dlpack`` names) would join that stream to a CUDA graph capture. PyTorch's
    ``__dlpack__(stream)`` records an event on its current stream and makes the named stream wait for it: when its
    current stream captures (inside ``torch.cuda.graph``) and the named one does not, that wait joins the named stream
    to the capture, a fork the capture never joins back (it fails at its end), and on the legacy default stream the
    driver refuses it and invalidates the capture. A named stream that captures already (the caller joined it to the
    capture) waits inside the graph, as a captured dependency: not refused. Other producers' current streams are not
    seen here."""
    torch = sys.modules.get("torch")
    if torch is None or type(x).__module__.split(".")[0] != "torch":
        return
    try:
        if not torch.cuda.is_current_stream_capturing():
            return
        producer = torch.cuda.current_stream().cuda_stream
    except Exception:  # a torch without CUDA: its export needs no stream
        return
    import cupy

    from .launch.streams import is_capturing

    consumer = cupy.cuda.get_current_stream().ptr
    if consumer == producer or is_capturing(consumer):
        return
    raise ValueError(f"{name}: a PyTorch tensor cannot be taken on stream {consumer:#x} while PyTorch's current stream "
                     f"({producer:#x}) is capturing a CUDA graph: its DLPack export would make that stream wait for "
                     f"the capture and join it to the graph, which the capture cannot end with; call on the capturing "
                     f"stream (stream=torch.cuda.current_stream()), or outside the capture")


def dlpack_cuda_device(x, output: bool = False) -> int | None:
    """The CUDA device of ``x`` when ``as_device_array(x, ..., output=output)`` takes it through DLPack (a PyTorch or
    JAX array on the GPU), read from ``__dlpack_device__`` without exporting it; None for None, a CuPy or host array,
    an object with no CUDA DLPack device, or an output refused before any export (read-only, requires grad). Such an
    export names the stream its consumer uses the data on (``cupy.from_dlpack`` names CuPy's current stream) and the
    producer orders its pending work on the array before that stream: an op takes these arrays with its call's
    stream current, or a kernel on another stream could run before that work."""
    if x is None or isinstance(x, np.ndarray) or type(x).__module__.split(".")[0] == "cupy" \
            or not hasattr(x, "__dlpack__"):
        return None
    if output and (_foreign_read_only(x) is not None or getattr(x, "requires_grad", False) is True):
        return None
    dev = _dlpack_device(x)
    return dev[1] if dev is not None and dev[0] in (_DL_CUDA, _DL_CUDA_MANAGED) else None


def torch_stream_to_order(arrays, device: int, stream) -> int | None:
    """The handle of PyTorch's current stream of ``device`` when a call with ``stream=None`` takes a PyTorch CUDA tensor
    among ``arrays`` (the caller's own objects, inputs and outputs); None otherwise (an explicit ``stream=``, no PyTorch
    tensor, PyTorch not imported). ``stream=None`` runs on CuPy's current stream, and the DLPack export orders PyTorch's
    pending work on each tensor before it; the reverse is the caller's next op on PyTorch's stream, which nothing
    orders after the kernel: it could read a caller-owned output before the kernel wrote it, or overwrite (or free, to
    PyTorch's caching allocator) an input the kernel still reads. The op makes this stream wait for the call's
    (``launch.streams.order_after``). An explicit ``stream=`` is the caller's choice (an overlap it arranged): no wait."""
    if stream is not None:
        return None
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if not any(type(a).__module__.split(".")[0] == "torch" and dlpack_cuda_device(a) is not None for a in arrays):
        return None
    try:
        return int(torch.cuda.current_stream(device).cuda_stream)
    except Exception:  # a torch without CUDA: nothing of it to order
        return None


ALIGN = 16  # bytes: the kernels' vector loads and stores (16-byte cp.async / ld.global.v4)


def check_aligned(arr, name: str, align: int = ALIGN):
    """``ValueError`` naming ``name`` when the array's base pointer is not ``align``-byte aligned (a view
    at an element offset, e.g. ``x[1:]`` of a row that is not a multiple of 16 bytes)."""
    ptr = arr.data.ptr
    if ptr % align:
        raise ValueError(f"{name}: the data pointer {ptr:#x} is not {align}-byte aligned (offset {ptr % align}); "
                         f"the kernels use {align}-byte vector accesses: pass an array that starts on a "
                         f"{align}-byte boundary (a fresh allocation, or a view at a multiple of {align} bytes)")
    return arr


def _span(arr):
    """[lo, hi) bytes the array can touch (strides may be negative or zero)."""
    if arr.size == 0:
        return None
    lo = hi = arr.data.ptr
    for n, st in zip(arr.shape, arr.strides):
        ext = (int(n) - 1) * int(st)
        if ext < 0:
            lo += ext
        else:
            hi += ext
    return lo, hi + arr.itemsize


def check_disjoint_spans(outputs, inputs=()):
    """``check_disjoint`` on ``(name, (lo, hi) or None)`` byte ranges (the fast form for contiguous arrays)."""
    outs = [(n, sp) for n, sp in outputs if sp is not None]
    ins = [(n, sp) for n, sp in inputs if sp is not None]
    for i, (on, osp) in enumerate(outs):
        for j, (other, sp) in enumerate(outs[:i] + ins):
            if osp[0] < sp[1] and sp[0] < osp[1]:
                kind = "another output" if j < i else "an input"
                raise ValueError(f"{on}: its memory overlaps {other} ({kind}); outputs may not alias inputs or "
                                 f"each other: pass a separate array")


def contiguous_span(arr):
    """[lo, hi) of a C-contiguous array (None when empty)."""
    n = arr.nbytes
    if not n:
        return None
    p = arr.data.ptr
    return (p, p + n)


def check_disjoint(outputs, inputs=()):
    """``ValueError`` when an output's memory overlaps an input's or another output's.

    ``outputs``, ``inputs``: sequences of ``(name, array or None)``. Overlap is judged on the byte ranges
    the arrays span (conservative for interleaved views: those are refused too)."""
    check_disjoint_spans([(n, _span(a)) for n, a in outputs if a is not None],
                         [(n, _span(a)) for n, a in inputs if a is not None])


def _fmt_shape(shape) -> str:
    return "(" + ", ".join("?" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def check_array(arr, name: str, *, dtypes=None, ndim=None, shape=None, contiguous=True, device=None):
    """Validate a CuPy array; returns it. ``shape`` may hold ``None`` wildcards.

    TypeError: dtype not in ``dtypes``. ValueError: rank, shape, non-contiguous layout, wrong device.
    """
    if dtypes is not None:
        allowed = [np.dtype(d) for d in (dtypes if isinstance(dtypes, (list, tuple, set)) else [dtypes])]
        if arr.dtype not in allowed:
            raise TypeError(f"{name}: expected dtype {' or '.join(dtype_name(d) for d in allowed)}, "
                            f"got {dtype_name(arr.dtype)}")
    if shape is not None and ndim is None:
        ndim = len(shape)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions"
                         f"{' ' + _fmt_shape(shape) if shape is not None else ''}, got shape {tuple(arr.shape)}")
    if shape is not None:
        for want, got in zip(shape, arr.shape):
            if want is not None and int(want) != int(got):
                raise ValueError(f"{name}: expected shape {_fmt_shape(shape)}, got {tuple(arr.shape)}")
    if contiguous and not arr.flags.c_contiguous:
        raise ValueError(f"{name}: expected a C-contiguous array, got strides {arr.strides} for shape "
                         f"{tuple(arr.shape)} (cake-rt does not copy silently; pass a contiguous array)")
    if device is not None and arr.device.id != int(device):
        raise ValueError(f"{name}: expected an array on device {int(device)}, got one on device {arr.device.id}")
    return arr


def copy_to_host(arr) -> np.ndarray:
    """CuPy array ``arr`` copied to the host on CuPy's current stream, which waits for the copy, in relaxed capture mode
    (``launch.streams.relaxed_capture_mode``: a CUDA graph capture on another stream, of this thread or another, stays
    valid). Every device-to-host copy of metadata is made here, after ``refuse_device_metadata_under_capture`` (or the
    entry's own ``copy_breaks_capture`` refusal) has cleared the current stream."""
    from .launch.streams import relaxed_capture_mode

    with relaxed_capture_mode():
        return arr.get()


def as_host_int32(x, name: str) -> np.ndarray:
    """Small integer metadata (cu_seqlens, offsets) as a 1-D NumPy int32 array of the library's own (a copy).

    Accepts lists, NumPy arrays, CuPy arrays, tensors and host DLPack arrays (a JAX CPU array; device data is copied
    to the host by ``copy_to_host``: callers make the call's stream current). Integer dtypes only; values must fit in
    int32.
    """
    if isinstance(x, (list, tuple)):
        try:
            arr = np.asarray(x)
        except ValueError:  # a ragged list: NumPy's message names no argument
            raise ValueError(f"{name}: expected a 1-D array, got a nested list of uneven lengths") from None
        if arr.size == 0:
            arr = arr.astype(np.int64)
        elif arr.dtype == object and all(isinstance(v, int) for v in arr.flat):
            # ints beyond int64 (NumPy keeps them as objects): a range error, not a wrong dtype
            raise ValueError(f"{name}: values must fit in int32")
    elif isinstance(x, np.ndarray):
        arr = x
    else:
        try:
            import cupy
        except Exception:  # pragma: no cover - cupy always present with cake-rt
            cupy = None
        if cupy is not None and isinstance(x, cupy.ndarray):
            arr = copy_to_host(x)
        elif hasattr(x, "__dlpack__") or hasattr(x, "__cuda_array_interface__"):
            if hasattr(x, "detach") and hasattr(x, "cpu") and not getattr(x, "is_cuda", False):  # a torch CPU tensor
                arr = x.detach().cpu().numpy()
            elif hasattr(x, "__dlpack__") and _dlpack_device_type(x) == _DL_CPU:  # a host array (a JAX CPU array)
                try:
                    arr = np.from_dlpack(x)
                except Exception as exc:
                    raise TypeError(f"{name}: could not read {type(x).__name__} through DLPack: {exc}") from None
            else:  # on the device: copied on CuPy's current stream (the call's), not on PyTorch's through .cpu()
                arr = copy_to_host(as_device_array(x, name))
        elif hasattr(x, "__array__"):
            arr = np.asarray(x)
        else:
            raise TypeError(f"{name}: expected an integer array (NumPy, CuPy, list), got {type(x).__name__}")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected an integer dtype (int32), got {dtype_name(arr.dtype)}")
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array, got shape {tuple(arr.shape)}")
    if arr.size and (arr.min() < np.iinfo(np.int32).min or arr.max() > np.iinfo(np.int32).max):
        raise ValueError(f"{name}: values must fit in int32")
    # Always a copy the library owns, never a view of the caller's memory: a validated call is memoized on these
    # values (ops/dsa.py plans again from them when its plan is evicted), and the caller may rewrite its array in
    # place for a later call.
    return arr.astype(np.int32)  # a new array (astype copies), contiguous (1-D)


def is_device_metadata(x) -> bool:
    """Whether metadata ``x`` lives on a device (reading it needs a device-to-host copy): a CuPy array, a CUDA
    tensor, an object with ``__cuda_array_interface__`` or a CUDA device in ``__dlpack_device__``. None, NumPy
    arrays, lists, tuples and CPU tensors are host metadata."""
    if x is None or isinstance(x, (np.ndarray, list, tuple)):
        return False
    if type(x).__module__.startswith("cupy"):  # before the interface: CuPy's reads the current stream
        return True
    if hasattr(x, "is_cuda"):
        return bool(x.is_cuda)
    return hasattr(x, "__cuda_array_interface__") or dlpack_cuda_device(x) is not None


def refuse_device_metadata_under_capture(named, handle: int, remedy: str = "pass host (NumPy) metadata") -> list:
    """The names of the device arrays among ``named`` ((name, value) pairs of metadata); ``ValueError`` naming the
    first when copying it to the host on stream ``handle`` would break a CUDA graph capture
    (``launch.streams.copy_breaks_capture``): the copy cannot be captured, and the driver refuses it and invalidates
    the capture. Host metadata passes during capture."""
    on_device = [name for name, value in named if is_device_metadata(value)]
    if on_device:
        from .launch.streams import copy_breaks_capture

        if copy_breaks_capture(handle):
            raise ValueError(f"{on_device[0]}: device metadata cannot be read during CUDA graph capture (it needs a "
                             f"device-to-host copy); {remedy}")
    return on_device


def call_intake(first, device_of_first, stream, arrays, first_output: int, named=(), remedy: str = ""):
    """The context an op takes its arrays in: the inputs' device and the call's stream current when the call reads
    device metadata among ``named`` ((name, value) pairs) or takes one of ``arrays`` through DLPack (a PyTorch or JAX
    array: its export orders the producer's pending work on the array before the stream CuPy names, its current one;
    ``arrays[first_output:]`` are outputs, which count only when they would be exported), so that both the metadata's
    copy to the host and every export are ordered before the call's kernels. A null context when every array is a
    CuPy array and the metadata is on the host, or when ``first`` (the argument the device comes from,
    ``device_of_first()`` its device where it is not a DLPack array) is invalid: validation reports it. ``ValueError``
    naming the first device metadata argument when reading it would break a CUDA graph capture on the call's stream
    (``refuse_device_metadata_under_capture``, ``remedy`` appended)."""
    meta = any(is_device_metadata(v) for _, v in named)
    if not meta and all(dlpack_cuda_device(a, output=i >= first_output) is None for i, a in enumerate(arrays)):
        return contextlib.nullcontext()
    from .launch.streams import current_device, device_and_stream, resolve

    dev = dlpack_cuda_device(first)
    if dev is None:
        try:
            dev = device_of_first()
        except Exception:
            return contextlib.nullcontext()
    with current_device(dev):
        s, handle = resolve(stream, dev)
        if meta:
            refuse_device_metadata_under_capture(named, handle, remedy)
    return device_and_stream(dev, s)


def resolve_stream(stream, device=None):
    """A CuPy stream object for ``stream`` on ``device`` (default: the current device): None -> the current
    stream of that device; a CuPy stream as is; an object with ``.cuda_stream`` (PyTorch) or ``.ptr``, or an
    int handle -> ``cupy.cuda.ExternalStream`` after a driver check that it is a stream of that device
    (``ValueError`` naming ``stream`` otherwise)."""
    import cupy

    from .launch.streams import resolve

    if device is None:
        return resolve(stream, cupy.cuda.runtime.getDevice())[0]
    with cupy.cuda.Device(device):
        return resolve(stream, int(device))[0]


def add_host_metadata_key(sig: list, values) -> bool:
    """Append to a call signature the key of each host metadata array in ``values`` (None, or a NumPy
    array: its dtype, shape and bytes, so an array changed in place gives another key; the dtype itself, not its
    char, which one byte order shares with the other). False when one is not a host NumPy array (device
    metadata: the call cannot be memoized on its signature)."""
    for v in values:
        if v is None:
            sig.append(None)
        elif type(v) is np.ndarray:
            sig.extend((v.dtype, v.shape, v.tobytes()))
        else:
            return False
    return True
