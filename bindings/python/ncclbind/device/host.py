"""Host-side values that a Numba kernel takes: a device communicator's ncclDevComm (copied to
device memory, since a Numba kernel has no by-value record parameter of NCCL's layout) and a
registered window's ncclWindow_t (an address, passed as an integer)."""
from __future__ import annotations

from typing import Any

from ..errors import NcclInvalid

__all__ = ["kernel_arg", "gin_context", "multimem_window"]


def kernel_arg(resource: Any) -> Any:
    """What a Numba kernel takes for `resource`:

    - a DevCommResource (Communicator.create_dev_comm): a uint8 device array holding its
      ncclDevComm (read it in the kernel with ncclbind.device.intrinsics.dev_comm(arg));
    - a RegisteredWindowHandle (Communicator.register_window): its ncclWindow_t as a numpy
      uint64 (read it with intrinsics.window(arg)).

    Keep the device array alive while kernels that use it run."""
    import numpy as np
    if getattr(resource, "_closed", False):
        raise NcclInvalid(f"resource is a closed {type(resource).__name__}", "resource")
    if hasattr(resource, "to_bytes") and hasattr(resource, "dev_comm"):
        from numba import cuda
        return cuda.to_device(np.frombuffer(resource.to_bytes(), dtype=np.uint8))
    if hasattr(resource, "window") and hasattr(resource, "buffer"):
        handle = resource.window
        return np.uint64(int(handle))
    raise NcclInvalid(f"resource must be a DevCommResource or a RegisteredWindowHandle, not "
                      f"{type(resource).__name__}", "resource")


def gin_context(dev_comm: Any, index: int = 0) -> Any:
    """The GIN context index a kernel passes to ncclbind.device.intrinsics.gin(comm, index) (and
    so to barrier_session), after checking host-side that the DevComm has GIN: on GIN type NONE
    (one host, no GIN-capable network) NcclStateError says why, before any launch; an index that is
    no int >= 0 is NcclInvalid naming `index`."""
    import numpy as np
    from . import capabilities
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise NcclInvalid(f"index must be an int, not {type(index).__name__}", "index")
    if index < 0:
        raise NcclInvalid(f"index must be >= 0, not {index}", "index")
    capabilities.require_gin(dev_comm, "an ncclGin (ncclbind.device.intrinsics.gin)")
    return np.int32(index)


def multimem_window(dev_comm: Any, window: Any) -> Any:
    """kernel_arg(window) for a kernel that takes its multimem pointer
    (intrinsics.multimem_pointer / lsa_multimem_pointer with comm.lsa_multimem()), after checking
    host-side that the DevComm has a multicast object: without one (NVLS off, or none requested)
    NcclStateError says why, before any launch."""
    from . import capabilities
    capabilities.require_multimem(dev_comm, "a multimem pointer (ncclbind.device.intrinsics.multimem_pointer)")
    return kernel_arg(window)
