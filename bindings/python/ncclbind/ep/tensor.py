"""EP tensor descriptors: Tensor (an ncclEpTensor_t over memory someone else owns, resolved by the
one buffer resolver, core/buffer.py) and DevTensor (device memory and its library-allocated
descriptor, owned together)."""
from __future__ import annotations

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


class Tensor:
    """An ncclEpTensor_t describing memory the caller owns: `obj` is resolved once (pointer, dtype,
    shape, device; it must be C-contiguous, in CUDA memory) and kept alive by this object.

    window / window_offset: a registered window (ncclbind.RegisteredWindowHandle) that holds the
    memory, for NCCL EP's zero-copy paths; the window must outlive every call that uses it."""

    __slots__ = ("buffer", "shape", "dtype", "device", "_sizes", "_record", "_window", "__weakref__")

    def __init__(self, obj: Any, *, argument: str = "tensor", window: RegisteredWindowHandle | None = None,
                 window_offset: int = 0) -> None:
        buffer = NcclBuffer.resolve(obj, argument)
        if buffer.complex:
            raise NcclInvalid(f"{argument}: a complex tensor ({buffer.complex_dtype_name}); NCCL EP moves real types",
                              argument)
        shape = buffer.shape
        if not shape:
            raise NcclInvalid(f"{argument}: a 0-dimensional tensor; NCCL EP tensors have one or more dimensions",
                              argument)
        self.buffer, self.shape, self.dtype, self.device = buffer, shape, buffer.dtype, buffer.device
        self._sizes = _sizes_array(shape)
        record = _nccl_ep.nccl_ep_tensor_init()
        record.ndim = len(shape)
        record.datatype = int(buffer.dtype)
        record.data = buffer.ptr
        record.sizes = self._sizes.buffer_info()[0]
        self._window = window
        if window is not None:
            if type(window_offset) is not int or window_offset < 0:
                raise NcclInvalid(f"window_offset must be an int >= 0, not {window_offset!r}", "window_offset")
            record.win_hdl = window.window
            record.win_offset = window_offset
        elif window_offset:
            raise NcclInvalid("window_offset is for a window-backed tensor: pass window too", "window_offset")
        self._record = record

    @property
    def address(self) -> int:
        """The ncclEpTensor_t's address (what NCCL EP's calls take)."""
        return self._record.address

    @property
    def ptr(self) -> int:
        """The data's device address."""
        return self.buffer.ptr

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"ep.Tensor(shape={self.shape}, dtype={self.dtype.dtype_name}, device={self.device}, ptr={self.ptr:#x})"


class DevTensor:
    """Device memory of `shape` and `dtype` (ncclMemAlloc on `device`, default the current one) and
    its NCCL EP descriptor (ncclEpTensorAlloc), owned together: destroy() (or the end of a with
    block) releases both. Usable wherever an EP tensor is taken; .buffer reads it as an NcclBuffer
    (CUDA array interface, 1-D)."""

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
        """The data's device address."""
        self._live()
        return self._block.ptr

    @property
    def ndim(self) -> int:
        return len(self.shape)

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
