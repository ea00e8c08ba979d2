"""The layouts of the device API's records, as the IR recorded them for a header set: the
structs a kernel passes by value (ncclTeam, the barrier and multimem handles, ncclCoopAny,
ncclGin_C), ncclDevComm, and the storage of the C-ABI sessions (ncclLsaBarrierSession_C & co.).
`record_dtype` turns a layout into a numpy dtype with the same size, alignment and field offsets;
the Numba record types of ncclbind.device.intrinsics are made from it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import NcclInvalid
from . import ir_tables

__all__ = ["FieldLayout", "RecordLayout", "MIRRORED_RECORDS", "record_layout", "storage_layout", "record_dtype"]

# The records a Numba kernel holds by value or reads fields of (C names, as the C-ABI uses them).
MIRRORED_RECORDS = ("ncclTeam", "ncclLsaBarrierHandle", "ncclGinBarrierHandle", "ncclMultimemHandle",
                    "ncclCoopAny", "ncclGin_C", "ncclDevComm")


@dataclass(frozen=True)
class FieldLayout:
    name: str
    offset: int
    size: int
    kind: str          # the IR's type kind: int, bool, float, pointer, record, array, enum, typedef, ...
    type_name: str | None
    signed: bool


@dataclass(frozen=True)
class RecordLayout:
    name: str          # the IR's record name (ncclTeam_t)
    size: int
    align: int
    fields: tuple[FieldLayout, ...]
    header_set: str    # the set the layout was read from

    def field(self, name: str) -> FieldLayout:
        for f in self.fields:
            if f.name == name:
                return f
        raise NcclInvalid(f"{self.name} ({self.header_set}) has no field {name!r}; it has "
                          f"{', '.join(f.name for f in self.fields)}", "name")


def _matches(record: dict[str, Any], name: str) -> bool:
    return name in (record["name"], record.get("tag")) or record["name"] == name + "_t"


def _code(nccl_version: int | str | None) -> int:
    from .cuda_source import nccl_version_code
    return nccl_version_code(nccl_version)


def record_layout(name: str, nccl_version: int | str | None = None) -> RecordLayout:
    """The layout of record `name` (ncclTeam, ncclTeam_t or its tag) in the header set of the
    release (default: the loaded libnccl's). A release whose headers lack it (ncclCoopAny before
    2.29, or from 2.32.6 on) gets the nearest set that has it (_nearest_sets): the C-ABI wrapper for that release defines its own
    record of that name with the IR's size and alignment (a static_assert; [polyfill] in
    policy/device_wrapper.toml), and its functions take only its address or its bytes."""
    for version in _nearest_sets(nccl_version):
        for record in ir_tables.header_set(version)["records"]:
            if _matches(record, name):
                return _layout(record, version)
    raise NcclInvalid(f"no header set has a record {name!r}", "name")


def _nearest_sets(nccl_version: int | str | None) -> list[str]:
    """The release's header set, then the later ones oldest first, then the earlier ones newest
    first: where a layout that the release's headers do not declare is taken from (ncclbind's
    wrapper defines it for that release with that layout)."""
    chosen = ir_tables.header_set_for(_code(nccl_version))
    versions = ir_tables.header_set_versions()
    at = versions.index(chosen)
    return [chosen] + versions[at + 1:] + versions[:at][::-1]


def _layout(record: dict[str, Any], version: str) -> RecordLayout:
    fields = tuple(FieldLayout(f["name"], f["offset"], f["type"].get("size", 0), f["type"]["kind"],
                               f["type"].get("name"), bool(f["type"].get("signed", False)))
                   for f in record["fields"] if "offset" in f)
    return RecordLayout(record["name"], record["size"], record["align"], fields, version)


def storage_layout(name: str, nccl_version: int | str | None = None) -> RecordLayout:
    """Size and alignment of a C-ABI session's storage (ncclLsaBarrierSession_C & co.), from the
    IR's device_storage of the release's header set, else of the oldest later set that has it,
    else of the newest earlier one (a release whose headers do not declare the storage, before
    2.30 or from 2.32.6 on, gets ncclbind's wrapper, which holds the same C++ session; ncclbind's
    CPU test test_device_numba checks that against the compiled wrapper)."""
    for version in _nearest_sets(nccl_version):
        for storage in ir_tables.header_set(version).get("device_storage", ()):
            if storage["name"] == name:
                return RecordLayout(name, storage["size"], storage["align"], (), version)
    raise NcclInvalid(f"no header set has the session storage {name!r}", "name")


_INT_SIZES = (1, 2, 4, 8)


def record_dtype(layout: RecordLayout) -> Any:
    """A numpy structured dtype with the layout's size and field offsets: integers, bools and
    floats as such, pointers as uint64, nested records, arrays and anything else as raw bytes."""
    import numpy as np
    names, formats, offsets = [], [], []
    for f in layout.fields:
        if f.kind in ("int", "enum", "typedef") and f.size in _INT_SIZES:
            fmt = ("i" if f.signed else "u") + str(f.size)
        elif f.kind == "bool":
            fmt = "?"
        elif f.kind == "float" and f.size in (4, 8):
            fmt = f"f{f.size}"
        elif f.kind in ("pointer", "function_pointer") and f.size == 8:
            fmt = "u8"
        else:
            fmt = f"V{f.size}"
        names.append(f.name)
        formats.append(fmt)
        offsets.append(f.offset)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": layout.size})
