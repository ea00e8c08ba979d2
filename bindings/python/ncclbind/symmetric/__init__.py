"""Symmetric memory for PyTorch users: NCCL's symmetric kernels need buffers inside a
window registered with NCCL_WIN_COLL_SYMMETRIC over ncclMemAlloc memory; this package
makes such buffers as torch tensors (docs/symmetric.md).

  NcclSymPool          one ncclMemAlloc pool per communicator, a symmetric window, a DevComm
  SymmAllocator        first-fit SymmTensors from a pool (eager and CUDA-graph sub-pools, stats)
  SymmTensor           a torch.Tensor subclass over a block of the pool (plain or mxfp8 layout)
  torch_pool           torch.cuda.MemPool over ncclMemAlloc; its segments registered as windows
  MockAllocator        SymmAllocator over host memory (tests, no GPU)
  MockSymmAllocator    the bookkeeping alone over a made-up address (no torch)

Importing this package imports neither torch nor any submodule until a name is used.
"""
from __future__ import annotations

_EXPORTS = {
    "NcclSymPool": "pool", "window_alignment": "pool",
    "SymmAllocator": "allocator", "MockAllocator": "allocator", "MXFP8_BLOCK": "allocator",
    "FreeList": "freelist", "SubPoolBookkeeping": "freelist", "MockSymmAllocator": "freelist",
    "SymmStats": "freelist", "FreeListStats": "freelist", "SymmetricPoolExhausted": "freelist",
    "torch_pool": "torch_pool", "TorchSymmetricPool": "torch_pool", "AllocatorLibrary": "torch_pool",
    "allocator_library": "torch_pool",
}

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from .allocator import MXFP8_BLOCK as MXFP8_BLOCK, MockAllocator as MockAllocator
    from .allocator import SymmAllocator as SymmAllocator, SymmTensor as SymmTensor
    from .freelist import (FreeList as FreeList, FreeListStats as FreeListStats,
                           MockSymmAllocator as MockSymmAllocator, SubPoolBookkeeping as SubPoolBookkeeping,
                           SymmetricPoolExhausted as SymmetricPoolExhausted, SymmStats as SymmStats)
    from .pool import NcclSymPool as NcclSymPool, window_alignment as window_alignment
    from .torch_pool import (AllocatorLibrary as AllocatorLibrary, TorchSymmetricPool as TorchSymmetricPool,
                             allocator_library as allocator_library, torch_pool as torch_pool)

__all__ = sorted(_EXPORTS) + ["SymmTensor"]

if not TYPE_CHECKING:
    def __getattr__(name: str) -> object:
        import importlib
        if name == "SymmTensor":  # a torch.Tensor subclass: made when torch is first needed
            return importlib.import_module(".allocator", __name__)._symm_tensor_class()
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'ncclbind.symmetric' has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(_EXPORTS) | {"SymmTensor"})
