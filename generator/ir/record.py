from __future__ import annotations

from dataclasses import dataclass, field

from .types import TypeRef


@dataclass
class Field:
    name: str
    type: TypeRef
    offset: int                  # bytes from the start of the record
    bit_offset: int | None = None  # bitfields: offset in bits from the record start
    bit_width: int | None = None
    doc: str | None = None
    align_attr: int | None = None  # alignas(N) on the member
    reference: bool = False      # a C++ reference member, laid out (and mirrored) as a pointer
    anonymous: bool = False      # an unnamed member (C11 anonymous struct/union)
    since: str | None = None
    until: str | None = None  # the first release without it, when a newer one dropped it (merged IR only)


@dataclass
class Record:
    """A struct or union whose layout is visible to the host."""
    name: str                    # the C name used to refer to it (tag or typedef)
    kind: str                    # struct | union
    size: int
    align: int
    fields: list[Field]
    header: str
    line: int
    tag: str | None = None       # struct tag, when it differs from name
    cxx_name: str | None = None  # how C++ names it when nested in another record (Parent::Nested)
    typedefs: list[str] = field(default_factory=list)  # typedef names for it
    doc: str | None = None
    versioned_header: bool = False  # starts with size, magic, version (NCCL's versioned structs)
    anonymous: bool = False      # an unnamed type, declared inline in its parent's field
    device_only: bool = False    # declared only under __CUDACC__ (device compilation)
    since: str | None = None
    until: str | None = None  # the first release without it, when a newer one dropped it (merged IR only)
    versions: list[str] = field(default_factory=list)
