"""AllocConfig: the device allocator NCCL EP uses for a group's buffers (ncclEpAllocConfig_t).

alloc_fn / free_fn are C function addresses (ints: cudaError_t (*)(void **, size_t, void *) and
cudaError_t (*)(void *, void *), called with `context`), or Python callables: alloc(nbytes) -> a
device address, free(address) -> None. A callable is wrapped in a C trampoline that lives as long
as the AllocConfig, which the group holds until it is destroyed. NCCL EP calls them from inside its
own calls; an exception raised in one cannot cross C, so the trampoline answers NCCL EP with a CUDA
error and keeps the exception: the ncclbind.ep call that was running raises it when NCCL EP
returns (chained to NCCL EP's error, if it reported one). It is never swallowed."""
from __future__ import annotations

from ..errors import NcclInvalid
from . import checks

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Union

    AllocFnLike = Union[int, Callable[[int], int], None]
    FreeFnLike = Union[int, Callable[[int], None], None]

_CUDA_SUCCESS = 0
_CUDA_ERROR_MEMORY_ALLOCATION = 2
_CUDA_ERROR_INVALID_VALUE = 1


class AllocConfig:
    """A group's device allocator: alloc_fn and free_fn (both or neither; None: cudaMalloc /
    cudaFree), each a C function address or a Python callable, and `context`, the address passed
    to C functions (Python callables carry their own state). `calls` counts the callables' calls."""

    __slots__ = ("alloc_fn", "free_fn", "context", "calls", "_trampolines")

    def __init__(self, alloc_fn: AllocFnLike = None, free_fn: FreeFnLike = None, context: int = 0) -> None:
        if (alloc_fn is None) != (free_fn is None):
            raise NcclInvalid("alloc_fn and free_fn go together (give both, or neither for cudaMalloc/cudaFree)",
                              "alloc_fn" if alloc_fn is None else "free_fn")
        for name, fn in (("alloc_fn", alloc_fn), ("free_fn", free_fn)):
            if fn is not None and not callable(fn) and (type(fn) is not int or not 0 < fn < 2 ** 64):
                raise NcclInvalid(f"{name} must be a C function address (an int > 0) or a Python callable, "
                                  f"not {fn!r}", name)
        if type(context) is not int or not 0 <= context < 2 ** 64:
            raise NcclInvalid(f"context must be an address (an int in [0, 2**64)), not {context!r}", "context")
        self.alloc_fn, self.free_fn, self.context = alloc_fn, free_fn, context
        self.calls = {"alloc": 0, "free": 0}
        self._trampolines: tuple = ()

    def addresses(self) -> tuple[int, int, int]:
        """(alloc_fn, free_fn, context) as the C record takes them; callables get their trampolines."""
        alloc_fn, free_fn = self.alloc_fn, self.free_fn
        if callable(alloc_fn) or callable(free_fn):
            import ctypes
            if not self._trampolines:
                alloc_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                              ctypes.c_void_p)
                free_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
                self._trampolines = (alloc_type(self._alloc) if callable(alloc_fn) else None,
                                     free_type(self._free) if callable(free_fn) else None)
            cast = lambda f: ctypes.cast(f, ctypes.c_void_p).value  # noqa: E731
            alloc_fn = cast(self._trampolines[0]) if self._trampolines[0] else alloc_fn
            free_fn = cast(self._trampolines[1]) if self._trampolines[1] else free_fn
        return alloc_fn or 0, free_fn or 0, self.context

    def _alloc(self, out, nbytes, context) -> int:
        self.calls["alloc"] += 1
        try:
            address = self.alloc_fn(int(nbytes))
            if type(address) is not int or not 0 < address < 2 ** 64:
                raise NcclInvalid(f"alloc_fn returned {address!r}, not a device address (an int > 0)", "alloc_fn")
            out[0] = address
            return _CUDA_SUCCESS
        except BaseException as error:  # kept for the running ncclbind.ep call to raise
            checks.pending.append(error)
            return _CUDA_ERROR_MEMORY_ALLOCATION

    def _free(self, address, context) -> int:
        self.calls["free"] += 1
        try:
            self.free_fn(int(address or 0))
            return _CUDA_SUCCESS
        except BaseException as error:
            checks.pending.append(error)
            return _CUDA_ERROR_INVALID_VALUE

    def __repr__(self) -> str:
        return f"ep.AllocConfig(alloc_fn={self.alloc_fn!r}, free_fn={self.free_fn!r}, context={self.context:#x})"
