"""Events for people: one line each, grouped by section, with counts."""
from __future__ import annotations

from collections import Counter

from . import events as ev
from .surface import SECTIONS

SECTION_TITLES = {"functions": "Functions", "records": "Structs and unions", "enums": "Enums",
                  "typedefs": "Typedefs", "constants": "Constants", "initializers": "Initializers"}


def value_text(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return '"' + v.encode("unicode_escape").decode() + '"'
    return repr(v)


def declaration(type_name: str, name: str) -> str:
    """const char *s, int n: a type name and a name as C declares them (arrays and
    function pointers stay in type-name form, followed by the name)."""
    return f"{type_name}{name}" if type_name.endswith("*") else f"{type_name} {name}"


def _field_text(f: dict) -> str:
    at = f"offset {f['offset']}" + (f", bit {f['bit_offset']}" if "bit_offset" in f else "")
    return f"at {at}: {declaration(f['type'], f['name'])}"


def sign(e: ev.Event) -> str:
    return "+" if e.KIND.endswith("_added") else "-" if e.KIND.endswith("_removed") else "~"


def describe(e: ev.Event) -> str:
    """One line, without the sign."""
    match e:
        case ev.FunctionAdded():
            params = ", ".join(declaration(p["type"], p["name"]) for p in e.params) or "void"
            return f"{declaration(e.result, e.name)}({params})"
        case ev.FunctionResultChanged():
            return f"{e.name}: returns {e.result} (was {e.old_result})"
        case ev.ParamAdded():
            return f"{e.function}: parameter {e.index} added: {declaration(e.type, e.name)}"
        case ev.ParamRemoved():
            return f"{e.function}: parameter {e.index} removed: {e.name}"
        case ev.ParamRenamed():
            return f"{e.function}: parameter {e.index} renamed {e.old_name} -> {e.name}"
        case ev.ParamTypeChanged():
            return f"{e.function}: parameter {e.index} {e.name}: type {e.old_type} -> {e.type}"
        case ev.RecordAdded():
            n = len(e.fields)
            return f"{e.record_kind} {e.name}: {e.size} bytes, align {e.align}, {n} field{'s' * (n != 1)}"
        case ev.RecordKindChanged():
            return f"{e.name}: a {e.record_kind} (was a {e.old_record_kind})"
        case ev.RecordSizeChanged():
            return f"{e.name}: size {e.old_size} -> {e.size} bytes"
        case ev.RecordAlignChanged():
            return f"{e.name}: align {e.old_align} -> {e.align}"
        case ev.FieldAdded():
            return f"{e.record}: field added {_field_text(e.field)}"
        case ev.FieldRemoved():
            return f"{e.record}: field removed: {e.name}"
        case ev.FieldTypeChanged():
            return f"{e.record}.{e.name}: type {e.old_type} -> {e.type}"
        case ev.FieldOffsetChanged():
            return f"{e.record}.{e.name}: offset {e.old_offset} -> {e.offset}"
        case ev.FieldBitOffsetChanged():
            return f"{e.record}.{e.name}: bit offset {e.old_bit_offset} -> {e.bit_offset}"
        case ev.EnumAdded():
            values = ", ".join(f"{k} = {v}" for k, v in e.values.items())
            return f"{e.name} ({e.size}-byte {'signed' if e.signed else 'unsigned'}): {values}"
        case ev.EnumTypeChanged():
            return (f"{e.name}: underlying type {e.old_size}-byte {'signed' if e.old_signed else 'unsigned'}"
                    f" -> {e.size}-byte {'signed' if e.signed else 'unsigned'}")
        case ev.EnumValueAdded():
            return f"{e.enum}: {e.name} = {e.value} added"
        case ev.EnumValueRemoved():
            return f"{e.enum}: {e.name} removed"
        case ev.EnumValueChanged():
            return f"{e.enum}.{e.name}: {e.old_value} -> {e.value}"
        case ev.TypedefAdded():
            return f"{e.name} = {e.type}"
        case ev.TypedefChanged():
            return f"{e.name}: {e.old_type} -> {e.type}"
        case ev.ConstantAdded():
            return f"{e.name} = {value_text(e.value)} ({e.type})"
        case ev.ConstantValueChanged():
            return f"{e.name}: {value_text(e.old_value)} -> {value_text(e.value)}"
        case ev.ConstantTypeChanged():
            return f"{e.name}: type {e.old_type} -> {e.type}"
        case ev.InitializerAdded():
            return f"{e.name} for {e.record} ({len(e.values)} fields)"
        case ev.InitializerRecordChanged():
            return f"{e.name}: initializes {e.record} (was {e.old_record})"
        case ev.InitializerFieldAdded():
            return f"{e.initializer}: sets {e.field} = {value_text(e.value)}"
        case ev.InitializerFieldRemoved():
            return f"{e.initializer}: no longer sets {e.field}"
        case ev.InitializerValueChanged():
            return f"{e.initializer}.{e.field}: {value_text(e.old_value)} -> {value_text(e.value)}"
        case _ if e.KIND.endswith("_removed"):
            return e.name
    raise ValueError(f"describe: no text for {e.KIND}")


def section_counts(events) -> dict:
    """section -> {"added": n, "removed": n, "changed": n}, counting items, not events."""
    out = {}
    for section in SECTIONS:
        sec = [e for e in events if e.SECTION == section]
        added = {e.item for e in sec if e.ITEM == "name" and e.KIND.endswith("_added")}
        removed = {e.item for e in sec if e.ITEM == "name" and e.KIND.endswith("_removed")}
        changed = {e.item for e in sec} - added - removed
        if added or removed or changed:
            out[section] = {"added": len(added), "removed": len(removed), "changed": len(changed)}
    return out


def summary_line(counts: dict) -> str:
    parts = []
    for section, c in counts.items():
        nums = ", ".join(f"{n} {what}" for what, n in c.items() if n)
        parts.append(f"{section} {nums}")
    return "; ".join(parts) or "no changes"


def grouped(events) -> list[tuple[str, list[str]]]:
    """[(section title, ["+ line", ...])]: per section the items added, the items removed,
    then every change to the others, each in event order; empty sections left out."""
    out = []
    for section in SECTIONS:
        sec = [e for e in events if e.SECTION == section]
        added = [e for e in sec if e.ITEM == "name" and e.KIND.endswith("_added")]
        removed = [e for e in sec if e.ITEM == "name" and e.KIND.endswith("_removed")]
        changed = [e for e in sec if e not in added and e not in removed]
        lines = [f"{sign(e)} {describe(e)}" for e in added + removed + changed]
        if lines:
            out.append((SECTION_TITLES[section], lines))
    return out


def kind_counts(events) -> dict:
    return dict(sorted(Counter(e.KIND for e in events).items()))
