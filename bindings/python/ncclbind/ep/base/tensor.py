"""EP tensor descriptors the generated layer takes: Tensor (an ncclEpTensor_t over memory someone
else owns, resolved by the one buffer resolver, base/buffer.py) and as_tensor, which reads any
tensor argument as a descriptor (ncclbind.ep.DevTensor, device memory with its library-allocated
descriptor, is one too: it is defined above, in ep/tensor.py)."""
from __future__ import annotations

import numbers
from array import array

from ... import _nccl_ep
from ...errors import NcclInvalid
from ...nccl_enums import NcclDataType
from ...base.buffer import NcclBuffer

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from typing import Any, Union

    from ...core.argument_types import DataTypeLike
    from ...core.resources import RegisteredWindowHandle
    from ..tensor import DevTensor

    # An ep.Tensor or ep.DevTensor, or anything the buffer resolver reads (a torch tensor, a CuPy
    # array, a DLPack or CUDA-array-interface producer, (pointer, shape, dtype[, device])).
    TensorLike = Union["Tensor", "DevTensor", Any]

# size_t, the element type of ncclEpTensor_t.sizes
_SIZE_T = "Q" if array("Q").itemsize == 8 else "L"


def _sizes_array(shape: tuple[int, ...]) -> array:
    return array(_SIZE_T, shape)


class DescriptorFields:
    """An EP tensor (Tensor, DevTensor): nccl.ep's names of an ncclEpTensor_t's fields, over a
    tensor's shape and dtype."""

    __slots__ = ()
    shape: tuple[int, ...]
    dtype: NcclDataType

    def _live(self) -> None:
        """Raise NcclInvalid if it can no longer be used (a destroyed DevTensor); a Tensor always can."""

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


class Tensor(DescriptorFields):
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


def as_tensor(obj: TensorLike, argument: str) -> Tensor | DevTensor:
    """obj as an EP tensor: itself when it is one (a Tensor, or a live DevTensor), else a Tensor
    resolved from it."""
    if isinstance(obj, DescriptorFields):
        obj._live()
        return obj
    return Tensor(obj, argument=argument)
