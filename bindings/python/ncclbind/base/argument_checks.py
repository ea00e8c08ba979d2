"""The checks of one argument of a host call, by kind, that the generated methods call.

Each generated method (ncclbind/_generated/*_methods.py, *_functions.py) is its own code: it
checks each of its arguments here, with its own name, C type and bounds, enters its owner's
call gate, calls its ncclbind._nccl function and converts the result. Every function below
returns the value to pass to NCCL or raises NcclInvalid naming the argument; none calls NCCL.
"""
from __future__ import annotations

import operator

from .. import _nccl
from ..errors import NcclInvalid
from .config import as_struct, comm_config as _comm_config
from .unique_id import NBYTES as _NBYTES


def _integer(value, name: str, c_type: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise NcclInvalid(f"{name}: an int ({c_type}), not {type(value).__name__}", name)
    return int(value)


def int_in(value, name: str, c_type: str, low: int, high: int) -> int:
    """An int in c_type's range (low..high)."""
    value = _integer(value, name, c_type)
    if not low <= value <= high:
        raise NcclInvalid(f"{name}: {value} is out of range for {c_type} ({low}..{high})", name)
    return value


def enum_in(value, name: str, c_type: str, values: tuple[int, ...]) -> int:
    """One of the values the headers define for the enum c_type."""
    value = _integer(value, name, c_type)
    if value not in values:
        raise NcclInvalid(f"{name}: {value} is not a value of {c_type} ({', '.join(map(str, values))})", name)
    return value


def rank_of(value, name: str, c_type: str, low: int, high: int, record, record_name: str) -> int:
    """A rank of `record` (already checked: a struct with nRanks), 0..its nRanks - 1."""
    value = _integer(value, name, c_type)
    nranks = record.nRanks
    if not 0 <= value < nranks:
        raise NcclInvalid(f"{name}: {value} is not a rank of {record_name} (0..{nranks - 1}: its nRanks is "
                          f"{nranks})", name)
    return int_in(value, name, c_type, low, high)


def text(value, name: str) -> str:
    """A str without NUL (a C string)."""
    if not isinstance(value, str):
        raise NcclInvalid(f"{name}: a str, not {type(value).__name__}", name)
    if "\0" in value:
        raise NcclInvalid(f"{name}: {value!r} holds a NUL character", name)
    return value


def record(value, name: str, record_type: type):
    """A struct passed by value: an instance of its generated _nccl class, or nccl4py's record of
    it (an NCCLTeam for an ncclTeam_t)."""
    value = as_struct(value, name)
    if not isinstance(value, record_type):
        raise NcclInvalid(f"{name}: an ncclbind._nccl.{record_type.__name__}, not {type(value).__name__}", name)
    return value


def unique_id(value, name: str, optional: bool) -> bytes | None:
    """A UniqueId (anything with to_bytes()) or its 128 bytes; None where the call takes NULL."""
    if value is None:
        if optional:
            return None
        raise NcclInvalid(f"{name} is None", name)
    to_bytes = getattr(value, "to_bytes", None)
    if to_bytes is not None and not isinstance(value, int):
        value = to_bytes()
    if isinstance(value, (bytes, bytearray, memoryview)) and len(value) == _NBYTES:
        return bytes(value)
    raise NcclInvalid(f"{name}: a UniqueId or its {_NBYTES} bytes, not {type(value).__name__}", name)


def comm_config(value, name: str, optional: bool):
    """An ncclConfig_t for the loaded library: an NCCLConfig, an ncclConfig_t or a dict of its fields;
    None where the call takes NULL."""
    if value is None:
        if optional:
            return None
        raise NcclInvalid(f"{name} is None", name)
    value = as_struct(value, name)
    if not isinstance(value, (dict, _nccl.ncclConfig_t)):
        raise NcclInvalid(f"{name}: an ncclConfig_t or a dict of its fields, not {type(value).__name__}", name)
    return _comm_config(value)


def written(buffer: bytearray, count: int) -> bytes:
    """The bytes NCCL wrote into `buffer`: `count` of them (at most the buffer's size)."""
    return bytes(buffer[:max(0, min(count, len(buffer)))])


def strings(table: int, count: int) -> list[str]:
    """Copies of the `count` C strings of the table of char pointers at address `table`."""
    import ctypes
    if count <= 0 or not table:
        return []
    pointers = (ctypes.c_char_p * count).from_address(table)
    return [(p or b"").decode("utf-8", "surrogateescape") for p in pointers]


def non_negative_ints(values, argument: str) -> list[int]:
    """Each item of `values` as a non-negative int (bools are not ints); NcclInvalid naming
    argument[index] otherwise."""
    checked = []
    for index, value in enumerate(values):
        try:
            if isinstance(value, bool) or type(value).__name__ == "bool_":
                raise TypeError
            number = operator.index(value)
        except TypeError:
            raise NcclInvalid(f"{argument}[{index}] is {value!r}; it must be an int", argument) from None
        if number < 0:
            raise NcclInvalid(f"{argument}[{index}] is {number}; it must not be negative", argument)
        checked.append(number)
    return checked
