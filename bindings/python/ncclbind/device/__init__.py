"""ncclbind.device: NCCL's device API from kernels.

- `intrinsics` (imports numba): the device API in Numba-CUDA kernels (cooperative groups, the
  device communicator, teams, peer pointers of a window, LSA and GIN barrier sessions, reduce and
  copy), through the C-ABI surface `c_abi` (the functions of nccl_device_wrapper.h, linked from
  the loaded release's generated wrapper, `linking`).
- `kernel_arg`: a DevCommResource or a registered window as a Numba kernel argument;
  `prepared_launch`: a Numba kernel's launch prepared once, then one driver call per launch;
  `gin_context` / `multimem_window`: the same for GIN and multimem kernels, refused host-side
  (GIN type NONE, no multicast object) before any launch.
- `layouts`: the device API records' layouts from the IR, as numpy dtypes.
- `cuda_source`: CUDA C++ kernels against the loaded release's headers, and the C-ABI wrapper.
- `capabilities`: host-side checks (GIN, multimem) before a launch.

Importing this package imports neither numba nor CuPy."""
from __future__ import annotations

from .host import gin_context, kernel_arg, multimem_window
from .launch import PreparedLaunch, prepared_launch

__all__ = ["kernel_arg", "gin_context", "multimem_window", "prepared_launch", "PreparedLaunch"]
