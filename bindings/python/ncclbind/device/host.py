"""Host-side values that a Numba kernel takes: a device communicator's ncclDevComm (copied to
device memory, since a Numba kernel has no by-value record parameter of NCCL's layout) and a
registered window's ncclWindow_t (an address, passed as an integer)."""
from __future__ import annotations

from typing import Any

from ..errors import NcclInvalid

__all__ = ["kernel_arg"]


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
