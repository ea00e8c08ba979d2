"""The device API's C-callable surface: `__device__` functions with C names (NCCL's
nccl_device_wrapper.h, 2.30+), and the opaque storage types they take by pointer."""
from __future__ import annotations

from dataclasses import dataclass, field

from .types import TypeRef


@dataclass
class DeviceParam:
    name: str
    type: TypeRef              # a reference parameter is its pointer here (the ABI passes an address)
    spelling: str              # the C++ type as the header spells it, e.g. `const ncclDevComm &`
    reference: bool = False    # `T const&`: C++ callers pass the object, C callers its address
    default: str | None = None  # the default argument's tokens, e.g. `false`, `{}`
    since: str | None = None   # merged IR only


@dataclass
class DeviceFunction:
    """One C-ABI device function: what a kernel in any language links against."""
    name: str
    result: TypeRef
    result_spelling: str
    params: list[DeviceParam]
    header: str                # relative to the include root, e.g. nccl_device_wrapper.h
    line: int
    doc: str | None = None
    # Declared `NCCL_IR_EXTERN_C NCCL_DEVICE_INLINE` in NCCL's device headers (nccl_device/gin.h,
    # core.h: ncclGinPut_v2, ncclGetMultimemPointer, ...): extern "C" only inside NCCL's own
    # bitcode library; under nvcc an inline C++ function, so no symbol of that name exists to link.
    header_inline: bool = False
    since: str | None = None
    until: str | None = None  # the first release without it, when a newer one dropped it (merged IR only)
    versions: list[str] = field(default_factory=list)


@dataclass
class StorageMember:
    name: str
    spelling: str              # its C++ type, e.g. ncclLsaBarrierSession<ncclCoopAny>


@dataclass
class DeviceStorage:
    """A record the C ABI handles only through a pointer (ncclLsaBarrierSession_C: it holds a
    C++ template instance): its size and alignment, clang's, and what it holds."""
    name: str
    size: int
    align: int
    members: list[StorageMember]
    header: str
    line: int
    doc: str | None = None
    since: str | None = None
    until: str | None = None  # the first release without it, when a newer one dropped it (merged IR only)
    versions: list[str] = field(default_factory=list)
