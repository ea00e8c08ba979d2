"""CuPy arrays in ncclMemAlloc memory (nccl4py's nccl.core.cupy): empty(shape, dtype, order)
and resolve_array(array) -> (ptr, count, NcclDataType, device). CuPy is imported when used."""
from __future__ import annotations

from ..core import arrays
from ..core.arrays import shape_of
from ..errors import NcclInvalid
from ..nccl_enums import NcclDataType
from ._layout import checked_order

__all__ = ["empty", "resolve_array"]


def empty(shape: int | tuple[int, ...], dtype=float, order: str = "C"):
    """An uninitialized CuPy array of `shape` and `dtype` (default float: float64) on the
    current device, in memory from ncclMemAlloc (freed with the last view of it); order
    'C' (row-major) or 'F' (column-major)."""
    import cupy  # noqa: F401 (ModuleNotFoundError when CuPy is absent, as in nccl4py)
    order = checked_order(order, "order")
    dims = shape_of(shape)
    if order == "F" and len(dims) > 1:
        return arrays.empty(dims[::-1], dtype, like="cupy").T
    return arrays.empty(dims, dtype, like="cupy")


def resolve_array(array) -> tuple[int, int, NcclDataType, int]:
    """(device pointer, element count, NcclDataType, CUDA device) of a CuPy array (a bool
    array is UINT8, as NCCL has no bool)."""
    import cupy
    if not isinstance(array, cupy.ndarray):
        raise NcclInvalid(f"array: a CuPy ndarray, not {type(array).__name__}", "array")
    dtype = NcclDataType.UINT8 if array.dtype == bool else NcclDataType.from_dtype(array.dtype, "array")
    return array.data.ptr, array.size, dtype, array.device.id
