"""Memory from ncclMemAlloc: what NCCL needs for NVLS buffers and symmetric
windows (and can register without copies). mem_alloc / mem_free are the plain
calls; NcclMemoryResource hands out NcclMemoryBlock objects that free
themselves and read as buffers (CUDA array interface, uint8)."""
from __future__ import annotations

import threading
import weakref

from .. import _nccl
from ..errors import NcclInvalid
from ..base.buffer import NcclBuffer, add_reader
from ..base.cuda import CudaDeviceContext, get_device

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from .argument_types import DataTypeLike, StreamLike


def _alloc(nbytes: int) -> int:
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0:
        raise NcclInvalid(f"size must be a positive int, not {nbytes!r}", "size")
    return _nccl.mem_alloc(nbytes)


def mem_alloc(size: int, device: int | None = None) -> NcclMemoryBlock:
    """ncclMemAlloc of `size` bytes on `device` (default: the current one), as nccl4py's
    mem_alloc: a buffer (NcclMemoryBlock: .handle / .ptr, .size, .device_id, close(), CUDA
    array interface) freed by mem_free, close() or garbage collection."""
    if device is not None and (isinstance(device, bool) or not isinstance(device, int) or device < 0):
        raise NcclInvalid(f"device must be a CUDA device ordinal (int >= 0) or None, not {device!r}", "device")
    with CudaDeviceContext(device):
        ptr = _alloc(size)
        return NcclMemoryBlock(ptr, size, get_device() if device is None else device)


def mem_free(buf: NcclMemoryBlock | int) -> None:
    """Free what mem_alloc returned (its close()); a bare address is ncclMemFree'd as it is."""
    if isinstance(buf, NcclMemoryBlock):
        buf.close()
    else:
        _nccl.mem_free(buf)


# Taking a block's address and clearing it is one step under this lock, so that
# close() from two threads (or close() and the garbage collector) frees once.
# Reentrant: a collection inside the step may close another block.
_closing = threading.RLock()


class NcclMemoryBlock:
    """`nbytes` of device memory from ncclMemAlloc at `ptr` on `device`.
    Freed by close(), a with block, or garbage collection."""

    __slots__ = ("ptr", "nbytes", "device", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, device: int):
        self.ptr, self.nbytes, self.device = ptr, nbytes, device

    @property
    def closed(self) -> bool:
        """True once the block is freed."""
        return not self.ptr

    def close(self) -> None:
        """Free the block now (ncclMemFree), once however many threads close it."""
        with _closing:
            ptr, self.ptr = self.ptr, 0
        if ptr:
            mem_free(ptr)

    @property
    def handle(self) -> int:
        """The address (cuda.core Buffer's name; 0 once freed)."""
        return self.ptr

    @property
    def size(self) -> int:
        """Bytes (cuda.core Buffer's name for nbytes)."""
        return self.nbytes

    @property
    def device_id(self) -> int:
        """The CUDA device ordinal (cuda.core Buffer's name)."""
        return self.device

    def as_buffer(self, dtype: DataTypeLike = "uint8", count: int | None = None) -> NcclBuffer:
        """The block (or its first `count` elements) as an NcclBuffer of dtype."""
        if not self.ptr:
            raise NcclInvalid("the memory block was freed", "block")
        buf = NcclBuffer(self.ptr, 0, dtype, self.device, owner=self)
        fits = self.nbytes // buf.dtype.itemsize
        count = fits if count is None else count
        if not isinstance(count, int) or isinstance(count, bool):
            raise NcclInvalid(f"count must be an int, not {type(count).__name__}", "count")
        if not 0 <= count <= fits:
            raise NcclInvalid(f"count {count} does not fit {self.nbytes} bytes of {buf.dtype.name}", "count")
        buf.count = count
        return buf

    @property
    def __cuda_array_interface__(self) -> dict:
        if not self.ptr:
            raise AttributeError("the memory block was freed")
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False), "version": 3,
                "strides": None, "stream": None}

    def __enter__(self) -> NcclMemoryBlock:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter or CUDA shutdown: nothing left to free
            pass

    def __repr__(self) -> str:
        state = "freed" if not self.ptr else f"ptr={self.ptr:#x}"
        return f"NcclMemoryBlock({state}, nbytes={self.nbytes}, device={self.device})"


def _read_block(block: NcclMemoryBlock, argument: str, stream: object) -> NcclBuffer:
    return block.as_buffer("uint8")  # its device is known: no CUDA query


add_reader(NcclMemoryBlock, _read_block)  # a block is a buffer (uint8) wherever one is taken


class NcclMemoryResource:
    """A memory resource over ncclMemAlloc / ncclMemFree for one device
    (default: the current device when the resource is made). Used as a
    context manager (or close()), it frees the blocks still out when it closes.

        with NcclMemoryResource(device=0) as pool:
            block = pool.allocate(1 << 20)
            x = torch.as_tensor(block).view(torch.float32)
    """

    def __init__(self, device: int | None = None):
        self.device = get_device() if device is None else device
        self._blocks = weakref.WeakSet()

    def allocate(self, nbytes: int, stream: StreamLike = None) -> NcclMemoryBlock:
        """A new block (ncclMemAlloc is synchronous; stream is accepted for the
        memory-resource protocol and not used)."""
        with CudaDeviceContext(self.device):
            block = NcclMemoryBlock(_alloc(nbytes), nbytes, self.device)
        self._blocks.add(block)
        return block

    def deallocate(self, block: NcclMemoryBlock, nbytes: int | None = None, stream: StreamLike = None) -> None:
        """Free a block (or a bare address from allocate)."""
        if isinstance(block, NcclMemoryBlock):
            block.close()
            self._blocks.discard(block)
        else:
            for known in list(self._blocks):
                if known.ptr == block:
                    known.close()
                    self._blocks.discard(known)
                    return
            _nccl.mem_free(block)

    def close(self) -> None:
        """Free every block of this resource that is still allocated."""
        for block in list(self._blocks):
            block.close()
        self._blocks.clear()

    def __enter__(self) -> NcclMemoryResource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"NcclMemoryResource(device={self.device}, blocks={len(self._blocks)})"
