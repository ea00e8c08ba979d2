"""NcclSymPool: one block of ncclMemAlloc memory per communicator, registered as a
symmetric window (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC), with a device
communicator (ncclDevCommCreate) for kernels that use the window.

    pool = NcclSymPool(comm, 64 << 20)          # collective: every rank, the same size
    x = pool.tensor("float32", 1024)            # a SymmTensor inside the window
    comm.all_reduce(x)                          # NCCL's symmetric kernels where they apply
    pool.close()                                # window, device communicator, memory

Made in the order memory, device communicator, window; torn down in the reverse order
(window deregistered, device communicator destroyed, memory freed), also when making it
fails half-way. When the communicator is destroyed first, it releases the window and the
device communicator itself; close() then only frees the memory.

LSA multimem (NVLink SHARP multicast) is off unless asked for with lsa_multimem=True:
creating a multicast object needs a machine that allows it.
"""
from __future__ import annotations

from .. import _nccl
from ..errors import NcclInvalid
from ..base.cuda import CudaDeviceContext
from ..core.memory import NcclMemoryBlock, mem_alloc  # noqa: F401 (NcclMemoryBlock: annotations)
from .freelist import round_up

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from typing import Any

    from ..core.communicator import Communicator
    from ..core.dev_comm import DevCommResource, NCCLDevCommRequirements
    from ..core.resources import RegisteredWindowHandle
    from .allocator import SymmAllocator, SymmTensor


def window_alignment() -> int:
    """What NCCL asks of a window's address and size (nccl.h's NCCL_WIN_REQUIRED_ALIGNMENT)."""
    return int(_nccl.NCCL_WIN_REQUIRED_ALIGNMENT)


class NcclSymPool:
    """`nbytes` (rounded up to NCCL's window alignment) of ncclMemAlloc memory on the
    communicator's device, registered as a symmetric window, with a device communicator.

    comm: the Communicator (collective: every rank makes its pool with the same nbytes).
    lsa_multimem: ask the device communicator for LSA multimem (off by default: it
    creates a multicast object, which some machines forbid). dev_comm: False makes no
    device communicator. requirements: an NCCLDevCommRequirements to use as it is
    (lsa_multimem is then ignored). flags: the window flags (default
    NCCL_WIN_COLL_SYMMETRIC).

    It reads as a uint8 buffer (__cuda_array_interface__) for every collective;
    as_tensor() is the whole pool as a torch uint8 tensor, without a copy; tensor() and
    allocator hand out SymmTensors from it."""

    def __init__(self, comm: Communicator, nbytes: int, *, lsa_multimem: bool = False, dev_comm: bool = True,
                 requirements: NCCLDevCommRequirements | None = None, flags: int | None = None):
        from ..core.communicator import Communicator
        if not isinstance(comm, Communicator):
            raise NcclInvalid(f"comm must be a Communicator, not {type(comm).__name__}", "comm")
        if type(nbytes) is bool or not isinstance(nbytes, int) or nbytes <= 0:
            raise NcclInvalid(f"nbytes must be a positive int, not {nbytes!r}", "nbytes")
        if not isinstance(lsa_multimem, bool):
            raise NcclInvalid(f"lsa_multimem must be a bool, not {lsa_multimem!r}", "lsa_multimem")
        flags = int(_nccl.NCCL_WIN_COLL_SYMMETRIC) if flags is None else flags
        if type(flags) is bool or not isinstance(flags, int) or flags < 0:
            raise NcclInvalid(f"flags must be window flags (an int >= 0), not {flags!r}", "flags")
        comm._live()
        self.comm = comm
        self.device = comm.device
        self.nbytes = round_up(nbytes, window_alignment())
        self.lsa_multimem = lsa_multimem
        self.flags = flags
        self.block: NcclMemoryBlock | None = None
        self.dev_comm: DevCommResource | None = None
        self.window: RegisteredWindowHandle | None = None
        self._allocator: SymmAllocator | None = None
        with CudaDeviceContext(self.device):
            self.block = mem_alloc(self.nbytes, self.device)
        try:
            if dev_comm:
                if requirements is None:
                    from ..core.dev_comm import NCCLDevCommRequirements
                    requirements = NCCLDevCommRequirements(lsaMultimem=lsa_multimem)
                self.dev_comm = comm.create_dev_comm(requirements)
            self.window = comm.register_window(self.block, flags)
        except BaseException:
            self.close()
            raise

    # ---- what it is ----------------------------------------------------------------

    @property
    def ptr(self) -> int:
        """The pool's device address (0 once closed)."""
        return self.block.ptr if self.block is not None else 0

    @property
    def closed(self) -> bool:
        """True once close() ran (the memory is freed)."""
        return self.block is None or self.block.closed

    @property
    def __cuda_array_interface__(self) -> dict:
        if self.closed:
            raise AttributeError("the NcclSymPool was closed")
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False), "version": 3,
                "strides": None, "stream": None}

    def as_tensor(self) -> Any:
        """The whole pool as a torch uint8 tensor on the pool's device, without a copy. It
        keeps this object alive, not the memory: close() frees the memory under it."""
        self._check_open()
        import torch
        with CudaDeviceContext(self.device):
            tensor = torch.as_tensor(self)
        if tensor.data_ptr() != self.ptr:
            raise RuntimeError(f"torch.as_tensor copied the pool (got {tensor.data_ptr():#x}, "
                               f"the pool is at {self.ptr:#x})")
        return tensor

    def contains(self, address: int, nbytes: int = 1) -> bool:
        """Whether [address, address + nbytes) lies inside the pool (and so inside its window)."""
        return not self.closed and self.ptr <= address and address + nbytes <= self.ptr + self.nbytes

    # ---- SymmTensors ------------------------------------------------------------------

    @property
    def allocator(self) -> SymmAllocator:
        """The pool's SymmAllocator (made on first use, with its defaults)."""
        if self._allocator is None:
            from .allocator import SymmAllocator
            self._allocator = SymmAllocator(self)
        return self._allocator

    def tensor(self, dtype: Any, count: int | tuple[int, ...]) -> SymmTensor:
        """A new SymmTensor of `count` elements (or a shape) of dtype from this pool's
        allocator: its own block, at the same offset of the window on every rank that
        makes the same calls. Freed when its last view goes."""
        return self.allocator.empty(count, dtype)

    # ---- lifetime --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise NcclInvalid("the NcclSymPool was closed", "pool")

    def close(self) -> None:
        """Deregister the window, destroy the device communicator, free the memory
        (idempotent). Collective, as the window deregistration is. Tensors still over the
        pool must not be used afterwards."""
        window, self.window = self.window, None
        dev_comm, self.dev_comm = self.dev_comm, None
        block, self.block = self.block, None
        try:
            if window is not None:
                window.close()
        finally:
            try:
                if dev_comm is not None:
                    dev_comm.close()
            finally:
                if block is not None:
                    block.close()

    def __enter__(self) -> NcclSymPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.closed:
            return f"NcclSymPool(closed, nbytes={self.nbytes})"
        return (f"NcclSymPool(ptr={self.ptr:#x}, nbytes={self.nbytes}, device={self.device}, "
                f"rank={self.comm.rank}/{self.comm.nranks}, lsa_multimem={self.lsa_multimem})")
