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



def int_range(size: int, signed: bool) -> tuple[int, int]:
    """The range of a C integer of `size` bytes, signed or not."""
    bits = size * 8
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def c_declarator(t: TypeRef | None, inner: str = "", spell_name=None, const: bool = False) -> str:
    """The one C spelling of a type: `t` around the declarator `inner` (`int x[4]`,
    `void (*f)(int)`), or as in a cast when inner is empty (`const char *`).

    spell_name(t) spells a named type (record, typedef, enum, opaque, external):
    the header's name by default, the mirrors' prefixed names for the C binding.
    const qualifies t itself (the IR keeps a pointer's const on the pointer)."""
    spell_name = spell_name or (lambda named: named.name)
    if t is None or t.kind == "void":
        base = "void"
    elif t.kind == "pointer":
        star = "*" + ("const " if const else "") + inner
        if t.pointee is not None and t.pointee.kind == "array":
            star = f"({star})"
        return c_declarator(t.pointee, star, spell_name, t.const)
    elif t.kind == "array":
        return c_declarator(t.element, f"{inner}[{t.length}]", spell_name, const)
    elif t.kind == "function_pointer":
        params = ", ".join(c_declarator(p, "", spell_name) for p in t.params) or "void"
        return c_declarator(t.result, f"(*{inner})({params})", spell_name)
    elif t.kind in ("int", "float", "bool"):
        base = t.name
    elif t.kind == "opaque":
        base = f"struct {spell_name(t)}"
    else:
        base = spell_name(t)
    base = ("const " if const else "") + base
    if not inner:
        return base
    # `void *x`, not `void * x`: an external type may itself be spelled as a pointer.
    return base + inner if inner.startswith("[") or base.endswith("*") else f"{base} {inner}"
