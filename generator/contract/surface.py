"""The API surface of a header set: the IR without positions, docs and the
generator's own annotations (directions, snake names, blocking, sentinels).

    functions     name -> {result, params: [{name, type}]}      (params in order)
    records       name -> {kind, size, align, fields: [{name, type, offset[, bit_offset]}]}
    enums         name -> {size, signed, values: {name: value}}
    typedefs      name -> type
    constants     name -> {type, value}
    initializers  name -> {record, values: {field: value}}

Types are C type names ("const char *", "int[8]", "cudaError_t (*)(void *)");
a bitfield's type carries its width ("unsigned int : 3"). Two header sets
have the same API exactly when their surfaces are equal.
"""
from __future__ import annotations

from ..ir import HeaderSetIR, TypeRef
from ..ir.types import c_declarator

SECTIONS = ("functions", "records", "enums", "typedefs", "constants", "initializers")


def empty_surface() -> dict:
    return {s: {} for s in SECTIONS}


def type_name(t: TypeRef) -> str:
    """The C type name of t, as in a cast: `const char *`, `int[8]`."""
    return c_declarator(t)


def _unique(items, what: str, ir_name: str) -> dict:
    out = {}
    for item in items:
        if item.name in out:
            raise ValueError(f"{ir_name}: two {what} named {item.name}")
        out[item.name] = item
    return out


def api_surface(ir: HeaderSetIR) -> dict:
    surface = empty_surface()
    for fn in _unique(ir.functions, "functions", ir.name).values():
        surface["functions"][fn.name] = {
            "result": type_name(fn.result),
            "params": [{"name": p.name, "type": type_name(p.type)} for p in fn.params]}
    for r in _unique(ir.records, "records", ir.name).values():
        fields = []
        for f in r.fields:
            entry = {"name": f.name, "type": type_name(f.type), "offset": f.offset}
            if f.bit_width is not None:
                entry["type"] += f" : {f.bit_width}"
                entry["bit_offset"] = f.bit_offset
            fields.append(entry)
        surface["records"][r.name] = {"kind": r.kind, "size": r.size, "align": r.align, "fields": fields}
    for e in _unique(ir.enums, "enums", ir.name).values():
        surface["enums"][e.name] = {"size": e.size, "signed": e.signed,
                                    "values": {v.name: v.value for v in e.values}}
    for t in _unique(ir.typedefs, "typedefs", ir.name).values():
        surface["typedefs"][t.name] = type_name(t.type)
    for c in _unique(ir.constants, "constants", ir.name).values():
        surface["constants"][c.name] = {"type": type_name(c.type), "value": c.value}
    for i in _unique(ir.initializers, "initializers", ir.name).values():
        surface["initializers"][i.name] = {"record": i.record, "values": {v.field: v.value for v in i.values}}
    return surface
