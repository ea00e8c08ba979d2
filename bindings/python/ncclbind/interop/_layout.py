"""What the CuPy and torch helpers share: checking the memory order and the shape."""
from __future__ import annotations

from ..errors import NcclInvalid


def checked_order(order, argument: str) -> str:
    if order not in ("C", "F"):
        raise NcclInvalid(f"{argument}: the memory order is 'C' (row-major) or 'F' (column-major), "
                          f"not {order!r}", argument)
    return order


def shape_of(shape, argument: str = "shape") -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in dims):
        raise NcclInvalid(f"{argument}: non-negative ints, not {shape!r}", argument)
    return dims
