"""OpenIntEnum: the base of every generated NCCL enum."""
from __future__ import annotations

import enum


class OpenIntEnum(enum.IntEnum):
    """An IntEnum that also accepts values it does not name.

    A newer library can return a result code this binding predates, and
    ncclRedOpCreatePreMulSum creates reduction ops at run time; such a value
    becomes a pseudo-member named UNKNOWN_<value> instead of a ValueError.
    """

    @classmethod
    def _missing_(cls, value):
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        if not -1 << 31 <= value < 1 << 31:  # a C enum is an int
            from ..errors import NcclInvalid
            raise NcclInvalid(f"{value} is no {cls.__name__}: a C enum value is a 32-bit int", "value")
        member = int.__new__(cls, value)
        member._name_ = f"UNKNOWN_{value}"
        member._value_ = value
        # Cached so that NcclRedOp(5) is NcclRedOp(5); members stay as declared.
        return cls._value2member_map_.setdefault(value, member)

    @property
    def known(self) -> bool:
        """Whether the value is one this binding's headers name."""
        return self._name_ in type(self).__members__
