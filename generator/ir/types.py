"""Type references: how a parameter, field or typedef names its type."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TypeRef:
    """One C type, structurally.

    kind is one of:
      void; int (name is the C spelling: int, unsigned int, size_t, int64_t, char, ...);
      float (float, double); bool;
      pointer (pointee, const = pointee is const);
      array (element, length);
      typedef / record / enum (name: an IR item of that kind);
      handle (name: a pointer to an opaque struct, e.g. ncclComm_t's target);
      external (name: a type from outside NCCL mapped by conventions, e.g. cudaStream_t);
      function_pointer (result, params).
    size and align are clang's, in bytes (0 for void and function types).
    """
    kind: str
    name: str | None = None
    pointee: TypeRef | None = None
    element: TypeRef | None = None
    length: int | None = None
    const: bool = False
    signed: bool | None = None
    result: TypeRef | None = None
    params: tuple = field(default_factory=tuple)
    size: int = 0
    align: int = 0

    def is_pointer(self) -> bool:
        return self.kind == "pointer"

    def c_spelling(self, prefix: str = "") -> str:
        """C spelling, with IR-defined names prefixed (the mirrors' names)."""
        k = self.kind
        if k == "void":
            return "void"
        if k in ("int", "float", "bool"):
            return self.name
        if k in ("typedef", "record", "enum", "external"):
            return prefix + self.name if k != "external" else self.name
        if k == "pointer":
            inner = self.pointee.c_spelling(prefix)
            return ("const " if self.const else "") + inner + " *"
        raise ValueError(f"c_spelling: no inline spelling for {k}")
