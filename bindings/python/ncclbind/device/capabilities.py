"""Host-side checks, before a launch, that a device communicator can do what a kernel asks:
a GIN session on a DevComm without GIN, or a multimem reduction without a multicast object,
would otherwise hang or fault on the GPU. Each raises NcclStateError saying what is missing
and why (from the DevComm's own fields, whichever release's layout it has)."""
from __future__ import annotations

from typing import Any

from ..errors import NcclInvalid, NcclStateError

__all__ = ["gin_connection_count", "has_gin", "has_multimem", "require_gin", "require_multimem"]


def _field(record: Any, name: str) -> Any:
    """record.name, or None when the loaded release's layout has no such field (the records
    raise NcclInvalid saying which release has it)."""
    try:
        return getattr(record, name)
    except (AttributeError, NcclInvalid):
        return None


def _record(dev_comm: Any) -> Any:
    """The ncclDevComm record of a DevCommResource, or the record itself."""
    record = getattr(dev_comm, "dev_comm", dev_comm)
    if getattr(dev_comm, "_closed", False):
        raise NcclInvalid("dev_comm is destroyed", "dev_comm")
    if _field(record, "rank") is None or _field(record, "lsaMultimem") is None:
        raise NcclInvalid(f"dev_comm must be a DevCommResource (Communicator.create_dev_comm) or its "
                          f"ncclDevComm record, not {type(dev_comm).__name__}", "dev_comm")
    return record


def gin_connection_count(dev_comm: Any) -> int:
    """How many GIN (GPU-initiated networking) connections the device communicator has: NCCL
    2.29+ counts them in ginConnectionCount, 2.28 in ginContextCount. 0: GIN type NONE (one
    host with no GIN-capable network, or requirements that asked for no GIN context)."""
    record = _record(dev_comm)
    for name in ("ginConnectionCount", "ginContextCount"):
        value = _field(record, name)
        if value is not None:
            return int(value)
    return 0


def has_gin(dev_comm: Any) -> bool:
    return gin_connection_count(dev_comm) > 0


def has_multimem(dev_comm: Any) -> bool:
    """Whether the LSA team has a multicast (NVLS) object: lsaMultimem.mcBasePtr is set."""
    handle = _record(dev_comm).lsaMultimem
    return any(bytes(handle))


def require_gin(dev_comm: Any, what: str = "a GIN session") -> None:
    """NcclStateError unless the device communicator has GIN connections, raised before the launch
    of a kernel that opens `what` (ncclGin, ncclGinBarrierSession, ncclBarrierSession)."""
    if not has_gin(dev_comm):
        raise NcclStateError(
            f"{what} needs GIN, and this device communicator has no GIN connection (GIN type NONE): "
            "on one host without a GIN-capable network (IB/RoCE with GPUDirect RDMA) NCCL creates none, "
            "and none is created unless the requirements ask for it (ginContextCount / ginSignalCount); "
            "use the LSA API (ncclLsaBarrierSession, peer pointers) between GPUs of one host")


def require_multimem(dev_comm: Any, what: str = "a multimem operation") -> None:
    """NcclStateError unless the LSA team has a multicast object, raised before the launch of a
    kernel that uses `what` (ncclMultimemReduceSum, a multimem barrier)."""
    if not has_multimem(dev_comm):
        raise NcclStateError(
            f"{what} needs a multicast (NVLS) object for the LSA team, and this device communicator "
            "has none: NVLS is off (NCCL_NVLS_ENABLE=0), the GPUs or driver lack multicast, or the "
            "requirements did not ask for multimem (lsaMultimem = true)")
