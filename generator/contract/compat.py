"""ABI compatibility for users of an older header set running on a newer one.

A break is anything that makes code built against `old` misbehave on `new`: a
function removed or its signature changed (result or parameter types, count),
an existing struct or union whose size, alignment, fields (added, even into
tail padding, removed, moved, retyped) changed or that went away, an enum whose
values or underlying type changed, a typedef that changed or went away. New
items are fine. Not breaks, but said out loud: growth at the end of a
versioned struct (size, magic, version first: NCCL reads only what the
caller's stamp covers), an opaque handle's pointee renamed (old code only
holds the pointer), sentinel enumerators (ncclNumResults counts, it is not a
value), renamed parameters, and constants and initializers (compile time: old
code keeps the old values).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import events as ev
from .describe import describe
from .diff import diff_surfaces
from .surface import api_surface
from ..ir import HeaderSetIR


@dataclass
class Finding:
    subject: str          # e.g. "struct ncclConfig_t", "function ncclCommSplit"
    what: str             # the change, for people
    reason: str           # why it is, or is not, a break
    events: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"subject": self.subject, "what": self.what, "reason": self.reason,
                "events": [e.to_json() for e in self.events]}


@dataclass
class CompatReport:
    old: str
    new: str
    breaks: list[Finding]
    not_breaks: list[Finding]
    # An interface the new set offers through another (capabilities.SUCCESSORS: NCCL's device
    # C ABI from nccl_device_wrapper.h to nccl_device_ir.h): what code built against the old
    # interface used is gone, but the service is not; said apart from the breaks.
    moved: list[Finding] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"old": self.old, "new": self.new, "breaks": [f.to_json() for f in self.breaks],
                "not_breaks": [f.to_json() for f in self.not_breaks], "moved": [f.to_json() for f in self.moved]}


_SUBJECT = {"functions": "function", "enums": "enum", "typedefs": "typedef", "constants": "constant",
            "initializers": "initializer"}

_BREAK_REASON = {
    "function_removed": "no longer declared: the API stops promising it (the library may still export "
                        "it; ncclbind reports NCCLBIND_ERROR_SYMBOL_NOT_FOUND where it does not)",
    "function_result_changed": "signature changed: the result type",
    "param_added": "signature changed: a parameter was added",
    "param_removed": "signature changed: a parameter was removed",
    "param_type_changed": "signature changed: a parameter's type",
    "record_removed": "code built against the old header uses a type that no longer exists",
    "record_kind_changed": "layout changed: struct/union",
    "record_size_changed": "layout changed: the size",
    "record_align_changed": "layout changed: the alignment",
    "field_added": "layout changed: a field was added (code built against the old header neither sets nor "
                   "expects it)",
    "field_removed": "layout changed: a field went away",
    "field_type_changed": "layout changed: a field's type",
    "field_offset_changed": "layout changed: a field moved",
    "field_bit_offset_changed": "layout changed: a bitfield moved",
    "enum_removed": "code built against the old header uses a type that no longer exists",
    "enum_type_changed": "the enum's underlying integer type changed",
    "enum_value_removed": "a value old code passes is gone",
    "enum_value_changed": "a value old code passes now means something else",
    "typedef_removed": "code built against the old header uses a type that no longer exists",
    "typedef_changed": "the type behind the name changed",
}

_NOT_BREAK_REASON = {
    "param_renamed": "parameter names are not part of the ABI",
    "constant_removed": "a compile-time constant: old code keeps its own copy of the value",
    "constant_value_changed": "a compile-time constant: old code keeps its own copy of the value",
    "constant_type_changed": "a compile-time constant: old code keeps its own copy of the value",
    "initializer_removed": "an initializer macro: old code keeps the values it was compiled with",
    "initializer_record_changed": "an initializer macro: old code keeps the values it was compiled with",
    "initializer_field_removed": "an initializer macro: old code keeps the values it was compiled with",
    "initializer_value_changed": "an initializer macro: old code keeps the values it was compiled with",
}


def _subject(section: str, name: str, old: dict, new: dict) -> str:
    if section == "records":
        return (old["records"].get(name) or new["records"][name])["kind"]
    return _SUBJECT[section]


def _resolve(type_name: str, typedefs: dict) -> str:
    """The type name with whole-name typedefs (and typedefs under a trailing `*`) expanded."""
    seen = set()
    while type_name in typedefs and type_name not in seen:
        seen.add(type_name)
        type_name = typedefs[type_name]
    if type_name.endswith(" *"):
        inner = _resolve(type_name[:-2], typedefs)
        return inner + ("*" if inner.endswith("*") else " *")
    return type_name


def _versioned_growth(old_rec: dict, record_events: list) -> bool:
    """Only grew at the end: fields appended after every old field (into the old tail
    padding or past it) and maybe a bigger size; nothing else about the record changed."""
    return all(isinstance(e, ev.RecordSizeChanged) and e.size > e.old_size
               or isinstance(e, ev.FieldAdded) and e.index >= len(old_rec["fields"]) for e in record_events)


def _growth_text(name: str, old_rec: dict, record_events: list) -> str:
    added = ", ".join(e.field["name"] for e in record_events if isinstance(e, ev.FieldAdded))
    size = next((e for e in record_events if isinstance(e, ev.RecordSizeChanged)), None)
    into = f"{size.old_size} -> {size.size} bytes" if size else f"into its tail padding, still {old_rec['size']} bytes"
    return f"{name}: grows at the end, {into}: {added} added"


def _handle_renamed(e: ev.Event, handles: set, new_ir: HeaderSetIR) -> bool:
    """An opaque handle (a pointer to a struct the old header never defines) that still
    points to a struct, under another name: old code only ever held the pointer."""
    if not isinstance(e, ev.TypedefChanged) or e.name not in handles:
        return False
    t = next(t.type for t in new_ir.typedefs if t.name == e.name)
    return t.kind == "pointer" and t.pointee.kind in ("opaque", "record")


def _renamed_records(old_ir: HeaderSetIR, new_ir: HeaderSetIR) -> dict:
    """new name -> old name of each struct that the new header names otherwise (by a typedef
    instead of its tag, or the other way round): the same `struct tag`, so the same type."""
    old_names, new_names = {r.name for r in old_ir.records}, {r.name for r in new_ir.records}
    gone = {r.tag or r.name: r.name for r in old_ir.records if r.name not in new_names}
    return {r.name: gone[r.tag or r.name] for r in new_ir.records
            if r.name not in old_names and (r.tag or r.name) in gone}


def _moved_interfaces(old_ir: HeaderSetIR, new_ir: HeaderSetIR) -> dict[str, str]:
    """old capability -> the successor the new set has in its place (capabilities.SUCCESSORS)."""
    from ..passes.capabilities import SUCCESSORS
    return {c: SUCCESSORS[c] for c in old_ir.capabilities or ()
            if c not in (new_ir.capabilities or ()) and SUCCESSORS.get(c) in (new_ir.capabilities or ())}


def _interface_findings(old_ir: HeaderSetIR, new_ir: HeaderSetIR, moved: dict[str, str]) -> list[Finding]:
    """One finding per moved device interface: its device functions, counted and named by header."""
    from ..passes.capabilities import interface_functions
    out = []
    for before, after in moved.items():
        gone = interface_functions(old_ir.device_functions, before)
        now = interface_functions(new_ir.device_functions, after)
        old_headers = ", ".join(sorted({f.header for f in gone}))
        new_headers = ", ".join(sorted({f.header for f in now}))
        out.append(Finding(f"device interface {before}",
                           f"{len(gone)} device functions of {old_headers} ({before}) -> {len(now)} of "
                           f"{new_headers} ({after})",
                           "the device C ABI moved to another interface: a kernel linked against the old "
                           "functions must call the new ones (ncclbind's device wrapper keeps the old names over "
                           "the release's C++ device API)"))
    return out


def check_compat(old_ir: HeaderSetIR, new_ir: HeaderSetIR) -> CompatReport:
    old, new = api_surface(old_ir), api_surface(new_ir)
    moved = _moved_interfaces(old_ir, new_ir)
    device_only = {r.name for r in old_ir.records if r.device_only}
    renamed = _renamed_records(old_ir, new_ir)
    for new_name, old_name in renamed.items():   # compared under the old name
        new["records"][old_name] = new["records"].pop(new_name)
    new_types = {**new["typedefs"], **renamed}
    events = diff_surfaces(old, new)
    versioned = {r.name for r in old_ir.records if r.versioned_header}
    handles = {t.name for t in old_ir.typedefs if t.opaque_handle}
    sentinels = {(e.name, v.name) for ir in (old_ir, new_ir) for e in ir.enums for v in e.values if v.sentinel}
    breaks, not_breaks = [], []
    moved_findings = _interface_findings(old_ir, new_ir, moved)
    for new_name, old_name in sorted(renamed.items(), key=lambda kv: kv[1]):
        not_breaks.append(Finding(f"{old['records'][old_name]['kind']} {old_name}",
                                  f"{old_name}: now named {new_name}",
                                  "the same struct tag, named through a typedef or not: a C name, not part of "
                                  "the ABI (its layout is compared as one record)"))
    by_record = {}
    for e in events:
        if e.SECTION == "records" and e.item in old["records"]:
            by_record.setdefault(e.item, []).append(e)
    grown = {name for name, es in by_record.items()
             if name in versioned and _versioned_growth(old["records"][name], es)}
    for name in sorted(grown):
        es = by_record[name]
        not_breaks.append(Finding(
            f"struct {name}", _growth_text(name, old["records"][name], es),
            "a versioned struct (size, magic, version first): the caller passes the size and version it was "
            "built with, and the library reads only the fields that stamp covers (nothing past that size; the "
            "version says which fields in the old tail padding the caller knows), so old code keeps working "
            "(NCCL's rule for versioned structs)", es))
    for e in events:
        subject = f"{_subject(e.SECTION, e.item, old, new)} {e.item}"
        if e.SECTION == "records" and e.item in grown:
            continue
        if isinstance(e, (ev.EnumValueChanged, ev.EnumValueRemoved)) and (e.enum, e.name) in sentinels:
            not_breaks.append(Finding(subject, describe(e), f"{e.name} is a sentinel (a count or bound), "
                                      "not a value anyone passes", [e]))
            continue
        if isinstance(e, (ev.FieldTypeChanged, ev.ParamTypeChanged, ev.TypedefChanged)) and \
                _resolve(e.old_type, old["typedefs"]) == _resolve(e.type, new_types):
            not_breaks.append(Finding(subject, describe(e), "the same type, spelled through a typedef "
                                      f"({_resolve(e.type, new_types)})", [e]))
            continue
        if _handle_renamed(e, handles, new_ir):
            not_breaks.append(Finding(subject, describe(e), "an opaque handle: old code only holds and passes "
                                      "the pointer, never the struct behind it, so the pointee's name is not "
                                      "part of the ABI", [e]))
            continue
        if moved and isinstance(e, ev.RecordRemoved) and e.item in device_only:
            moved_findings.append(Finding(subject, describe(e), f"a device-only type of {', '.join(moved)}, which "
                                          f"moved to {', '.join(moved.values())}", [e]))
            continue
        if e.KIND in _BREAK_REASON:
            breaks.append(Finding(subject, describe(e), _BREAK_REASON[e.KIND], [e]))
        elif e.KIND in _NOT_BREAK_REASON:
            not_breaks.append(Finding(subject, describe(e), _NOT_BREAK_REASON[e.KIND], [e]))
    return CompatReport(old_ir.name, new_ir.name, breaks, not_breaks, moved_findings)


def by_subject(findings: list[Finding]) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """[(subject, [(reason, [what, ...])])], in first-seen order."""
    groups: dict[str, dict[str, list[str]]] = {}
    for f in findings:
        groups.setdefault(f.subject, {}).setdefault(f.reason, []).append(f.what)
    return [(subject, list(reasons.items())) for subject, reasons in groups.items()]
