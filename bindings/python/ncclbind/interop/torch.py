"""torch tensors in ncclMemAlloc memory (nccl4py's nccl.core.torch): empty(*size, dtype,
device, morder) and resolve_tensor(tensor) -> (ptr, count, NcclDataType, device). torch is
imported when used."""
from __future__ import annotations

from ..core import arrays
from ..core.arrays import shape_of
from ..errors import NcclInvalid
from ..nccl_enums import NcclDataType
from ._layout import checked_order

__all__ = ["empty", "resolve_tensor"]


def _device_index(device) -> int | None:
    import torch
    if device is None or (isinstance(device, int) and not isinstance(device, bool)):
        return device
    try:
        parsed = torch.device(device)
    except (TypeError, RuntimeError) as e:
        raise NcclInvalid(f"device: a CUDA device (int, 'cuda:N', torch.device), not {device!r}: {e}",
                          "device") from None
    if parsed.type != "cuda":
        raise NcclInvalid(f"device: a CUDA device, not {device!r}", "device")
    return parsed.index


def empty(*size, dtype=None, device=None, morder: str = "C"):
    """An uninitialized torch tensor of shape `size` (ints, or one list/tuple) and `dtype`
    (default: torch's default dtype) on `device` (default: the current CUDA device), in
    memory from ncclMemAlloc (freed with the last view of it); morder 'C' or 'F'."""
    import torch
    morder = checked_order(morder, "morder")
    dims = shape_of(size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size, "size")
    dtype = torch.get_default_dtype() if dtype is None else dtype
    index = _device_index(device)
    if morder == "F" and len(dims) > 1:
        return arrays.empty(dims[::-1], dtype, device=index, like="torch").permute(*reversed(range(len(dims))))
    return arrays.empty(dims, dtype, device=index, like="torch")


def resolve_tensor(tensor) -> tuple[int, int, NcclDataType, int]:
    """(device pointer, element count, NcclDataType, CUDA device) of a torch tensor (a bool
    tensor is UINT8, as NCCL has no bool)."""
    import torch
    if not isinstance(tensor, torch.Tensor):
        raise NcclInvalid(f"tensor: a torch.Tensor, not {type(tensor).__name__}", "tensor")
    dtype = NcclDataType.UINT8 if tensor.dtype == torch.bool else NcclDataType.from_dtype(tensor.dtype, "tensor")
    return tensor.data_ptr(), tensor.numel(), dtype, tensor.device.index
