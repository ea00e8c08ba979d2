"""The argument types of the generated methods, for annotations and type checkers.

Each is what ncclbind.core.calls accepts for one role of policy: a buffer (anything
NcclBuffer.resolve reads), a reduction op, a stream, a per-call config. Buffers and streams
come from libraries ncclbind does not import (torch, CuPy, DLPack producers), so those
aliases stay open (Any) rather than name types a user may not have installed.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Union

if TYPE_CHECKING:
    from .._generated._nccl import ncclCollConfig_t, ncclConfig_t
    from ..base.unique_id import UniqueId
    from ..nccl_enums import NcclDataType, NcclRedOp
    from .resources import CustomRedOp

# A torch tensor, CuPy array, DLPack or __cuda_array_interface__ object, an NcclBuffer,
# or an explicit (pointer, count, dtype[, device]).
BufferLike = Any
# NcclRedOp, its int value, its name ("sum", "max", ...), or a CustomRedOp (PreMulSum).
RedOpLike = Union["NcclRedOp", int, str, "CustomRedOp"]
# None (the legacy default stream), a cudaStream_t as an int, a torch or CuPy stream, or any
# object with __cuda_stream__.
StreamLike = Union[int, None, Any]
# An ncclConfig_t, or a dict of its fields (over NCCL_CONFIG_INITIALIZER).
CommConfigLike = Union["ncclConfig_t", dict]
# A UniqueId or its 128 bytes.
UniqueIdLike = Union["UniqueId", bytes, bytearray, memoryview]
# An ncclCollConfig_t, or a dict of its fields (over NCCL_COLLCONFIG_INITIALIZER).
CollConfigLike = Union["ncclCollConfig_t", dict]
# NcclDataType, its int value, its name ("float32", "bf16", ...), or a NumPy / torch / CuPy dtype.
DataTypeLike = Union["NcclDataType", int, str, Any]

# nccl4py's names of the same argument types (nccl.core.NcclBufferSpec, ...).
NcclBufferSpec = BufferLike
NcclStreamSpec = StreamLike
# A host number or a one-element device buffer (create_pre_mul_sum's scalar).
NcclScalarSpec = Union[int, float, Any]
# A CUDA device ordinal, or an object naming one (a torch.device, a cuda.core Device).
NcclDeviceSpec = Union[int, Any]
# A CUDA event as an int (cudaEvent_t), or an object with a handle (torch, CuPy, cuda.core).
NcclEventSpec = Union[int, Any]


class MpiComm(Protocol):
    """What UniqueId.broadcast_mpi uses of an mpi4py communicator (mpi4py.MPI.Comm)."""

    def Get_rank(self) -> int: ...

    def bcast(self, obj: Any, root: int = 0) -> Any: ...


class KeyValueStore(Protocol):
    """What UniqueId.share_store uses of a torch.distributed Store (TCPStore, FileStore, ...)."""

    def set(self, key: str, value: bytes) -> Any: ...

    def get(self, key: str) -> bytes: ...
