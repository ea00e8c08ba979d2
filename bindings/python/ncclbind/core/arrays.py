"""torch tensors and CuPy arrays in memory from ncclMemAlloc: what NCCL needs
for symmetric windows and NVLS buffers, allocated as easily as torch.empty.

    x = ncclbind.empty((4, 1024), "float32", like="torch", comm=comm)
    with comm.register_window(x, flags=ncclbind._nccl.NCCL_WIN_COLL_SYMMETRIC) as win:
        comm.all_reduce(x)

The memory is one NcclMemoryBlock (core/memory.py), which the array owns and
nobody else holds: torch keeps it as the owner of the tensor's storage (the
object behind torch.as_tensor's __cuda_array_interface__, released when the
storage is), CuPy as the owner of a cupy.cuda.UnownedMemory. When the last
array or view over it goes, the block goes, and NcclMemoryBlock frees its
memory once (close is idempotent and atomic). Everything that can be checked
(shape, dtype, device, the library) is checked before ncclMemAlloc; if wrapping
the memory fails after it, the memory is freed before the error is raised.
Like cudaFree, freeing does not wait for work still queued on the memory:
synchronize before dropping the last reference to an array NCCL still uses.
"""
from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Any, Literal, Sequence

from ..errors import NcclError, NcclInvalid
from ..nccl_enums import NcclDataType
from ..base.argument_checks import non_negative_ints
from ..base.cuda import CudaDeviceContext, device_count, get_device
from ..base.dtypes import complex_part_type
from .memory import NcclMemoryBlock, mem_alloc

if TYPE_CHECKING:
    from .communicator import Communicator

Library = Literal["torch", "cupy"]
_LIBRARIES = ("torch", "cupy")


def shape_of(shape, argument: str = "shape") -> tuple[int, ...]:
    """`shape` (an int or a sequence of ints) as a tuple of non-negative ints; NcclInvalid naming
    `argument` (and the index) otherwise."""
    if isinstance(shape, bool) or type(shape).__name__ == "bool_":
        raise NcclInvalid(f"{argument} is {shape!r}; it must be an int or a sequence of ints", argument)
    try:
        shape = (operator.index(shape),)
    except TypeError:
        if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
            raise NcclInvalid(f"{argument} must be an int or a sequence of ints, not {type(shape).__name__}",
                              argument) from None
    return tuple(non_negative_ints(shape, argument))


def _element(dtype) -> tuple[str, int, NcclDataType | None]:
    """(name, itemsize, NcclDataType or None for a complex type) of `dtype`, through
    the one dtype map: NCCL's types, and complex64/complex128 (carried as real pairs)."""
    part = complex_part_type(dtype)
    if part is not None:
        return f"complex{part.itemsize * 16}", 2 * part.itemsize, None
    nccl_type = NcclDataType.from_dtype(dtype, "dtype")
    return nccl_type.dtype_name, nccl_type.itemsize, nccl_type


def _library(like):
    if not isinstance(like, str) or like not in _LIBRARIES:
        raise NcclInvalid(f"like is {like!r}; it must be one of {', '.join(map(repr, _LIBRARIES))}", "like")
    import importlib
    try:
        return importlib.import_module(like)
    except ImportError as e:
        raise ImportError(f"ncclbind.empty(like={like!r}) needs {like}, which cannot be imported: {e}") from e


def _library_dtype(module, like: str, name: str, nccl_type: NcclDataType | None):
    if like == "torch":
        dtype = getattr(module, name, None)
        if dtype is None:
            raise NcclInvalid(f"dtype {name} is not a dtype of this torch", "dtype")
        return dtype
    if nccl_type is None:  # complex: NumPy's (CuPy's) own
        import numpy
        return numpy.dtype(name)
    return nccl_type.to_cupy()


def _device(device, comm) -> int:
    if comm is not None:
        from .communicator import Communicator
        if not isinstance(comm, Communicator):
            raise NcclInvalid(f"comm must be a Communicator, not {type(comm).__name__}", "comm")
        comm._live()
    visible = device_count()
    if device is None:
        device = comm.device if comm is not None else get_device() if visible else 0
    if isinstance(device, bool) or not isinstance(device, int) or device < 0:
        raise NcclInvalid(f"device must be a CUDA device ordinal (an int >= 0), not {device!r}", "device")
    if visible and device >= visible:
        raise NcclInvalid(f"device {device} does not exist; {visible} CUDA device(s) are visible", "device")
    if comm is not None and device != comm.device:
        raise NcclInvalid(f"device {device} is not the communicator's device {comm.device}", "device")
    return device


def _as_torch(torch, block: NcclMemoryBlock, dims: tuple[int, ...], dtype, nbytes: int):
    # The storage of `raw` holds `block` (torch keeps the __cuda_array_interface__
    # object until the storage is freed); views share that storage.
    with CudaDeviceContext(block.device):  # torchs that move the result to the current device: no copy
        raw = torch.as_tensor(block)
    if raw.data_ptr() != block.ptr or not raw.is_cuda or raw.get_device() != block.device:
        raise NcclError(f"torch.as_tensor did not wrap the NCCL memory at {block.ptr:#x} on device {block.device} "
                        f"in place (it gave {raw.data_ptr():#x} on {raw.device})")
    return raw[:nbytes].view(dtype).view(dims)


def _as_cupy(cupy, block: NcclMemoryBlock, dims: tuple[int, ...], dtype, nbytes: int):
    memory = cupy.cuda.UnownedMemory(block.ptr, block.nbytes, block, block.device)  # holds `block`
    return cupy.ndarray(dims, dtype=dtype, memptr=cupy.cuda.MemoryPointer(memory, 0))


def empty(shape: int | Sequence[int], dtype: Any, *, device: int | None = None, like: Library = "torch",
          comm: Communicator | None = None) -> Any:
    """A new uninitialized torch tensor (like="torch") or CuPy array
    (like="cupy") of `shape` and `dtype`, C-contiguous, in memory from
    ncclMemAlloc on `device`, freed with ncclMemFree when the last reference to
    it (or to any view of it) goes.

    shape: an int or a sequence of non-negative ints. dtype: any spelling of an
    NCCL data type that NcclDataType.from_dtype reads ("float32", torch.bfloat16,
    numpy.int64, ...), or complex64 / complex128. device: a CUDA ordinal
    (default: comm's device, else the current device). comm: a Communicator
    whose device the array must be on (it does not keep the communicator).
    Raises NcclInvalid naming the argument before anything is allocated, and
    ImportError when the library of `like` cannot be imported.

    The array can be registered as a window: comm.register_window(x, flags).
    Freeing does not wait for queued work: synchronize before dropping it."""
    dims = shape_of(shape)
    name, itemsize, nccl_type = _element(dtype)
    module = _library(like)
    library_dtype = _library_dtype(module, like, name, nccl_type)
    device = _device(device, comm)
    nbytes = math.prod(dims) * itemsize
    size = max(nbytes, 1)  # ncclMemAlloc takes no empty allocation; an empty array still gets its own
    block = mem_alloc(size, device)
    try:
        return (_as_torch if like == "torch" else _as_cupy)(module, block, dims, library_dtype, nbytes)
    except BaseException:
        block.close()  # the array was never handed out; the owner's later release finds nothing to free
        raise


def zeros(shape: int | Sequence[int], dtype: Any, *, device: int | None = None, like: Library = "torch",
          comm: Communicator | None = None) -> Any:
    """empty(...), filled with zeros on the library's current stream (torch's
    or CuPy's) of `device`."""
    array = empty(shape, dtype, device=device, like=like, comm=comm)
    if like == "torch":
        array.zero_()
    else:
        import cupy
        with cupy.cuda.Device(array.data.device_id):
            array.fill(0)
    return array
