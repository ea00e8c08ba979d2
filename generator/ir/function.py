from __future__ import annotations

from dataclasses import dataclass, field

from .types import TypeRef


@dataclass
class Param:
    name: str                 # from the header, or argN for unnamed parameters
    type: TypeRef
    direction: str = "in"     # in | out | inout
    length_param: str | None = None  # an array whose element count is another parameter
    since: str | None = None  # first version that has it (merged IR only)
    # Other names older releases gave this parameter, at the same position with the same type
    # (merged IR only): a policy entry that names one still binds it, by position.
    former_names: list[str] = field(default_factory=list)


@dataclass
class Function:
    name: str
    result: TypeRef
    params: list[Param]
    header: str               # relative to its include root, e.g. nccl_device/core.h
    line: int
    library: str              # nccl | nccl_ep: which library exports it
    doc: str | None = None
    profiling_alias: str | None = None  # pncclX: same entry point, bound once
    blocking: bool = False    # may block: bindings release the GIL / document it
    throws: bool = False      # its C++ library may throw out of it: the C wrapper catches (conventions.toml)
    snake_name: str = ""      # name in Python and Rust (passes/naming.py)
    since: str | None = None
    until: str | None = None  # the first release without it, when a newer one dropped it (merged IR only)
    versions: list[str] = field(default_factory=list)
    # A parameter name of an older release that no parameter of the newest has, at its position
    # with its type -> the last release that has it (merged IR only).
    dropped_params: dict[str, str] = field(default_factory=dict)
