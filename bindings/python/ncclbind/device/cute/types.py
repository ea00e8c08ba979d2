"""The option types of the device API's CuTe views.

NCCL's own enums come from the IR, through ncclbind's generated enums (one member per IR value;
a release that adds one adds it here): CftTeamMode (ncclCftTeamMode_t), GinFenceLevel
(ncclGinFenceLevel, a flag set), GinResourceSharingMode (ncclGinResourceSharingMode) and
GinBackendMask, whose bit for a GIN backend is 1 << its ncclNetDeviceType value
(NCCL_GIN_BACKEND_MASK_*). MemoryOrder and ThreadScope are libcu++'s cuda::memory_order and
cuda::thread_scope, which the device functions take; their values are libcu++'s, not NCCL's."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import Any

from ..._generated.nccl_enums import (NcclCftTeamMode, NcclGinFenceLevel, NcclGinResourceSharingMode,
                                      NcclNetDeviceType)

__all__ = ["CftLeInfo", "MemoryOrder", "ThreadScope", "GinFenceLevel", "GinBackendMask",
           "GinResourceSharingMode", "CftTeamMode"]


@dataclass(frozen=True)
class CftLeInfo:
    """A CFT logical endpoint (ncclGet*LeInfo while tracing): its id and the offset in it."""

    le_id: Any   # cutlass.Uint32
    le_offset: Any   # cutlass.Uint64


class MemoryOrder(IntEnum):
    """cuda::memory_order (libcu++'s values), for barrier arrive / wait / sync and GIN reads."""

    RELAXED = 0
    CONSUME = 1
    ACQUIRE = 2
    RELEASE = 3
    ACQ_REL = 4
    SEQ_CST = 5


class ThreadScope(IntEnum):
    """cuda::thread_scope (libcu++'s values, THREAD is 10), for the release scopes of GIN put,
    put_value and signal."""

    SYSTEM = 0
    DEVICE = 1
    BLOCK = 2
    THREAD = 10


def _members(generated: type[enum.Enum], prefix: str = "") -> dict[str, int]:
    """The generated enum's members (aliases too) without `prefix`."""
    return {name[len(prefix):]: member.value for name, member in generated.__members__.items()
            if name.startswith(prefix) and not name.startswith("UNKNOWN_")}


CftTeamMode = IntEnum("CftTeamMode", _members(NcclCftTeamMode), module=__name__)
CftTeamMode.__doc__ = "ncclCftTeamMode_t: the layout DevComm.team_cft returns."
GinFenceLevel = IntFlag("GinFenceLevel", _members(NcclGinFenceLevel), module=__name__)
GinFenceLevel.__doc__ = "ncclGinFenceLevel (flags): what a GIN barrier's sync drains; PUT | GET drains both."
GinResourceSharingMode = IntEnum("GinResourceSharingMode", _members(NcclGinResourceSharingMode), module=__name__)
GinResourceSharingMode.__doc__ = "ncclGinResourceSharingMode: how a Gin's network resources are shared."
_BACKENDS = {name: 1 << value for name, value in _members(NcclNetDeviceType, "GIN_").items()}
GinBackendMask = IntFlag("GinBackendMask", {**_BACKENDS, "ALL": sum(_BACKENDS.values())}, module=__name__)
GinBackendMask.__doc__ = ("The GIN backends a Gin may use (NCCL_GIN_BACKEND_MASK_*): bit 1 << ncclNetDeviceType "
                          "of each NCCL_NET_DEVICE_GIN_* backend; ALL is every one.")
