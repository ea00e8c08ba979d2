"""SymmAllocator: torch tensors carved out of an NcclSymPool, so that every one of them
lies inside the pool's symmetric window and NCCL's symmetric kernels can run on it.

    alloc = SymmAllocator(pool)                       # or pool.allocator
    x = alloc.empty((4, 256), torch.bfloat16)         # a SymmTensor
    comm.all_reduce(x)
    q = alloc.mxfp8((128, 64))                        # fp8 data + one E8M0 scale byte per 32
    comm.all_gather(q.allocation, out)                # data and scales in one call
    alloc.stats().fragmentation

The books (first fit, merging, reference counts, the eager and graph sub-pools) are
SubPoolBookkeeping's (freelist.py); this module wraps its blocks as tensors. Each block
is its own torch storage, whose owner releases the block's reference when torch frees
the storage: when the last tensor over it (the SymmTensor, any view of it, the mxfp8
data and scale views) goes. As with cudaFree, that does not wait for queued work:
synchronize before dropping the last view of a tensor NCCL still uses.

A block allocated while the current stream is capturing a CUDA graph comes from the
graph sub-pool (see freelist.py for why). Offsets are equal on every rank that makes the
same allocations in the same order, which NCCL's symmetric kernels need.
"""
from __future__ import annotations

import math
import operator
import weakref
from typing import Any

from ..errors import NcclInvalid
from .freelist import SubPoolBookkeeping, round_up

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from .freelist import SymmStats

# mxfp8: one E8M0 scale byte per MXFP8_BLOCK elements (OCP microscaling), stored after the
# data at an offset aligned to MXFP8_SCALE_ALIGNMENT bytes (16: one vector load).
MXFP8_BLOCK = 32
MXFP8_SCALE_ALIGNMENT = 16


def _shape(shape, argument: str = "shape") -> tuple[int, ...]:
    if isinstance(shape, bool):
        raise NcclInvalid(f"{argument} must be an int or a sequence of ints, not {shape!r}", argument)
    try:
        return (_extent(shape, argument),) if not hasattr(shape, "__iter__") else tuple(
            _extent(e, argument) for e in shape)
    except TypeError:
        raise NcclInvalid(f"{argument} must be an int or a sequence of ints, not {shape!r}", argument) from None


def _extent(value, argument: str) -> int:
    if isinstance(value, bool):
        raise TypeError
    value = operator.index(value)
    if value < 0:
        raise NcclInvalid(f"{argument} has a negative extent {value}", argument)
    return value


def _torch():
    import torch
    return torch


def _torch_dtype(torch, dtype, argument: str = "dtype"):
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        found = getattr(torch, dtype, None)
        if isinstance(found, torch.dtype):
            return found
    raise NcclInvalid(f"{argument} must be a torch.dtype or its name, not {dtype!r}", argument)


_SYMM_TENSOR_DOC = """A torch tensor over a block of a symmetric pool (see the module docstring).

Ops run as on a plain tensor (no __torch_function__ of its own: no cost per call); what
they return is a plain torch.Tensor, views included (a view still keeps the block alive
and lies inside the window). clone() is a plain tensor in memory of torch's allocator.

symm_offset: the block's byte offset in the pool (and window); symm_nbytes: the block's
size (an mxfp8 block holds more than the data); symm_layout: "plain" or "mxfp8";
allocation: the whole block as a uint8 SymmTensor; mx_data and mx_scales: an mxfp8
block's data (float8_e4m3fn, this tensor's shape) and scales (uint8 E8M0 bytes,
shape[:-1] + (shape[-1] // 32,))."""

_made: list = []  # the SymmTensor class once made


def _symm_tensor_class() -> type:
    """SymmTensor, defined on first use so that importing this module needs no torch.
    Without torch: a class that says so when used."""
    if _made:
        return _made[0]
    try:
        torch = _torch()
    except ImportError as e:
        reason = f"{type(e).__name__}: {e}"

        class SymmTensorWithoutTorch:
            def __new__(cls, *args: Any, **kwargs: Any):
                raise ImportError(f"ncclbind.SymmTensor is a torch.Tensor subclass; torch cannot be imported ({reason})")

        SymmTensorWithoutTorch.__doc__ = _SYMM_TENSOR_DOC + f"\n\nUnavailable here: torch cannot be imported ({reason})."
        SymmTensorWithoutTorch.__name__ = SymmTensorWithoutTorch.__qualname__ = "SymmTensor"
        SymmTensorWithoutTorch.__module__ = __name__
        return SymmTensorWithoutTorch

    class SymmTensor(torch.Tensor):
        __doc__ = _SYMM_TENSOR_DOC
        __torch_function__ = torch._C._disabled_torch_function_impl

        def clone(self, *args: Any, **kwargs: Any) -> Any:
            """A copy as a plain torch.Tensor, in memory of torch's allocator (outside the pool)."""
            out = torch.Tensor.clone(self, *args, **kwargs)
            return out.as_subclass(torch.Tensor) if type(out) is not torch.Tensor else out

        @property
        def allocation(self) -> Any:
            """The whole block as a uint8 SymmTensor (for mxfp8: data, padding and scales)."""
            whole = self._symm_allocation
            return self if whole is None else whole

        @property
        def mx_data(self) -> Any:
            """An mxfp8 block's data (this tensor)."""
            self._require_mxfp8("mx_data")
            return self

        @property
        def mx_scales(self) -> Any:
            """An mxfp8 block's scales: uint8 E8M0 bytes, one per 32 values of the last dimension."""
            self._require_mxfp8("mx_scales")
            return self._symm_mx_scales

        def _require_mxfp8(self, what: str) -> None:
            if self.symm_layout != "mxfp8":
                raise NcclInvalid(f"{what}: this SymmTensor has the {self.symm_layout} layout, not mxfp8", what)

        # A copy (pickle, copy.deepcopy) is a plain tensor: the pool, its window and its books
        # are this process's and this communicator's, and are not copied.
        def __reduce_ex__(self, protocol):
            return self.clone().__reduce_ex__(protocol)

        def __deepcopy__(self, memo):
            return self.clone()

    SymmTensor.__module__ = __name__
    SymmTensor.__qualname__ = "SymmTensor"
    _made.append(SymmTensor)
    return SymmTensor


if TYPE_CHECKING:  # what type checkers see; at run time the class is made by _symm_tensor_class()
    import torch

    class SymmTensor(torch.Tensor):
        symm_offset: int
        symm_nbytes: int
        symm_layout: str
        symm_allocator: SymmAllocator

        def clone(self, *args: Any, **kwargs: Any) -> torch.Tensor: ...
        @property
        def allocation(self) -> SymmTensor: ...
        @property
        def mx_data(self) -> SymmTensor: ...
        @property
        def mx_scales(self) -> SymmTensor: ...
else:
    def __getattr__(name: str) -> object:
        if name == "SymmTensor":
            return _symm_tensor_class()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _BlockOwner:
    """What torch keeps with a block's storage: its memory, read through the CUDA array
    interface. When torch frees the storage it drops this object, and the finalizer
    returns the block's reference to the books."""

    __slots__ = ("ptr", "nbytes", "allocator", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, allocator):
        self.ptr, self.nbytes, self.allocator = ptr, nbytes, allocator

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False), "version": 3,
                "strides": None, "stream": None}


class _HostBlock:
    """MockAllocator's view of a block for NumPy (host memory); it holds the owner."""

    __slots__ = ("owner",)

    def __init__(self, owner: _BlockOwner):
        self.owner = owner

    @property
    def __array_interface__(self) -> dict:
        return {"shape": (self.owner.nbytes,), "typestr": "|u1", "data": (self.owner.ptr, False), "version": 3}


class SymmAllocator:
    """Allocates SymmTensors from a pool: anything with `ptr`, `nbytes` and `device`
    (an NcclSymPool; MockAllocator uses host memory).

    alignment: every block starts at a multiple of it from the pool's base (default:
    NCCL's window alignment, nccl.h's NCCL_WIN_REQUIRED_ALIGNMENT; a power of two).
    graph_bytes: the size of the sub-pool for allocations made while a CUDA graph is
    being captured (default: a quarter of the pool, rounded down to the alignment)."""

    def __init__(self, pool: Any, *, alignment: int | None = None, graph_bytes: int | None = None):
        if alignment is None:
            from .pool import window_alignment
            alignment = window_alignment()
        if type(alignment) is bool or not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise NcclInvalid(f"alignment must be a power of two, not {alignment!r}", "alignment")
        for name in ("ptr", "nbytes", "device"):
            if not hasattr(pool, name):
                raise NcclInvalid(f"pool has no {name!r}: pass an NcclSymPool", "pool")
        if not pool.ptr:
            raise NcclInvalid("pool is closed (its address is 0)", "pool")
        size = pool.nbytes - pool.nbytes % alignment
        if pool.ptr % alignment:
            raise NcclInvalid(f"pool address {pool.ptr:#x} is not a multiple of the alignment {alignment}", "alignment")
        if graph_bytes is None:
            graph_bytes = (size // 4) - (size // 4) % alignment
        self.pool = pool
        self.device = pool.device
        self.alignment = alignment
        self.books = SubPoolBookkeeping(pool.ptr, size, alignment, graph_bytes)

    # ---- what the pool is under torch ----------------------------------------------------

    def _capturing(self) -> bool:
        torch = _torch()
        return bool(torch.cuda.is_current_stream_capturing())

    def _wrap(self, owner: _BlockOwner):
        """A uint8 tensor over the owner's memory, in a storage of its own that holds owner."""
        torch = _torch()
        from ..base.cuda import CudaDeviceContext
        with CudaDeviceContext(self.device):
            raw = torch.as_tensor(owner)
        if raw.data_ptr() != owner.ptr:
            raise RuntimeError(f"torch.as_tensor copied a symmetric block ({raw.data_ptr():#x}, "
                               f"the block is at {owner.ptr:#x})")
        return raw

    # ---- allocation ---------------------------------------------------------------------------

    def _block(self, nbytes: int, captured: bool | None):
        """A new block of nbytes as a uint8 tensor (its storage owns the block's reference)."""
        if captured is None:
            captured = self._capturing()
        address = self.books.allocate(nbytes, captured=bool(captured))
        try:
            owner = _BlockOwner(address, max(nbytes, 1), self)
            weakref.finalize(owner, self.books.release, address)
        except BaseException:
            self.books.release(address)
            raise
        # from here the finalizer returns the reference when owner goes
        return self._wrap(owner)[:nbytes], address

    def _symm(self, tensor, raw, address: int, layout: str):
        cls = _symm_tensor_class()
        out = tensor.as_subclass(cls)
        out.symm_offset = self.books.offset(address)
        out.symm_nbytes = self.books.block_size(address)
        out.symm_layout = layout
        out.symm_allocator = self
        allocation = raw.as_subclass(cls)
        allocation.symm_offset, allocation.symm_nbytes = out.symm_offset, out.symm_nbytes
        allocation.symm_layout, allocation.symm_allocator = "plain", self
        allocation._symm_allocation = None  # itself (no reference cycle: freeing must not wait for the GC)
        out._symm_allocation = allocation
        return out

    def empty(self, shape: int | tuple[int, ...], dtype: Any = "uint8", *, captured: bool | None = None) -> Any:
        """A new uninitialized SymmTensor of shape and dtype (a torch.dtype or its name).
        captured: take it from the graph sub-pool (default: whether the current stream
        is capturing a CUDA graph)."""
        torch = _torch()
        dims = _shape(shape)
        dtype = _torch_dtype(torch, dtype)
        itemsize = torch.empty((), dtype=dtype, device="meta").element_size()
        nbytes = math.prod(dims) * itemsize
        raw, address = self._block(nbytes, captured)
        return self._symm(raw.view(dtype).view(dims), raw, address, "plain")

    def zeros(self, shape: int | tuple[int, ...], dtype: Any = "uint8", *, captured: bool | None = None) -> Any:
        """empty(...), zero-filled on torch's current stream."""
        out = self.empty(shape, dtype, captured=captured)
        out.allocation.zero_()
        return out

    def mxfp8(self, shape: int | tuple[int, ...], *, captured: bool | None = None) -> Any:
        """A new SymmTensor in the blocked mxfp8 layout: prod(shape) float8_e4m3fn values,
        then (at an offset aligned to 16 bytes) one uint8 E8M0 scale per 32 values along
        the last dimension, which must be a multiple of 32. The tensor is the data;
        .mx_scales the scales; .allocation both, as the uint8 bytes NCCL moves."""
        torch = _torch()
        dims = _shape(shape)
        if not dims or dims[-1] % MXFP8_BLOCK:
            raise NcclInvalid(f"shape {dims}: mxfp8 needs a last dimension that is a multiple of {MXFP8_BLOCK}",
                              "shape")
        fp8 = getattr(torch, "float8_e4m3fn", None)
        if fp8 is None:
            raise NcclInvalid("this torch has no float8_e4m3fn", "dtype")
        count = math.prod(dims)
        scales_at = round_up(count, MXFP8_SCALE_ALIGNMENT)
        scale_dims = dims[:-1] + (dims[-1] // MXFP8_BLOCK,)
        nbytes = scales_at + count // MXFP8_BLOCK
        raw, address = self._block(nbytes, captured)
        out = self._symm(raw[:count].view(fp8).view(dims), raw, address, "mxfp8")
        cls = type(out)
        scales = raw[scales_at:nbytes].view(scale_dims).as_subclass(cls)
        scales.symm_offset = out.symm_offset + scales_at
        scales.symm_nbytes, scales.symm_layout, scales.symm_allocator = out.symm_nbytes, "plain", self
        scales._symm_allocation = out.allocation
        out._symm_mx_scales = scales
        return out

    # ---- what it holds ------------------------------------------------------------------------

    def stats(self) -> SymmStats:
        """In use, free, largest free block and fragmentation, in all and per sub-pool."""
        return self.books.stats()

    def __repr__(self) -> str:
        s = self.stats()
        return (f"{type(self).__name__}(in_use={s.in_use}, free={s.free}, largest_free={s.largest_free}, "
                f"allocations={s.allocations}, alignment={self.alignment})")


class _HostPool:
    """MockAllocator's pool: host memory from a torch uint8 CPU tensor, aligned."""

    def __init__(self, nbytes: int, alignment: int):
        torch = _torch()
        self.memory = torch.zeros(nbytes + alignment, dtype=torch.uint8)
        base = self.memory.data_ptr()
        self.offset = round_up(base, alignment) - base
        self.tensor = self.memory[self.offset:self.offset + nbytes]
        self.ptr, self.nbytes, self.device = base + self.offset, nbytes, None


class MockAllocator(SymmAllocator):
    """A SymmAllocator over host memory (a torch CPU uint8 tensor, `pool_tensor`) instead
    of an NcclSymPool: SymmTensors, views, mxfp8 and freeing without a communicator or a
    GPU. `capturing` stands in for torch.cuda.is_current_stream_capturing()."""

    def __init__(self, nbytes: int = 1 << 20, *, alignment: int = 4096, graph_bytes: int | None = None):
        if type(nbytes) is bool or not isinstance(nbytes, int) or nbytes <= 0:
            raise NcclInvalid(f"nbytes must be a positive int, not {nbytes!r}", "nbytes")
        if type(alignment) is bool or not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise NcclInvalid(f"alignment must be a power of two, not {alignment!r}", "alignment")
        host = _HostPool(round_up(nbytes, alignment), alignment)
        super().__init__(host, alignment=alignment, graph_bytes=graph_bytes)
        self.pool_tensor = host.tensor
        self.capturing = False

    def _capturing(self) -> bool:
        return self.capturing

    def _wrap(self, owner: _BlockOwner):
        import numpy
        torch = _torch()
        return torch.from_numpy(numpy.asarray(_HostBlock(owner)))
