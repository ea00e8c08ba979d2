"""The CuTe DSL declarations of the device API's C ABI (ncclbind/device/_generated/cute.py): one
`@device_function` stub per C-ABI function of the IR (the newest header's declaration, the release
it first appears in), its parameters and result as the CuTe DSL types their C types lower to, and
one `@cute.native_struct` per record those functions take or return by value, its fields and
padding from the IR's layout.

A record passed by value is declared as a pointer (`ByVal`): clang, which builds NCCL's
libnccl_device.bc and ncclbind's wrapper bitcode, passes a record argument on NVPTX as a byval
pointer, and a prototype that says so is one LLVM inlines. The hand-written floor the stubs sit
on is ncclbind/device/base/cute_abi.py (ncclbind/device/cute_ffi.py says which bitcode links); the views over them (Coop, DevComm, Window, Gin, the barrier
sessions) are the other files of ncclbind/device/cute/."""
from __future__ import annotations

from ..policy.device_wrapper import load_device_wrapper
from . import RenderContext, environment, render_files

OUT = "bindings/python/ncclbind/device/_generated/cute.py"
# The C types the CuTe DSL has no record for, and the width they pass as (libcu++'s enums).
_EXTERNAL_INTS = {"cuda::memory_order": True, "cuda::std::thread_scope": True}


class CuteRenderError(Exception):
    """A device function or record the CuTe DSL cannot declare faithfully; generation stops."""


def _resolve(t: dict, typedefs: dict) -> dict:
    while t["kind"] == "typedef" and t["name"] in typedefs:
        t = typedefs[t["name"]]["type"]
    return t


def _integer(size: int, signed: bool) -> str:
    return f"cutlass.{'Int' if signed else 'Uint'}{size * 8}"


def _scalar(t: dict, typedefs: dict, where: str) -> str | None:
    """The CuTe type of a scalar C type (None for a record, which the caller handles)."""
    t = _resolve(t, typedefs)
    kind = t["kind"]
    if kind == "bool":
        return "cutlass.Boolean"
    if kind == "int":
        return _integer(t["size"], bool(t.get("signed")))
    if kind == "enum":
        return _integer(t["size"], t["size"] > 1)
    if kind == "external" and t.get("name") in _EXTERNAL_INTS and t.get("size") == 4:
        return "cutlass.Int32"
    if kind == "pointer":
        return "Ptr"
    if kind == "record":
        return None
    raise CuteRenderError(f"{where}: no CuTe DSL type for the C type {t}")


def _record_class(name: str) -> str:
    return name.removesuffix("_t")


def device_functions(merged: dict, surface: set[str]) -> tuple[list[dict], set[str]]:
    """The stubs' data for the device functions of the wrapper's C ABI (`surface`), and the
    records they take or return by value."""
    typedefs = {t["name"]: t for t in merged.get("typedefs", [])}
    functions, records = [], set()
    for fn in merged.get("device_functions", []):
        if fn["name"] not in surface:
            continue
        params = []
        for p in fn.get("params", []):
            where = f"{fn['name']}({p['name']})"
            token = _scalar(p["type"], typedefs, where)
            if token is None:
                if p.get("reference"):
                    raise CuteRenderError(f"{where}: a record by reference is a pointer in the IR")
                records.add(_resolve(p["type"], typedefs)["name"])
                token = "ByVal"
            params.append({"name": p["name"], "type": token, "c_type": p["spelling"]})
        result = fn["result"]
        if result["kind"] == "void":
            result_type = "None"
        else:
            result_type = _scalar(result, typedefs, f"{fn['name']}() result")
            if result_type is None:
                record = _resolve(result, typedefs)["name"]
                records.add(record)
                result_type = _record_class(record)
        functions.append({"name": fn["name"], "since": fn["since"], "params": params, "result": result_type,
                          "declaration": f"{fn['result_spelling']} {fn['name']}("
                                         + ", ".join(f"{p['spelling']} {p['name']}" for p in fn.get("params", []))
                                         + ")"})
    return sorted(functions, key=lambda f: f["name"]), records


def _field_token(t: dict, size: int, typedefs: dict, where: str) -> str:
    t = _resolve(t, typedefs)
    if t["kind"] == "bool":
        return "cutlass.Uint8"  # a C bool is a byte in memory (cutlass.Boolean is i1)
    if t["kind"] == "pointer":
        return "Ptr"
    if t["kind"] in ("int", "enum") and size in (1, 2, 4, 8):
        return _integer(size, bool(t.get("signed", t["kind"] == "enum")))
    raise CuteRenderError(f"{where}: a field of kind {t['kind']} in a record passed by value")


def record_structs(records: set[str], irs, typedefs: dict) -> list[dict]:
    """Per record, its fields (padding made explicit) from the newest header set that has it;
    every older device release must lay it out alike (offsets, sizes), else generation stops."""
    from ..ir.serialize import to_json
    layouts: dict[str, list] = {}
    for ir in sorted(irs, key=lambda ir: ir.version_code):
        for record in to_json(ir).get("records", []):
            if record["name"] in records:
                layouts.setdefault(record["name"], []).append((ir.version, record))
    structs = []
    for name in sorted(records):
        if name == "ncclCoopAny":
            continue  # always passed by address (Coop holds its storage): no value form needed
        if name not in layouts:
            raise CuteRenderError(f"{name}: passed by value, but no header set with a device API lays it out")
        version, newest = layouts[name][-1]
        shape = [(f["offset"], f["type"].get("size")) for f in newest["fields"]]
        for older, record in layouts[name][:-1]:
            if [(f["offset"], f["type"].get("size")) for f in record["fields"]] != shape or \
                    record["size"] != newest["size"]:
                raise CuteRenderError(f"{name}: NCCL {older} lays it out unlike {version}; a CuTe record per "
                                      "release is not implemented")
        fields, end = [], 0
        for f in newest["fields"]:
            size = f["type"]["size"]
            if f["offset"] > end:
                fields.append({"name": f"_pad{end}", "type": f"Bytes({f['offset'] - end})"})
            fields.append({"name": f["name"], "type": _field_token(f["type"], size, typedefs, f"{name}.{f['name']}")})
            end = f["offset"] + size
        if newest["size"] > end:
            fields.append({"name": f"_pad{end}", "type": f"Bytes({newest['size'] - end})"})
        structs.append({"name": _record_class(name), "c_name": name, "size": newest["size"],
                        "align": newest["align"], "fields": fields, "layout_from": version})
    return structs


def render(ctx: RenderContext) -> dict[str, str]:
    api = next((a for a in ctx.apis if a.device_functions), None)
    if api is None:
        return {}
    merged = api.to_json()
    irs = [ir for ir in ctx.irs if ir.library == api.library and "device_api" in ir.capabilities]
    functions, records = device_functions(merged, set(load_device_wrapper(api).symbols()))
    typedefs = {t["name"]: t for t in merged.get("typedefs", [])}
    structs = record_structs(records, irs, typedefs)
    names = [ir.name for ir in sorted(irs, key=lambda ir: ir.version_code)]
    return render_files(environment({}), [(OUT, "python/cute_device.py.j2", {
        "sources": ctx.source_line(names), "functions": functions, "structs": structs})])
