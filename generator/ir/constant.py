from __future__ import annotations

from dataclasses import dataclass, field

from .types import TypeRef


@dataclass
class Constant:
    """An object-like macro whose value clang folded."""
    name: str
    value: int | float | str | None  # None: a null pointer constant
    type: TypeRef
    header: str
    line: int
    expression: str = ""          # the macro's tokens, for docs
    doc: str | None = None
    since: str | None = None
    until: str | None = None  # the first release without it, when a newer one dropped it (merged IR only)
    versions: list[str] = field(default_factory=list)


@dataclass
class InitializerField:
    field: str
    value: int | float | str | None  # None: null pointer


@dataclass
class Initializer:
    """A *_INITIALIZER macro, as the field values it assigns."""
    name: str
    record: str                   # the IR record it initialises
    values: list[InitializerField]
    header: str
    line: int
    doc: str | None = None
    since: str | None = None
    until: str | None = None  # the first release without it, when a newer one dropped it (merged IR only)
    versions: list[str] = field(default_factory=list)
