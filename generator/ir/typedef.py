from __future__ import annotations

from dataclasses import dataclass, field

from .types import TypeRef


@dataclass
class Typedef:
    """A typedef that is not simply the name of a mirrored record or enum:
    opaque handles (ncclComm_t), integer aliases, function-pointer types."""
    name: str
    type: TypeRef
    header: str
    line: int
    opaque_handle: bool = False  # pointer to a struct whose layout the header hides
    destructor: str | None = None  # the function that releases this handle (conventions)
    doc: str | None = None
    since: str | None = None
    until: str | None = None  # the first release without it, when a newer one dropped it (merged IR only)
    versions: list[str] = field(default_factory=list)
