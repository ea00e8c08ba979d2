from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class EnumValue:
    name: str
    value: int
    alias_of: str | None = None  # spelled as another enumerator (ncclChar = ncclInt8)
    sentinel: bool = False       # a count or range marker (ncclNumResults), not a real value
    doc: str | None = None
    since: str | None = None
    until: str | None = None  # the first release without it, when a newer one dropped it (merged IR only)


@dataclass
class Enum:
    name: str                    # typedef name when there is one, else the tag
    values: list[EnumValue]
    size: int
    signed: bool
    header: str
    line: int
    tag: str | None = None
    doc: str | None = None
    dummy: bool = False          # exists only to size another enum (ncclRedOp_dummy_t)
    device_only: bool = False    # declared only under __CUDACC__ (device compilation)
    scoped: bool = False         # C++ `enum class`: values are spelled Enum::Value
    since: str | None = None
    until: str | None = None  # the first release without it, when a newer one dropped it (merged IR only)
    versions: list[str] = field(default_factory=list)
