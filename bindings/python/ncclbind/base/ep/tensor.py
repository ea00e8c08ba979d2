"""EP tensor descriptors: Tensor (an ncclEpTensor_t over memory someone else owns, resolved by the
one buffer resolver, core/buffer.py) and DevTensor (device memory and its library-allocated
descriptor, owned together)."""
from __future__ import annotations

import numbers
from array import array

from .. import _nccl_ep
from ..core.buffer import NcclBuffer
from ..errors import NcclInvalid
from ..nccl_enums import NcclDataType

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from typing import Any, Union

    from ..core.argument_types import DataTypeLike
    from ..core.memory import NcclMemoryBlock
    from ..core.resources import RegisteredWindowHandle

    # An ep.Tensor or ep.DevTensor, or anything the buffer resolver reads (a torch tensor, a CuPy
    # array, a DLPack or CUDA-array-interface producer, (pointer, shape, dtype[, device])).
    TensorLike = Union["Tensor", "DevTensor", Any]

# size_t, the element type of ncclEpTensor_t.sizes
_SIZE_T = "Q" if array("Q").itemsize == 8 else "L"


def _sizes_array(shape: tuple[int, ...]) -> array:
    return array(_SIZE_T, shape)


class _DescriptorFields:
    """nccl.ep's names of an ncclEpTensor_t's fields, over a tensor's shape and dtype."""

    __slots__ = ()
    shape: tuple[int, ...]
    dtype: NcclDataType

    @property
    def sizes(self) -> tuple[int, ...]:
        """The descriptor's sizes field: the extents."""
        return self.shape

    @property
    def datatype(self) -> NcclDataType:
        """The descriptor's datatype field, an NcclDataType."""
        return self.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)


class Tensor(_DescriptorFields):
    """An ncclEpTensor_t describing memory the caller owns (nccl-extensions' nccl.ep.Tensor):
    `buffer` is resolved once by the one buffer resolver (a torch tensor, a CuPy array, a DLPack or
    CUDA-array-interface producer, an explicit (pointer, shape, dtype[, device]); C-contiguous, in
    CUDA memory) and kept alive by this object; or `buffer` is a raw device address (an int), with
    `dtype` and `shape` (both required then, and only then; the device is unknown, so not checked).

    window / window_offset: a registered window (ncclbind.RegisteredWindowHandle) that holds the
    memory, for NCCL EP's zero-copy paths, and the byte offset in it (default 0); the window must
    outlive every call that uses it.

    ptr (and address) is the descriptor's address, what NCCL EP's calls take; data, sizes and
    datatype are its fields (the device address, the extents, the NcclDataType); buffer is the
    object given (None for a raw address)."""

    __slots__ = ("_given", "_resolved", "shape", "dtype", "device", "_sizes", "_record", "_window", "__weakref__")

    def __init__(self, buffer: Any, *, dtype: DataTypeLike | None = None,
                 shape: tuple[int, ...] | list[int] | None = None, window: RegisteredWindowHandle | None = None,
                 window_offset: int | None = None, argument: str = "tensor") -> None:
        if isinstance(buffer, numbers.Integral) and not isinstance(buffer, bool):
            for name, value in (("dtype", dtype), ("shape", shape)):
                if value is None:
                    raise NcclInvalid(f"{argument}: a raw device address (an int) needs dtype= and shape=", name)
            if not isinstance(shape, (tuple, list)) or not shape or not all(type(e) is int and e >= 0 for e in shape):
                raise NcclInvalid(f"shape must be one or more extents, each an int >= 0, not {shape!r}", "shape")
            if isinstance(dtype, int) and not isinstance(dtype, bool) and \
                    int(dtype) not in {int(m) for m in NcclDataType}:
                raise NcclInvalid(f"dtype: {int(dtype)} is not an NcclDataType value", "dtype")
            resolved = NcclBuffer.resolve((int(buffer), tuple(shape), NcclDataType.from_dtype(dtype, "dtype")),
                                          argument)
            given = None
        else:
            for name, value in (("dtype", dtype), ("shape", shape)):
                if value is not None:
                    raise NcclInvalid(f"{argument}: {name}= is for a raw device address (an int); "
                                      f"{type(buffer).__name__} gives its own", name)
            resolved = NcclBuffer.resolve(buffer, argument)
            given = buffer
        if resolved.complex:
            raise NcclInvalid(f"{argument}: a complex tensor ({resolved.complex_dtype_name}); NCCL EP moves real types",
                              argument)
        extents = resolved.shape
        if not extents:
            raise NcclInvalid(f"{argument}: a 0-dimensional tensor; NCCL EP tensors have one or more dimensions",
                              argument)
        self._given, self._resolved = given, resolved
        self.shape, self.dtype, self.device = extents, resolved.dtype, resolved.device
        self._sizes = _sizes_array(extents)
        record = _nccl_ep.nccl_ep_tensor_init()
        record.ndim = len(extents)
        record.datatype = int(resolved.dtype)
        record.data = resolved.ptr
        record.sizes = self._sizes.buffer_info()[0]
        self._window = window
        if window is not None:
            offset = 0 if window_offset is None else window_offset
            if type(offset) is not int or offset < 0:
                raise NcclInvalid(f"window_offset must be an int >= 0, not {window_offset!r}", "window_offset")
            record.win_hdl = window.window
            record.win_offset = offset
        elif window_offset:
            raise NcclInvalid("window_offset is for a window-backed tensor: pass window too", "window_offset")
        self._record = record

    @property
    def ptr(self) -> int:
        """The ncclEpTensor_t's address (what NCCL EP's calls take; nccl.ep's Tensor.ptr)."""
        return self._record.address

    @property
    def address(self) -> int:
        """The ncclEpTensor_t's address (the same as ptr)."""
        return self._record.address

    @property
    def data(self) -> int:
        """The descriptor's data field: the device address of the elements."""
        return self._record.data

    @property
    def buffer(self) -> Any:
        """The object given (kept alive here); None for a raw device address."""
        return self._given

    def __repr__(self) -> str:
        return (f"ep.Tensor(shape={self.shape}, dtype={self.dtype.dtype_name}, device={self.device}, "
                f"data={self.data:#x})")


class DevTensor(_DescriptorFields):
    """Device memory of `shape` and `dtype` (ncclMemAlloc on `device`, default the current one) and
    its NCCL EP descriptor (ncclEpTensorAlloc), owned together: destroy() (or the end of a with
    block) releases both. Usable wherever an EP tensor is taken; .buffer reads it as an NcclBuffer
    (CUDA array interface, 1-D). ptr / address is the descriptor's address, data the memory's."""

    __slots__ = ("shape", "dtype", "device", "_block", "_descriptor", "_record", "__weakref__")

    def __init__(self, shape: tuple[int, ...] | list[int], dtype: DataTypeLike, *, device: int | None = None) -> None:
        from ..core.memory import NcclMemoryResource
        if not isinstance(shape, (tuple, list)) or not shape or \
                not all(type(e) is int and e >= 0 for e in shape):
            raise NcclInvalid(f"shape must be one or more extents, each an int >= 0, not {shape!r}", "shape")
        if device is not None and (type(device) is not int or device < 0):
            raise NcclInvalid(f"device must be a CUDA ordinal (an int >= 0) or None, not {device!r}", "device")
        self.dtype = NcclDataType.from_dtype(dtype, "dtype")
        self.shape = tuple(shape)
        count = 1
        for e in self.shape:
            count *= e
        self._descriptor = 0
        block: NcclMemoryBlock = NcclMemoryResource(device).allocate(max(count * self.dtype.itemsize, 1))
        try:
            self._descriptor = _nccl_ep.tensor_alloc(int(self.dtype), list(self.shape), None)
        except BaseException:
            block.close()  # nothing half-done: the memory goes with the failed descriptor
            raise
        self._block, self.device = block, block.device
        self._record = _nccl_ep.ncclEpTensor_t.from_address(self._descriptor, owner=self)
        self._record.data = block.ptr

    @property
    def closed(self) -> bool:
        return not self._descriptor

    def _live(self) -> None:
        if not self._descriptor:
            raise NcclInvalid("the DevTensor was destroyed", "tensor")

    @property
    def address(self) -> int:
        """The descriptor's address (ncclEpTensor_t *)."""
        self._live()
        return self._descriptor

    @property
    def ptr(self) -> int:
        """The descriptor's address (ncclEpTensor_t *), as ep.Tensor.ptr."""
        return self.address

    @property
    def data(self) -> int:
        """The data's device address (the descriptor's data field)."""
        self._live()
        return self._block.ptr

    @property
    def nbytes(self) -> int:
        count = 1
        for e in self.shape:
            count *= e
        return count * self.dtype.itemsize

    @property
    def buffer(self) -> NcclBuffer:
        """The data as a buffer (C-contiguous, this DevTensor keeps it alive)."""
        self._live()
        count = self.nbytes // self.dtype.itemsize
        return NcclBuffer(self._block.ptr, count, self.dtype, self.device, owner=self, shape=self.shape)

    @property
    def __cuda_array_interface__(self) -> dict:
        interface = self.buffer.__cuda_array_interface__
        interface["shape"] = self.shape
        return interface

    def destroy(self) -> None:
        """Release the descriptor (ncclEpTensorDestroy) and the memory; a second call does nothing."""
        descriptor, self._descriptor = self._descriptor, 0
        if not descriptor:
            return
        try:
            _nccl_ep.tensor_destroy(descriptor)
        finally:
            self._block.close()

    def __enter__(self) -> DevTensor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()

    def __del__(self) -> None:
        if getattr(self, "_descriptor", 0):
            import warnings
            warnings.warn(f"{self!r} was not destroyed; call destroy() or use a with block", ResourceWarning,
                          stacklevel=2)

    def __repr__(self) -> str:
        state = "destroyed" if not self._descriptor else f"ptr={self._block.ptr:#x}"
        return f"ep.DevTensor(shape={self.shape}, dtype={self.dtype.dtype_name}, device={self.device}, {state})"


def as_tensor(obj: TensorLike, argument: str) -> Tensor | DevTensor:
    """obj as an EP tensor: itself when it is one, else a Tensor resolved from it."""
    if type(obj) is Tensor or type(obj) is DevTensor:
        if type(obj) is DevTensor:
            obj._live()
        return obj
    return Tensor(obj, argument=argument)
