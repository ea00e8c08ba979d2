"""The events between two API surfaces, and replaying events onto a surface.

Order (deterministic): sections as in surface.SECTIONS, items by name; within
an item, its own changes, then removed members, added members (by new
position), renamed members, and changed members. Replaying applies events in
that order, and checks every `old_*` against what it replaces.
"""
from __future__ import annotations

import copy
import difflib

from . import events as ev
from .surface import SECTIONS, empty_surface


def _matches(old_keys: list, new_keys: list):
    """Monotone (old index, new index) pairs of equal keys, and the unequal
    same-length stretches that pair up by position ("replace" blocks)."""
    same, replaced = [], []
    sm = difflib.SequenceMatcher(None, old_keys, new_keys, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            same.extend(zip(range(i1, i2), range(j1, j2)))
        elif tag == "replace" and i2 - i1 == j2 - j1:
            replaced.extend(zip(range(i1, i2), range(j1, j2)))
    return same, replaced


def _function_events(name, old, new):
    out = []
    if old["result"] != new["result"]:
        out.append(ev.FunctionResultChanged(name, new["result"], old["result"]))
    op, np_ = old["params"], new["params"]
    same, replaced = _matches([p["name"] for p in op], [p["name"] for p in np_])
    # A same-length stretch of differently named parameters is the same slots, renamed.
    pairs = sorted(same + replaced, key=lambda ij: ij[1])
    old_matched, new_matched = {i for i, _ in pairs}, {j for _, j in pairs}
    out += [ev.ParamRemoved(name, i, p["name"]) for i, p in enumerate(op) if i not in old_matched]
    out += [ev.ParamAdded(name, j, p["name"], p["type"]) for j, p in enumerate(np_) if j not in new_matched]
    out += [ev.ParamRenamed(name, j, np_[j]["name"], op[i]["name"]) for i, j in pairs
            if op[i]["name"] != np_[j]["name"]]
    out += [ev.ParamTypeChanged(name, j, np_[j]["name"], np_[j]["type"], op[i]["type"]) for i, j in pairs
            if op[i]["type"] != np_[j]["type"]]
    return out


def _field_key(f):
    return (f["name"], "bit_offset" in f)


def _record_events(name, old, new):
    out = []
    if old["kind"] != new["kind"]:
        out.append(ev.RecordKindChanged(name, new["kind"], old["kind"]))
    if old["size"] != new["size"]:
        out.append(ev.RecordSizeChanged(name, new["size"], old["size"]))
    if old["align"] != new["align"]:
        out.append(ev.RecordAlignChanged(name, new["align"], old["align"]))
    of, nf = old["fields"], new["fields"]
    same, _ = _matches([_field_key(f) for f in of], [_field_key(f) for f in nf])
    old_matched, new_matched = {i for i, _ in same}, {j for _, j in same}
    out += [ev.FieldRemoved(name, f["name"]) for i, f in enumerate(of) if i not in old_matched]
    out += [ev.FieldAdded(name, j, copy.deepcopy(f)) for j, f in enumerate(nf) if j not in new_matched]
    for i, j in same:
        a, b = of[i], nf[j]
        if a["type"] != b["type"]:
            out.append(ev.FieldTypeChanged(name, b["name"], b["type"], a["type"]))
        if a["offset"] != b["offset"]:
            out.append(ev.FieldOffsetChanged(name, b["name"], b["offset"], a["offset"]))
        if a.get("bit_offset") != b.get("bit_offset"):
            out.append(ev.FieldBitOffsetChanged(name, b["name"], b["bit_offset"], a["bit_offset"]))
    return out


def _enum_events(name, old, new):
    out = []
    if (old["size"], old["signed"]) != (new["size"], new["signed"]):
        out.append(ev.EnumTypeChanged(name, new["size"], new["signed"], old["size"], old["signed"]))
    ov, nv = old["values"], new["values"]
    out += [ev.EnumValueRemoved(name, k) for k in ov if k not in nv]
    out += [ev.EnumValueAdded(name, k, v) for k, v in nv.items() if k not in ov]
    out += [ev.EnumValueChanged(name, k, v, ov[k]) for k, v in nv.items() if k in ov and ov[k] != v]
    return out


def _typedef_events(name, old, new):
    return [ev.TypedefChanged(name, new, old)] if old != new else []


def _constant_events(name, old, new):
    out = []
    if old["type"] != new["type"]:
        out.append(ev.ConstantTypeChanged(name, new["type"], old["type"]))
    if old["value"] != new["value"] or type(old["value"]) is not type(new["value"]):
        out.append(ev.ConstantValueChanged(name, new["value"], old["value"]))
    return out


def _initializer_events(name, old, new):
    out = []
    if old["record"] != new["record"]:
        out.append(ev.InitializerRecordChanged(name, new["record"], old["record"]))
    ov, nv = old["values"], new["values"]
    out += [ev.InitializerFieldRemoved(name, k) for k in ov if k not in nv]
    out += [ev.InitializerFieldAdded(name, k, v) for k, v in nv.items() if k not in ov]
    out += [ev.InitializerValueChanged(name, k, v, ov[k]) for k, v in nv.items()
            if k in ov and (ov[k] != v or type(ov[k]) is not type(v))]
    return out


def _added(section, name, item):
    item = copy.deepcopy(item)
    if section == "functions":
        return ev.FunctionAdded(name, item["result"], item["params"])
    if section == "records":
        return ev.RecordAdded(name, item["kind"], item["size"], item["align"], item["fields"])
    if section == "enums":
        return ev.EnumAdded(name, item["size"], item["signed"], item["values"])
    if section == "typedefs":
        return ev.TypedefAdded(name, item)
    if section == "constants":
        return ev.ConstantAdded(name, item["type"], item["value"])
    return ev.InitializerAdded(name, item["record"], item["values"])


_REMOVED = {"functions": ev.FunctionRemoved, "records": ev.RecordRemoved, "enums": ev.EnumRemoved,
            "typedefs": ev.TypedefRemoved, "constants": ev.ConstantRemoved,
            "initializers": ev.InitializerRemoved}
_CHANGED = {"functions": _function_events, "records": _record_events, "enums": _enum_events,
            "typedefs": _typedef_events, "constants": _constant_events,
            "initializers": _initializer_events}


def diff_surfaces(old: dict, new: dict) -> list[ev.Event]:
    """The events that turn surface `old` into surface `new`."""
    out = []
    for section in SECTIONS:
        o, n = old[section], new[section]
        for name in sorted(set(o) | set(n)):
            if name not in n:
                out.append(_REMOVED[section](name))
            elif name not in o:
                out.append(_added(section, name, n[name]))
            else:
                out.extend(_CHANGED[section](name, o[name], n[name]))
    return out


class ReplayError(ValueError):
    """An event that does not fit the surface it is applied to."""


def _expect(cond, event, what):
    if not cond:
        raise ReplayError(f"{event.KIND} {event.item}: {what}")


def _field_named(fields, event):
    found = [f for f in fields if f["name"] == event.name]
    _expect(len(found) == 1, event, f"no single field {event.name}")
    return found[0]


def _apply(s: dict, e: ev.Event) -> None:
    items = s[e.SECTION]
    if isinstance(e, tuple(_REMOVED.values())):
        _expect(e.name in items, e, "removes an item that is not there")
        del items[e.name]
        return
    if e.KIND.endswith("_added") and e.ITEM == "name":
        _expect(e.name not in items, e, "adds an item that is already there")
        j = e.to_json()
        del j["kind"], j["name"]
        if isinstance(e, ev.RecordAdded):
            j["kind"] = j.pop("record_kind")
            j = {"kind": j["kind"], "size": j["size"], "align": j["align"], "fields": j["fields"]}
        items[e.name] = j["type"] if isinstance(e, ev.TypedefAdded) else j
        return
    _expect(e.item in items, e, "changes an item that is not there")
    item = items[e.item]
    match e:
        case ev.FunctionResultChanged():
            _expect(item["result"] == e.old_result, e, f"result is {item['result']}, not {e.old_result}")
            item["result"] = e.result
        case ev.ParamRemoved():
            names = [p["name"] for p in item["params"]]
            _expect(e.name in names, e, f"no parameter {e.name}")
            del item["params"][names.index(e.name)]
        case ev.ParamAdded():
            _expect(e.index <= len(item["params"]), e, f"index {e.index} past the end")
            item["params"].insert(e.index, {"name": e.name, "type": e.type})
        case ev.ParamRenamed():
            _expect(item["params"][e.index]["name"] == e.old_name, e, f"parameter {e.index} is not {e.old_name}")
            item["params"][e.index]["name"] = e.name
        case ev.ParamTypeChanged():
            p = item["params"][e.index]
            _expect((p["name"], p["type"]) == (e.name, e.old_type), e, f"parameter {e.index} is {p}")
            p["type"] = e.type
        case ev.RecordKindChanged():
            _expect(item["kind"] == e.old_record_kind, e, f"is a {item['kind']}")
            item["kind"] = e.record_kind
        case ev.RecordSizeChanged():
            _expect(item["size"] == e.old_size, e, f"size is {item['size']}")
            item["size"] = e.size
        case ev.RecordAlignChanged():
            _expect(item["align"] == e.old_align, e, f"align is {item['align']}")
            item["align"] = e.align
        case ev.FieldRemoved():
            item["fields"].remove(_field_named(item["fields"], e))
        case ev.FieldAdded():
            _expect(e.index <= len(item["fields"]), e, f"index {e.index} past the end")
            item["fields"].insert(e.index, copy.deepcopy(e.field))
        case ev.FieldTypeChanged():
            f = _field_named(item["fields"], e)
            _expect(f["type"] == e.old_type, e, f"field {e.name} is {f['type']}")
            f["type"] = e.type
        case ev.FieldOffsetChanged():
            f = _field_named(item["fields"], e)
            _expect(f["offset"] == e.old_offset, e, f"field {e.name} is at {f['offset']}")
            f["offset"] = e.offset
        case ev.FieldBitOffsetChanged():
            f = _field_named(item["fields"], e)
            _expect(f.get("bit_offset") == e.old_bit_offset, e, f"field {e.name} is at bit {f.get('bit_offset')}")
            f["bit_offset"] = e.bit_offset
        case ev.EnumTypeChanged():
            _expect((item["size"], item["signed"]) == (e.old_size, e.old_signed), e, "underlying type differs")
            item["size"], item["signed"] = e.size, e.signed
        case ev.EnumValueRemoved():
            _expect(e.name in item["values"], e, f"no value {e.name}")
            del item["values"][e.name]
        case ev.EnumValueAdded():
            _expect(e.name not in item["values"], e, f"{e.name} is already there")
            item["values"][e.name] = e.value
        case ev.EnumValueChanged():
            _expect(item["values"].get(e.name) == e.old_value, e, f"{e.name} is not {e.old_value}")
            item["values"][e.name] = e.value
        case ev.TypedefChanged():
            _expect(item == e.old_type, e, f"is {item}")
            items[e.name] = e.type
        case ev.ConstantTypeChanged():
            _expect(item["type"] == e.old_type, e, f"type is {item['type']}")
            item["type"] = e.type
        case ev.ConstantValueChanged():
            _expect(item["value"] == e.old_value, e, f"value is {item['value']!r}")
            item["value"] = e.value
        case ev.InitializerRecordChanged():
            _expect(item["record"] == e.old_record, e, f"initializes {item['record']}")
            item["record"] = e.record
        case ev.InitializerFieldRemoved():
            _expect(e.field in item["values"], e, f"does not set {e.field}")
            del item["values"][e.field]
        case ev.InitializerFieldAdded():
            _expect(e.field not in item["values"], e, f"already sets {e.field}")
            item["values"][e.field] = e.value
        case ev.InitializerValueChanged():
            _expect(item["values"].get(e.field) == e.old_value, e, f"{e.field} is not {e.old_value!r}")
            item["values"][e.field] = e.value
        case _:
            raise ReplayError(f"replay: no rule for {e.KIND}")


def replay(events, surface: dict | None = None) -> dict:
    """The surface after applying `events`, in order, to `surface` (default: empty)."""
    s = copy.deepcopy(surface) if surface is not None else empty_surface()
    for e in events:
        _apply(s, e)
    return s
