"""NcclBuffer: the one resolver of buffer specs.

Anything a collective takes as a buffer is resolved here into a device address,
an element count, an NcclDataType and a CUDA device:
  * torch tensors and CuPy arrays (read through their own attributes: no DLPack
    export, no __cuda_array_interface__ dict per call);
  * objects with __cuda_array_interface__ (Numba, RAPIDS, ...);
  * DLPack producers (__dlpack__ / __dlpack_device__);
  * an explicit spec: (pointer, count, dtype) or (pointer, count, dtype, device),
    an NcclBuffer, or an NcclMemoryBlock (as uint8: core/memory.py adds its reader).
Complex buffers (complex64, complex128) resolve to their real part's type
with twice the elements (`complex` is True); collectives move them as they
are and reduce them with sum or avg only (dtypes.check_op_for_complex). They
are never cached: the C fast path knows nothing of the op check.
Host memory, strided views, read-only outputs and dtypes NCCL lacks are
rejected with NcclInvalid naming the argument. torch and CuPy results are
cached per object (weakly), so a tensor passed on every step costs two cheap
checks (is it the same object, same data pointer and size) after the first;
CuPy arrays of a type that cannot be weakly referenced are read again each
time (in C on Communicator.all_reduce's fast path, once read here).
"""
from __future__ import annotations

import sys

from .. import _nccl
from ..errors import NcclInvalid
from ..nccl_enums import NcclDataType
from .dtypes import complex_part_type

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from ..core.argument_types import BufferLike, DataTypeLike

# DLPack device types
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


class NcclBuffer:
    """A resolved buffer: `ptr` (device address), `count` (elements), `dtype`
    (NcclDataType), `device` (CUDA ordinal, None if unknown), `readonly`,
    `owner` (the object whose memory it is, kept alive), `complex`, and `shape`
    (the producer's extents, C-contiguous; (count,) when it gave none).

    A complex dtype (complex64/complex128, any spelling from_dtype reads) is
    taken as its real part's type: `count` complex elements become 2 x count
    `dtype` elements, and `complex` is True."""

    __slots__ = ("ptr", "count", "dtype", "device", "readonly", "owner", "complex", "_shape", "__weakref__")

    def __init__(self, ptr: int, count: int, dtype: DataTypeLike, device: int | None = None, *,
                 readonly: bool = False, owner: object = None, shape: tuple[int, ...] | None = None) -> None:
        # bools are not addresses, counts or ordinals; an address and a count fit size_t
        if type(ptr) is bool or not isinstance(ptr, int) or not 0 <= ptr < 2 ** 64:
            raise NcclInvalid(f"buffer pointer must be an int in [0, 2**64), not {ptr!r}", "ptr")
        if type(count) is bool or not isinstance(count, int) or not 0 <= count < 2 ** 63:
            raise NcclInvalid(f"buffer count must be an int in [0, 2**63), not {count!r}", "count")
        if ptr == 0 and count:
            raise NcclInvalid("buffer pointer is NULL but count is not 0", "ptr")
        if device is not None and (type(device) is bool or not isinstance(device, int) or device < 0):
            raise NcclInvalid(f"buffer device must be a CUDA ordinal (an int >= 0) or None, not {device!r}",
                              "device")
        if shape is not None and not all(type(e) is int and e >= 0 for e in shape):
            raise NcclInvalid(f"buffer shape {tuple(shape)}: every extent is an int >= 0", "shape")
        self.ptr = ptr
        part = None if isinstance(dtype, NcclDataType) else complex_part_type(dtype)
        self.complex = part is not None
        self.count = 2 * count if self.complex else count
        self.dtype = part if self.complex else NcclDataType.from_dtype(dtype, "dtype")
        nbytes = self.count * self.dtype.itemsize
        if nbytes >= 2 ** 63 or ptr + nbytes > 2 ** 64:  # ssize_t bytes, and no address past 2**64
            raise NcclInvalid(f"buffer of {self.count} {self.dtype.name} elements ({nbytes} bytes) at {ptr:#x} "
                              "runs past the end of the address space", "count")
        self.device = None if device is None else int(device)
        self.readonly = bool(readonly)
        self.owner = owner
        self._shape = None if shape is None else tuple(shape)

    @property
    def shape(self) -> tuple[int, ...]:
        """The extents as the producer gave them (row-major, contiguous); (count,) for a flat spec."""
        return self._shape if self._shape is not None else (self.count,)

    @property
    def nbytes(self) -> int:
        """The buffer's size in bytes: count times the element size."""
        return self.count * self.dtype.itemsize

    def with_owner(self, owner: object) -> NcclBuffer:
        """The same buffer, kept alive by `owner`."""
        copy = NcclBuffer.__new__(NcclBuffer)
        copy.ptr, copy.count, copy.dtype, copy.device = self.ptr, self.count, self.dtype, self.device
        copy.readonly, copy.owner, copy.complex, copy._shape = self.readonly, owner, self.complex, self._shape
        return copy

    @property
    def complex_dtype_name(self) -> str:
        """The complex type's name ("complex64", "complex128"); the dtype's name when not complex."""
        return f"complex{self.dtype.itemsize * 16}" if self.complex else self.dtype.dtype_name

    @property
    def elements(self) -> int:
        """Elements as the caller counts them: complex numbers for a complex buffer, else count."""
        return self.count // 2 if self.complex else self.count

    @classmethod
    def resolve(cls, obj: BufferLike, argument: str = "buffer", *, writable: bool = False, device: int | None = None,
                stream: int = 0) -> NcclBuffer:
        """Resolve `obj` into an NcclBuffer and check it: on `device` when given,
        writable when `writable`. `stream` is the stream the buffer will be used
        on (DLPack and CUDA-array-interface producers synchronize with it)."""
        buffer = cached(obj)
        if buffer is None:
            buffer = _handler(type(obj))(obj, argument, stream)
        elif buffer.owner is None:
            buffer = buffer.with_owner(obj)
        check(buffer, argument, writable, device)
        return buffer

    @property
    def __cuda_array_interface__(self) -> dict:
        """A 1-D view of the buffer for consumers of the CUDA array interface
        (torch.as_tensor, cupy.asarray); bfloat16 and fp8 have no typestr."""
        if self.complex:
            return {"shape": (self.count // 2,), "typestr": f"<c{2 * self.dtype.itemsize}",
                    "data": (self.ptr, self.readonly), "version": 3, "strides": None, "stream": None}
        typestr = {1: "|", 2: "<", 4: "<", 8: "<"}[self.dtype.itemsize]
        kind = "f" if self.dtype.dtype_name.startswith("float") and self.dtype.itemsize > 1 else \
            "u" if self.dtype.dtype_name.startswith("uint") else "i"
        if self.dtype.dtype_name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            raise AttributeError(f"{self.dtype.dtype_name} has no __cuda_array_interface__ typestr")
        return {"shape": (self.count,), "typestr": f"{typestr}{kind}{self.dtype.itemsize}",
                "data": (self.ptr, self.readonly), "version": 3, "strides": None, "stream": None}

    def __repr__(self) -> str:
        dtype = f"{self.dtype.name} (complex{self.dtype.itemsize * 16})" if self.complex else self.dtype.name
        return (f"NcclBuffer(ptr={self.ptr:#x}, count={self.count}, dtype={dtype}, "
                f"device={self.device}{', readonly' if self.readonly else ''})")


def check(buffer: NcclBuffer, argument: str, writable: bool, device: int | None) -> None:
    if writable and buffer.readonly:
        raise NcclInvalid(f"{argument} is read-only, but the collective writes into it", argument)
    if device is not None and buffer.device is not None and buffer.device != device:
        raise NcclInvalid(f"{argument} is on CUDA device {buffer.device}, the communicator on device {device}",
                          argument)


# ---- the per-object cache (torch, CuPy) -------------------------------------
# id(obj) -> entry: a weak reference to obj, its NcclBuffer and whether to
# probe. probe is True for torch tensors, which can be re-pointed in place
# (set_, resize_): the entry holds while data_ptr() and numel() are unchanged.
# CuPy arrays cannot change their memory or size, so their entries need no
# probe. Entries go when their object does. The cached NcclBuffer has no owner
# (it must not keep the object alive); whoever looks it up holds the object.
# The entries, and the table that holds them, are the extension's
# (bindings/python/src/buffer_cache.c, which also holds the NcclBuffer's fields
# as C values) so that the fast path of Communicator.all_reduce reads them
# without running Python; what is cached, and which types are read as CuPy
# arrays, is decided here and only here.

_numpy_dtypes: dict = {}  # numpy dtype .num -> NcclDataType (CuPy dtypes are NumPy's)
# Types whose objects cannot be weakly referenced: resolved again each time, and
# known here so that the failing weak reference (an exception per call) is not retried.
_not_weakrefable: set = set()
# Of those, the types _from_cupy has read: the fast path reads their objects as
# _from_cupy does (the same attributes) and leaves any it would not take as it is
# (not contiguous, a dtype not in _numpy_dtypes yet, ...) to _from_cupy.
_read_as_cupy: set = set()
# _entries: the cache as a mapping id(obj) -> entry (a view of the extension's table).
_entries = _nccl._buffer_cache_setup(_numpy_dtypes, _read_as_cupy, NcclBuffer)  # an NcclBuffer is read as it is


def _remember(obj, buffer: NcclBuffer, probe: bool) -> NcclBuffer:
    tp = type(obj)
    if tp not in _not_weakrefable:
        try:
            _nccl._buffer_cache_remember(obj, buffer.with_owner(None), probe)
        except TypeError:
            _not_weakrefable.add(tp)
    return buffer


# cached(obj): the cached resolution of obj (an NcclBuffer without owner) if still valid, else None.
cached = _nccl._buffer_cache_lookup


# ---- handlers by type ---------------------------------------------------------

def _invalid(argument: str, message: str) -> NcclInvalid:
    return NcclInvalid(f"{argument}: {message}", argument)


def _from_buffer(obj, argument, stream):
    return obj


def _buffer(argument, *args, **kwargs) -> NcclBuffer:
    """NcclBuffer(*args, **kwargs), its refusal naming `argument` (the caller's), not its own."""
    try:
        return NcclBuffer(*args, **kwargs)
    except NcclInvalid as e:
        raise _invalid(argument, str(e)) from None


def _from_spec(obj, argument, stream):
    if not 3 <= len(obj) <= 4:
        raise _invalid(argument, "an explicit buffer spec is (pointer, count, dtype) or (pointer, count, dtype, device)")
    if isinstance(obj[1], (tuple, list)):  # (pointer, shape, dtype[, device]): count is the extents' product
        shape = tuple(obj[1])
        if not shape or not all(type(e) is int and e >= 0 for e in shape):
            raise _invalid(argument, f"shape {shape} needs one or more extents, each an int >= 0")
        return _buffer(argument, obj[0], _count(shape), *obj[2:], shape=shape)
    return _buffer(argument, *obj)


_torch_dtypes: dict = {}


def _from_torch(t, argument, stream):
    if not t.is_cuda:
        where = t.device.type
        raise _invalid(argument, "a torch tensor in host memory (device 'cpu'); NCCL needs CUDA memory"
                       if where == "cpu" else f"a torch tensor on device '{where}', not CUDA memory")
    if not t.is_contiguous():
        raise _invalid(argument, f"a non-contiguous torch tensor (shape {tuple(t.shape)}, strides {t.stride()}); "
                       "pass .contiguous()")
    dtype = _torch_dtypes.get(t.dtype)
    if dtype is None:
        if complex_part_type(t.dtype) is not None:
            return NcclBuffer(t.data_ptr(), t.numel(), t.dtype, t.get_device(), owner=t)  # never cached
        dtype = _torch_dtypes[t.dtype] = NcclDataType.from_dtype(t.dtype, argument)
    buffer = NcclBuffer(t.data_ptr(), t.numel(), dtype, t.get_device(), owner=t, shape=tuple(t.shape))
    return _remember(t, buffer, True)


def _from_cupy(a, argument, stream):
    contiguous = getattr(a, "_c_contiguous", None)
    if contiguous is None:
        contiguous = a.flags.c_contiguous
    if not contiguous:
        raise _invalid(argument, f"a non-contiguous CuPy array (shape {a.shape}, strides {a.strides}); "
                       "pass cupy.ascontiguousarray(...)")
    dtype = _numpy_dtypes.get(a.dtype.num)
    if dtype is None and complex_part_type(a.dtype) is not None:
        return NcclBuffer(a.data.ptr, a.size, a.dtype, a.data.device_id, owner=a)  # never cached
    if dtype is None:
        dtype = _numpy_dtypes[a.dtype.num] = NcclDataType.from_dtype(a.dtype, argument)
    memory = a.data
    buffer = NcclBuffer(memory.ptr, a.size, dtype, memory.device_id, owner=a, shape=tuple(a.shape))
    _remember(a, buffer, False)
    if type(a) in _not_weakrefable:
        _read_as_cupy.add(type(a))
    return buffer


def _strides_problem(shape, strides) -> str | None:
    """Why strides cannot describe an array of this shape (one int per extent), or None."""
    if strides is None:
        return None
    if not isinstance(strides, (tuple, list)) or not all(type(s) is int for s in strides):
        return f"strides {strides!r} are not a tuple of ints"
    if len(strides) != len(shape):
        return f"strides {tuple(strides)} give {len(strides)} extents, but shape {shape} has {len(shape)}"
    return None


def _contiguous(shape, strides, itemsize) -> bool:
    """C-contiguous: strides (in bytes) of a row-major layout; size-1 dimensions are free."""
    if strides is None:
        return True
    expected = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def _count(shape) -> int:
    n = 1
    for extent in shape:
        n *= extent
    return n


_cuda_cannot_tell = False  # set once CUDA failed to answer (no driver): not asked again


def _device_of(address: int, argument: str) -> int | None:
    """The CUDA device of an address, None when CUDA cannot tell (no driver);
    raises for host memory."""
    global _cuda_cannot_tell
    if _cuda_cannot_tell:
        return None
    from .cuda import MEMORY_DEVICE, MEMORY_MANAGED, device_count, pointer_device
    try:
        kind, device = pointer_device(address)
    except Exception:
        _cuda_cannot_tell = device_count() == 0
        return None
    if kind not in (MEMORY_DEVICE, MEMORY_MANAGED):
        raise _invalid(argument, f"address {address:#x} is host memory; NCCL needs CUDA memory")
    return device


def _from_cuda_array_interface(obj, argument, stream):
    interface = obj.__cuda_array_interface__
    if not isinstance(interface, dict):
        raise _invalid(argument, f"__cuda_array_interface__ is a {type(interface).__name__}, not a dict")
    missing = [key for key in ("data", "shape", "typestr") if key not in interface]
    if missing:
        raise _invalid(argument, f"__cuda_array_interface__ lacks {', '.join(map(repr, missing))}")
    data, shape, typestr = interface["data"], interface["shape"], interface["typestr"]
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise _invalid(argument, f"__cuda_array_interface__['data'] is {data!r}, not (pointer, read_only)")
    if not isinstance(shape, (tuple, list)):
        raise _invalid(argument, f"__cuda_array_interface__['shape'] is {shape!r}, not a tuple")
    if not isinstance(typestr, str) or len(typestr) < 3 or not typestr[2:].isdigit():
        raise _invalid(argument, f"__cuda_array_interface__['typestr'] is {typestr!r}, not a typestr such as '<f4'")
    address, readonly = data
    shape = tuple(shape)
    if not all(type(extent) is int and extent >= 0 for extent in shape):
        raise _invalid(argument, f"shape {shape} has an extent that is not an int >= 0")
    # a complex typestr goes to NcclBuffer as it is: it becomes its real part's type, twice the count
    dtype = typestr if complex_part_type(typestr) is not None else NcclDataType.from_typestr(typestr, argument)
    itemsize = int(typestr[2:])
    problem = _strides_problem(shape, interface.get("strides"))
    if problem:
        raise _invalid(argument, f"__cuda_array_interface__: {problem}")
    if not _contiguous(shape, interface.get("strides"), itemsize):
        raise _invalid(argument, f"a strided array (shape {shape}, strides {interface.get('strides')}); "
                       "NCCL needs contiguous memory")
    count = _count(shape)
    producer_stream = interface.get("stream")
    if producer_stream is not None and producer_stream not in (stream, 1 if stream == 0 else -1):
        from .cuda import stream_synchronize
        stream_synchronize(producer_stream)  # the producer's pending work on its stream comes first
    device = _device_of(address, argument) if count else None
    return _buffer(argument, address, count, dtype, device, readonly=bool(readonly), owner=obj, shape=shape)


def _from_dlpack(obj, argument, stream):
    on_device = obj.__dlpack_device__()
    if not (isinstance(on_device, tuple) and len(on_device) == 2 and  # torch's type is an IntEnum
            all(isinstance(v, int) and not isinstance(v, bool) for v in on_device)):
        raise _invalid(argument, f"its __dlpack_device__() returned {on_device!r}, not (device_type, device_id)")
    device_type, device_id = on_device
    if device_type in (_DL_CPU, _DL_CUDA_HOST):
        raise _invalid(argument, "a DLPack export of host memory; NCCL needs CUDA memory")
    if device_type not in (_DL_CUDA, _DL_CUDA_MANAGED):
        raise _invalid(argument, f"a DLPack export on device type {device_type}, not CUDA")
    dl_stream = stream if stream else 1  # DLPack: 1 is the legacy default stream
    try:
        try:
            capsule = obj.__dlpack__(stream=dl_stream, max_version=(1, 0))
        except TypeError:
            capsule = obj.__dlpack__(stream=dl_stream)
    except Exception as e:  # the producer's refusal (e.g. NumPy's BufferError for bool)
        raise _invalid(argument, f"its __dlpack__ failed: {type(e).__name__}: {e}") from e
    address, shape, strides, (code, bits, lanes), on, readonly = _nccl.dlpack_info(capsule)
    del capsule  # returned to the producer; obj keeps the memory alive
    if tuple(on) != (device_type, device_id):  # the capsule is what NCCL would read from
        raise _invalid(argument, f"its DLPack capsule is on device (type {on[0]}, id {on[1]}) but its "
                                 f"__dlpack_device__ says (type {device_type}, id {device_id})")
    dtype = (code, bits, lanes) if complex_part_type((code, bits, lanes)) else \
        NcclDataType.from_dtype((code, bits, lanes), argument)
    itemsize = bits // 8
    if strides is not None and not _contiguous(shape, tuple(s * itemsize for s in strides), itemsize):
        raise _invalid(argument, f"a strided DLPack tensor (shape {shape}, strides {strides} elements); "
                       "NCCL needs contiguous memory")
    return _buffer(argument, address, _count(shape), dtype, device_id, readonly=readonly, owner=obj,
                   shape=tuple(shape))


def _host_memory(obj, argument, stream):
    raise _invalid(argument, f"a {type(obj).__name__} in host memory; NCCL needs CUDA memory "
                   "(a torch CUDA tensor, a CuPy array, or any CUDA-array-interface or DLPack object)")


def _by_instance(obj, argument, stream):
    """Types whose protocol attributes are set per instance."""
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cuda_array_interface(obj, argument, stream)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _from_dlpack(obj, argument, stream)
    if hasattr(obj, "__array_interface__") or _is_buffer(obj):
        return _host_memory(obj, argument, stream)
    raise _invalid(argument, f"{type(obj).__name__} is not a buffer (pass a torch tensor, a CuPy array, an object "
                   "with __cuda_array_interface__ or __dlpack__, or (pointer, count, dtype[, device]))")


def _is_buffer(obj) -> bool:
    try:
        memoryview(obj).release()
        return True
    except TypeError:
        return False


# Readers of classes defined above this module (core/memory.py's NcclMemoryBlock): class -> reader
# (obj, argument, stream) -> NcclBuffer, added with add_reader when that module is imported.
_readers: dict = {}


def add_reader(cls: type, reader) -> None:
    """Read instances of `cls` (and its subclasses) as buffers with `reader(obj, argument, stream)`."""
    _readers[cls] = reader
    _handlers.clear()


def _classify(tp):
    if issubclass(tp, NcclBuffer):
        return _from_buffer
    for cls, reader in _readers.items():
        if issubclass(tp, cls):
            return reader
    if issubclass(tp, (tuple, list)):
        return _from_spec
    torch = sys.modules.get("torch")
    if torch is not None and issubclass(tp, torch.Tensor):
        return _from_torch
    cupy = sys.modules.get("cupy")
    if cupy is not None and issubclass(tp, cupy.ndarray):
        return _from_cupy
    if hasattr(tp, "__cuda_array_interface__"):
        return _from_cuda_array_interface
    if hasattr(tp, "__dlpack__") and hasattr(tp, "__dlpack_device__"):
        return _from_dlpack
    return _by_instance


_handlers: dict = {}


def _handler(tp):
    handler = _handlers.get(tp)
    if handler is None:
        handler = _classify(tp)
        # torch / CuPy may be imported after a type was first seen: don't pin the generic reading
        if handler is not _by_instance:
            _handlers[tp] = handler
    return handler
