"""NCCL's process-wide parameter registry (NCCL 2.30.7 and newer): ncclbind.params.

    ncclbind.params.keys()                  # ['NCCL_DEBUG', 'NCCL_DEBUG_FILE', ...]
    ncclbind.params.get("NCCL_DEBUG_FILE")  # the value as NCCL prints it, a str
    p = ncclbind.params.bind("NCCL_DEBUG_SUBSYS")
    p.get_u64()                             # by type (NCCL refuses another type); p.get_bytes()
    ncclbind.params.dump()                  # every parameter to NCCL's log

The functions and Param's methods are generated from generator/spec/nccl.toml (owners
params and Param); with an older libnccl each raises NcclSymbolNotFoundError naming the
release that first has it.
"""
from __future__ import annotations

from .._generated.param_methods import ParamMethods
from .._generated.params_functions import bind, dump, get, keys

__all__ = ["Param", "bind", "dump", "get", "keys"]


class Param(ParamMethods):
    """A parameter bound by ncclbind.params.bind: NCCL's ncclParamHandle_t, which NCCL owns
    (it lives as long as the process; there is nothing to free)."""

    __slots__ = ("handle",)

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __repr__(self) -> str:
        return f"<ncclbind.Param handle={self.handle:#x}>"
