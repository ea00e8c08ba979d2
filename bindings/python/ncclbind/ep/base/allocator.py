"""AllocConfig: the device allocator NCCL EP uses for a group's buffers (ncclEpAllocConfig_t).

alloc_fn / free_fn are C functions (an int address, or an AllocFn / FreeFn: the ctypes prototypes of
ncclEpAllocFn_t, cudaError_t (*)(void **ptr, size_t size, void *context), and ncclEpFreeFn_t,
cudaError_t (*)(void *ptr, void *context), called with `context`, as nccl-extensions' nccl.ep
has them; a prototype instance given here is kept alive by the AllocConfig), or Python callables:
alloc(nbytes) -> a device address, free(address) -> None. 0 or None (both, the default): cudaMalloc
/ cudaFree. A callable is wrapped in a C trampoline that lives as long
as the AllocConfig, which the group holds until it is destroyed. NCCL EP calls them from inside its
own calls; an exception raised in one cannot cross C, so the trampoline answers NCCL EP with a CUDA
error and keeps the exception: the ncclbind.ep call that was running raises it when NCCL EP
returns (chained to NCCL EP's error, if it reported one). It is never swallowed."""
from __future__ import annotations

import ctypes

from ...errors import NcclInvalid
from . import checks

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Union

    AllocFnLike = Union[int, "ctypes._CFuncPtr", Callable[[int], int], None]
    FreeFnLike = Union[int, "ctypes._CFuncPtr", Callable[[int], None], None]

AllocFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p)
"""The C type of alloc_fn (ncclEpAllocFn_t): cudaError_t (*)(void **ptr, size_t size, void *context).
AllocFn(python_function) (or @AllocFn) makes a C-callable function of it."""

FreeFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
"""The C type of free_fn (ncclEpFreeFn_t): cudaError_t (*)(void *ptr, void *context)."""

_CUDA_SUCCESS = 0
_CUDA_ERROR_MEMORY_ALLOCATION = 2
_CUDA_ERROR_INVALID_VALUE = 1


def _is_c_function(fn: object) -> bool:
    return isinstance(fn, ctypes._CFuncPtr)  # an AllocFn / FreeFn (or any ctypes function pointer)


class AllocConfig:
    """A group's device allocator: alloc_fn and free_fn (both or neither; 0 or None: cudaMalloc /
    cudaFree), each a C function (its address, or an AllocFn / FreeFn) or a Python callable, and
    `context`, the address passed to C functions (Python callables carry their own state). `calls`
    counts the Python callables' calls. Immutable: a group's record copies it once."""

    __slots__ = ("alloc_fn", "free_fn", "context", "calls", "_trampolines")

    def __init__(self, alloc_fn: AllocFnLike = 0, free_fn: FreeFnLike = 0, context: int = 0) -> None:
        absent = (alloc_fn is None or (type(alloc_fn) is int and alloc_fn == 0),
                  free_fn is None or (type(free_fn) is int and free_fn == 0))
        if absent[0] != absent[1]:
            raise NcclInvalid("alloc_fn and free_fn go together (give both, or neither for cudaMalloc/cudaFree)",
                              "alloc_fn" if absent[0] else "free_fn")
        for name, fn in (("alloc_fn", alloc_fn), ("free_fn", free_fn)):
            if fn is not None and not callable(fn) and (type(fn) is not int or not 0 <= fn < 2 ** 64):
                raise NcclInvalid(f"{name} must be a C function (an address, an int > 0, or an ep.AllocFn / "
                                  f"ep.FreeFn) or a Python callable, not {fn!r}", name)
        if type(context) is not int or not 0 <= context < 2 ** 64:
            raise NcclInvalid(f"context must be an address (an int in [0, 2**64)), not {context!r}", "context")
        set_field = object.__setattr__
        set_field(self, "alloc_fn", alloc_fn)
        set_field(self, "free_fn", free_fn)
        set_field(self, "context", context)
        set_field(self, "calls", {"alloc": 0, "free": 0})
        set_field(self, "_trampolines", ())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("ep.AllocConfig is immutable (a group's config copies it once); make a new one")

    def __eq__(self, other: object) -> bool:
        if type(other) is not AllocConfig:
            return NotImplemented
        if self._python_callables(self) or self._python_callables(other):
            return self is other
        return self.addresses() == other.addresses()

    def __hash__(self) -> int:
        return id(self) if self._python_callables(self) else hash(self.addresses())

    @staticmethod
    def _python_callables(config: AllocConfig) -> bool:
        return any(callable(f) and not _is_c_function(f) for f in (config.alloc_fn, config.free_fn))

    def addresses(self) -> tuple[int, int, int]:
        """(alloc_fn, free_fn, context) as the C record takes them: a C function's address; a
        Python callable's trampoline (an AllocFn / FreeFn this object keeps)."""
        def address(fn: object, trampoline: object) -> int:
            if fn is None:
                return 0
            if _is_c_function(fn):
                return ctypes.cast(fn, ctypes.c_void_p).value or 0
            if callable(fn):
                return ctypes.cast(trampoline, ctypes.c_void_p).value or 0
            return fn  # an int address

        python = [callable(f) and not _is_c_function(f) for f in (self.alloc_fn, self.free_fn)]
        if any(python) and not self._trampolines:
            object.__setattr__(self, "_trampolines", (AllocFn(self._alloc) if python[0] else None,
                                                      FreeFn(self._free) if python[1] else None))
        trampolines = self._trampolines or (None, None)
        return address(self.alloc_fn, trampolines[0]), address(self.free_fn, trampolines[1]), self.context

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


__all__ = ["AllocConfig", "AllocFn", "FreeFn"]
