"""What the CuPy and torch helpers share: checking the memory order (the shape: core.arrays.shape_of)."""
from __future__ import annotations

from ..errors import NcclInvalid


def checked_order(order, argument: str) -> str:
    if order not in ("C", "F"):
        raise NcclInvalid(f"{argument}: the memory order is 'C' (row-major) or 'F' (column-major), "
                          f"not {order!r}", argument)
    return order
