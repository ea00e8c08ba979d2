"""ncclbind.params: NCCL's process-wide parameter registry (NCCL 2.30.7 and newer).

    ncclbind.params.keys()                  # ['NCCL_DEBUG', 'NCCL_DEBUG_FILE', ...]
    ncclbind.params.get("NCCL_DEBUG_FILE")  # the value as NCCL prints it, a str
    p = ncclbind.params.bind("NCCL_DEBUG_SUBSYS")
    p.get_u64()                             # by type (NCCL refuses another type); p.get_bytes()
    ncclbind.params.dump()                  # every parameter to NCCL's log
    ncclbind.params["NCCL_DEBUG"], len(ncclbind.params), list(ncclbind.params)  # nccl4py's Mapping

The functions and Param's methods are generated from policy/nccl.toml (owners
params and Param); with an older libnccl each raises NcclSymbolNotFoundError naming the
release that first has it.
"""
from __future__ import annotations

import sys
import types

from ._generated.param_methods import ParamMethods
from ._generated.params_functions import bind, dump, get, keys

__all__ = ["Param", "bind", "dump", "dump_params", "get", "keys"]


def dump_params() -> None:
    """Every NCCL parameter to NCCL's log (nccl4py's name for params.dump())."""
    dump()


class _ParamsModule(types.ModuleType):
    """This module is also nccl4py's `params`: a read-only Mapping of parameter names to the
    values NCCL prints (params["NCCL_DEBUG"], len(params), iteration over the names)."""

    def __getitem__(self, key: str) -> str:
        if not isinstance(key, str):
            raise KeyError(key)
        if key not in keys():
            raise KeyError(key)
        return get(key)

    def __iter__(self):
        return iter(keys())

    def __len__(self) -> int:
        return len(keys())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in keys()

    def items(self):
        return [(key, get(key)) for key in keys()]

    def values(self):
        return [get(key) for key in keys()]


sys.modules[__name__].__class__ = _ParamsModule


class Param(ParamMethods):
    """A parameter bound by ncclbind.params.bind: NCCL's ncclParamHandle_t, which NCCL owns
    (it lives as long as the process; there is nothing to free)."""

    __slots__ = ("handle",)

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __repr__(self) -> str:
        return f"<ncclbind.Param handle={self.handle:#x}>"
