"""Read a HeaderSetIR back from its JSON dump (bindings/ir/<set>.json).

The dump (ir/serialize.py) leaves out None, empty lists and False-by-default
fields; reading fills them back from each dataclass's fields, and fails on any
key the dataclass does not have."""
from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path

from ..ir import (Constant, DeviceFunction, DeviceParam, DeviceStorage, Enum, EnumValue, Field, Function,
                  HeaderSetIR, Initializer, InitializerField, Param, Record, SkippedItem, StorageMember, Typedef,
                  TypeRef)

# The dataclass a JSON object becomes, by the dataclass field that holds it.
_ITEM_CLASS = {
    (HeaderSetIR, "functions"): Function, (HeaderSetIR, "records"): Record, (HeaderSetIR, "enums"): Enum,
    (HeaderSetIR, "typedefs"): Typedef, (HeaderSetIR, "constants"): Constant,
    (HeaderSetIR, "initializers"): Initializer, (HeaderSetIR, "skipped"): SkippedItem,
    (Function, "params"): Param, (Record, "fields"): Field, (Enum, "values"): EnumValue,
    (Initializer, "values"): InitializerField,
    (HeaderSetIR, "device_functions"): DeviceFunction, (DeviceFunction, "params"): DeviceParam,
    (HeaderSetIR, "device_storage"): DeviceStorage, (DeviceStorage, "members"): StorageMember,
}


def _is_list(hint) -> bool:
    return typing.get_origin(hint) is list or hint is list


def _is_typeref(hint) -> bool:
    if hint is TypeRef:
        return True
    return isinstance(hint, types.UnionType) and TypeRef in typing.get_args(hint)


def _typeref(raw: dict) -> TypeRef:
    unknown = set(raw) - {f.name for f in dataclasses.fields(TypeRef)}
    if unknown:
        raise ValueError(f"TypeRef: unknown keys {sorted(unknown)} in {raw}")
    kw = dict(raw)
    for key in ("pointee", "element", "result"):
        if key in kw:
            kw[key] = _typeref(kw[key])
    kw["params"] = tuple(_typeref(p) for p in kw.get("params", ()))
    return TypeRef(**kw)


def _build(cls, raw: dict):
    if not isinstance(raw, dict):
        raise ValueError(f"{cls.__name__}: expected an object, got {raw!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(raw) - names
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown keys {sorted(unknown)}")
    kw = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if f.name not in raw:
            # Left out by the dump: None, an empty list, or the field's default.
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                continue
            kw[f.name] = [] if _is_list(hint) else None
            continue
        value = raw[f.name]
        if (cls, f.name) in _ITEM_CLASS:
            kw[f.name] = [_build(_ITEM_CLASS[cls, f.name], v) for v in value]
        elif _is_typeref(hint):
            kw[f.name] = _typeref(value) if value is not None else None
        else:
            kw[f.name] = value
    return cls(**kw)


def ir_from_json(raw: dict) -> HeaderSetIR:
    """The HeaderSetIR whose to_json() is `raw`."""
    return _build(HeaderSetIR, raw)


def load_ir(path: Path | str) -> HeaderSetIR:
    return ir_from_json(json.loads(Path(path).read_text()))
