"""ncclbind.ep.DevTensor: device memory (ncclMemAlloc) and its library-allocated NCCL EP descriptor,
owned together. ep.Tensor, a descriptor over memory someone else owns, is ep/base/tensor.py's."""
from __future__ import annotations

from .. import _nccl_ep
from ..base.buffer import NcclBuffer
from ..base.lifetime import Destroyable
from .base.tensor import DescriptorFields
from ..errors import NcclInvalid
from ..nccl_enums import NcclDataType

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from ..core.argument_types import DataTypeLike
    from ..core.memory import NcclMemoryBlock


class DevTensor(DescriptorFields, Destroyable):
    """Device memory of `shape` and `dtype` (ncclMemAlloc on `device`, default the current one) and
    its NCCL EP descriptor (ncclEpTensorAlloc), owned together: destroy() (or the end of a with
    block) releases both. Usable wherever an EP tensor is taken; .buffer reads it as an NcclBuffer
    (CUDA array interface, 1-D). ptr / address is the descriptor's address, data the memory's."""

    __slots__ = ("shape", "dtype", "device", "_block", "_descriptor", "_record", "__weakref__")
    _OWNED = "_descriptor"

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

    def __repr__(self) -> str:
        state = "destroyed" if not self._descriptor else f"ptr={self._block.ptr:#x}"
        return f"ep.DevTensor(shape={self.shape}, dtype={self.dtype.dtype_name}, device={self.device}, {state})"
