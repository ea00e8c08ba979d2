"""The resource handles a kernel takes by value (multimem, LSA barrier, GIN barrier).

A host handle of ncclbind (DevCommResource.resource_handles, DevCommResource.multimem_handle) is
a kernel argument as it is (its JIT adapter makes the view); DevComm's own copies
(DevComm.lsa_barrier, ...) are the same views, made from the record while tracing."""
from __future__ import annotations

from typing import Any

import cutlass

from .._generated import cute as _d
from ..._generated.nccl_records import GinBarrierHandle as _GinBarrierHandleHost
from ..._generated.nccl_records import LsaBarrierHandle as _LsaBarrierHandleHost
from ..._generated.nccl_records import MultimemHandle as _MultimemHandleHost
from ...errors import NcclInvalid

__all__ = ["MultimemHandle", "LsaBarrierHandle", "GinBarrierHandle"]


class _Handle:
    """A by-value view of a handle record: host-side over ncclbind's handle, traced over the
    record's value (`value`, the generated native struct)."""

    _record: type
    _host: type

    def __init__(self, handle: Any):
        if not isinstance(handle, type(self)._host):
            raise NcclInvalid(f"handle: {type(self).__name__} views an ncclbind {type(self)._host.__name__} "
                              f"(from a DevCommResource), not {type(handle).__name__}", "handle")
        self._handle = handle
        self._value = None

    def __c_pointers__(self) -> list[int]:
        if self._handle is None:
            raise NcclInvalid(f"{type(self).__name__}: only a host handle is a kernel argument", "handle")
        return [self._handle.struct.address]

    @classmethod
    def __get_mlir_types__(cls) -> list:
        return cls._record.__get_mlir_types__()

    def __extract_mlir_values__(self) -> list:
        return self.value.__extract_mlir_values__()

    def __new_from_mlir_values__(self, values: list):
        return type(self).from_native_struct(type(self)._record(values[0]))

    @classmethod
    def from_native_struct(cls, struct: Any):
        """The view of a traced record value (a `_record` native struct)."""
        if not isinstance(struct, cls._record):
            raise NcclInvalid(f"struct: {cls.__name__}.from_native_struct takes a {cls._record.__name__}, not "
                              f"{type(struct).__name__}", "struct")
        view = object.__new__(cls)
        view._handle = None
        view._value = struct
        return view

    @property
    def value(self) -> Any:
        """The record's value while tracing."""
        if self._value is None:
            raise NcclInvalid(f"{type(self).__name__}: its fields are read in a kernel being traced", "value")
        return self._value


class MultimemHandle(_Handle):
    """A team's multicast handle (ncclMultimemHandle): for multimem pointers of a team other than
    LSA (DevComm.lsa_multimem is LSA's)."""

    _record = _d.ncclMultimemHandle
    _host = _MultimemHandleHost

    @property
    def mc_base_pointer(self) -> Any:
        return self.value.mcBasePtr


class LsaBarrierHandle(_Handle):
    """An LSA barrier (ncclLsaBarrierHandle), from DevCommResource.resource_handles or DevComm."""

    _record = _d.ncclLsaBarrierHandle
    _host = _LsaBarrierHandleHost

    @property
    def buf_handle(self) -> cutlass.Uint32:
        return self.value.bufHandle

    @property
    def n_barriers(self) -> cutlass.Int32:
        return self.value.nBarriers


class GinBarrierHandle(_Handle):
    """A GIN barrier (ncclGinBarrierHandle), from DevCommResource.resource_handles or DevComm."""

    _record = _d.ncclGinBarrierHandle
    _host = _GinBarrierHandleHost

    @property
    def signal0(self) -> cutlass.Uint32:
        return self.value.signal0


def _register() -> None:
    for view in (MultimemHandle, LsaBarrierHandle, GinBarrierHandle):
        cutlass.register_jit_arg_adapter(view._host)(view)


_register()
