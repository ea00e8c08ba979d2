"""The device API's C ABI on every release: per NCCL header set, a CUDA source defining the
C-callable device functions of the newest nccl_device_wrapper.h over that release's C++ device
API (bindings/device_wrapper/nccl_device_wrapper-<set>.cu, policy: policy/device_wrapper.toml);
the header that names the C binding's mirror of each versioned record for the release in use
(bindings/device_wrapper/ncclbind_device_layouts.h); and the same sources with the table of what each
release leaves out for Python (ncclbind/device/_generated/wrapper.json).

One source per release, rather than one with version guards: each is what one release's
headers compile, and the file says what that release lacks."""
from __future__ import annotations

import json

from . import RenderContext, environment, render_files
from .c import PREFIX
from ..ir.serialize import to_json
from ..policy.device_wrapper import load_device_wrapper, plan_releases

OUT = "bindings/device_wrapper"
# Macros whose value a kernel passes to a C-ABI function (ncclGin_C_init's backendMask: the C++
# API's ncclGin is ncclGin_BackendMask<NCCL_GIN_BACKEND_MASK_ALL>); per header set, as each
# release enables its own GIN backends.
DEVICE_CONSTANTS = ("NCCL_GIN_BACKEND_MASK_ALL",)
# The wrapper's twins of its C-ABI functions, which ncclbind.device's Numba kernels call
# (ncclbind/device/linking.py names them alike): a function that takes or returns a record by
# value has a by-reference twin BY_REFERENCE_PREFIX + name; a function that takes a coop has a
# twin per stateless coop (ncclCoopAnyInit<Kind> with no other parameter: Cta, Warp, Thread)
# named COOP_PREFIX.format(kind=Kind.lower()) + name, over the C++ API instantiated for ncclCoop<Kind>.
BY_REFERENCE_PREFIX = "nb_ref_"
COOP_PREFIX = "nb_{kind}_"
COOP_INIT = "ncclCoopAnyInit"


def _declaration(fn, symbol: str) -> str:
    params = ", ".join(f"{p.spelling} {p.name}" + (f" = {p.default}" if p.default is not None else "")
                       for p in fn.params)
    return f"__device__ {fn.result_spelling} {symbol}({params or 'void'})"


def _record_params(fn) -> dict[str, str]:
    """{parameter: its record's C++ type without const} of the records `fn` takes by value."""
    return {p.name: p.spelling.removeprefix("const ").strip() for p in fn.params
            if p.type.kind == "record" and not p.reference}


def by_reference(functions) -> list[dict]:
    """The by-reference twins of the functions that take or return a record by value: for each,
    the function, its record parameters and its record result's C++ type (None: not a record).
    LLVM has no record type that Numba and nvcc spell alike, and link-time optimization inlines
    only a call whose prototype is the definition's; pointers and scalars are spelled alike."""
    twins = []
    for fn in functions:
        records = _record_params(fn)
        result = fn.result_spelling if fn.result.kind == "record" else None
        if records or result:
            twins.append({"function": fn, "symbol": BY_REFERENCE_PREFIX + fn.name, "records": records,
                          "result": result})
    return twins


def _coop_param(fn) -> str | None:
    """The parameter that is the coop, by value (ncclCoopAny) or by const pointer, or None."""
    for p in fn.params:
        if (p.type.kind == "record" and p.type.name == "ncclCoopAny") or (
                p.type.kind == "pointer" and p.type.pointee is not None
                and p.type.pointee.name == "ncclCoopAny" and p.spelling.startswith("const ")):
            return p.name
    return None


def coop_twins(functions, storage) -> list[dict]:
    """The twins of the functions that take a coop or a session (not NCCL's own header-inline
    functions, whose C signature is ncclCoopAny's), one per coop that holds no state the release
    has (ncclCoopAnyInit<Kind> with no other parameter): the function's body with ncclCoopAny
    naming ncclCoop<Kind> and the coop a fresh one, so NCCL's templates are instantiated for it.
    ncclCoopAny calls thread_rank/size/sync through a table of function pointers, which NVVM
    does not turn back into direct calls, in CUDA C++ neither. A session they take holds the
    session class of that coop, in the storage of ncclCoopAny's (no smaller)."""
    kinds = [fn.name[len(COOP_INIT):] for fn in functions if fn.name.startswith(COOP_INIT) and len(fn.params) == 1]
    storage_by_name = {s.name: s for s in storage}
    twins = []
    for fn in functions:
        coop = _coop_param(fn)
        sessions = {p.name: storage_by_name[p.type.pointee.name] for p in fn.params
                    if p.type.kind == "pointer" and p.type.pointee is not None
                    and p.type.pointee.name in storage_by_name}
        if (coop is None and not sessions) or fn.header_inline or fn.name.startswith(COOP_INIT):
            continue
        for kind in kinds:
            twins.append({"function": fn, "symbol": COOP_PREFIX.format(kind=kind.lower()) + fn.name,
                          "coop_type": f"ncclCoop{kind}", "coop": coop,
                          "coop_by_value": any(p.name == coop and p.type.kind == "record" for p in fn.params),
                          "records": {n: t for n, t in _record_params(fn).items() if n != coop},
                          "sessions": sessions,
                          "result": fn.result_spelling if fn.result.kind == "record" else None})
    return twins


def _named(value, names: set) -> None:
    """Every record, typedef or enum name a JSON-form type mentions."""
    if isinstance(value, dict):
        if value.get("kind") in ("record", "typedef", "enum") and "name" in value:
            names.add(value["name"])
        for v in value.values():
            _named(v, names)
    elif isinstance(value, list):
        for v in value:
            _named(v, names)


# What ncclbind.device reads in an installed package (no bindings/ beside it): the IR it needs, and
# the C-ABI wrapper's table (its sources are the .cu files of bindings/device_wrapper/).
DEVICE_IR = "bindings/python/ncclbind/device/_generated/ir.json"
DEVICE_WRAPPER = "bindings/python/ncclbind/device/_generated/wrapper.json"


def device_ir(api, irs, surface: set[str]) -> tuple[dict, dict]:
    """(api, header_sets) of ncclbind/device/_generated/ir.json: the IR's JSON form cut to what
    the device layer reads: the device functions of the wrapper's C ABI (`surface`; another
    interface, device_ir's ncclIr*, stays in bindings/ir/api/nccl.json) and the storage, the enums
    they name (in a type or a default), and per header set the records their types name
    (ncclTeam_t: ncclTeam or its tag)."""
    merged = api.to_json()
    functions = [fn for fn in merged.get("device_functions", []) if fn["name"] in surface]
    storage = merged.get("device_storage", [])
    text = json.dumps(functions)
    names: set = set()
    _named(functions, names)
    wanted = names | {n[:-2] for n in names if n.endswith("_t")}
    enums = [e for e in merged["enums"] if e["name"] in names or f"{e['name']}::" in text]
    device_versions = [ir.version for ir in sorted(irs, key=lambda ir: ir.version_code)]
    table = {"versions": device_versions,
             "version_codes": {v: c for v, c in merged["version_codes"].items() if v in device_versions},
             "device_functions": functions, "device_storage": storage, "enums": enums}
    sets = {}
    for ir in sorted(irs, key=lambda ir: ir.version_code):
        data = to_json(ir)
        records = [r for r in data.get("records", []) if r["name"] in wanted or r.get("tag") in wanted]
        constants = {c.name: c.value for c in ir.constants if c.name in DEVICE_CONSTANTS}
        sets[ir.version] = {"records": records, "device_storage": data.get("device_storage", []),
                            "constants": constants, "device_c_abi": "device_c_abi" in ir.capabilities}
    return table, sets


def render(ctx: RenderContext) -> dict[str, str]:
    api = next((a for a in ctx.apis if a.device_functions), None)
    if api is None:
        return {}
    policy = load_device_wrapper(api)
    # the releases with a device API (capability device_api); the others get no wrapper at all
    irs = [ir for ir in ctx.irs if ir.library == api.library and "device_api" in ir.capabilities]
    device_sets = [ir.name for ir in sorted(irs, key=lambda ir: ir.version_code)]
    plans = plan_releases(policy, api, irs)
    env = environment({})
    # the newest release whose headers declare the C ABI the wrapper renders (device_c_abi)
    declared = {v for wf in policy.functions if not wf.function.header_inline for v in wf.function.versions}
    newest = next(v for v in reversed(api.versions) if v in declared)
    outputs = []
    for plan in plans:
        ir = plan.ir
        functions = [wf.function for wf in policy.functions if wf.function.name in plan.bodies]
        outputs.append((f"{OUT}/nccl_device_wrapper-{ir.name}.cu", "cuda/device_wrapper.cu.j2", {
            "sources": ctx.source_line([ir.name]), "version": ir.version, "version_code": ir.version_code,
            "newest": newest, "includes": policy.includes, "storage": plan.storage, "functions": functions,
            "symbols": policy.symbols(), "prefix": policy.header_inline_prefix,
            "polyfills": plan.polyfills, "bodies": plan.bodies, "missing": plan.missing, "dropped": plan.dropped, "defaults": plan.defaults, "total": len(policy.functions),
            "by_reference": by_reference(functions), "by_reference_prefix": BY_REFERENCE_PREFIX,
            "coop_twins": coop_twins(functions, plan.storage)}))
    releases = []
    for ir in sorted(irs, key=lambda ir: ir.version_code):
        mirrors = []
        for name, variants in sorted(api.record_variants.items()):
            if len(variants) < 2 or variants[-1].record.anonymous:
                continue
            variant = next((v for v in variants if ir.version in v.versions), None)
            if variant is not None:
                mirrors.append((name, f"{PREFIX}{name}{variant.suffix}"))
        releases.append({"version": ir.version, "version_code": ir.version_code, "mirrors": mirrors})
    outputs.append((f"{OUT}/ncclbind_device_layouts.h", "cuda/device_layouts.h.j2",
                    {"sources": ctx.source_line(device_sets), "releases": releases}))
    files = render_files(env, outputs)
    # data, read at run time (ncclbind.device.wrapper_table): each release's wrapper by its file
    # name in bindings/device_wrapper/ (setup.py ships those files in the package), not its text
    symbols = policy.symbols()
    files[DEVICE_WRAPPER] = json.dumps({
        "functions": {fn.name: {"declaration": _declaration(fn, symbols[fn.name]), "since": fn.since,
                                "symbol": symbols[fn.name]} for fn in (wf.function for wf in policy.functions)},
        "header_sets": {p.ir.version: {"version_code": p.ir.version_code, "missing": p.missing, "dropped": p.dropped,
                                       "source": f"nccl_device_wrapper-{p.ir.name}.cu"} for p in plans},
    }, indent=1) + "\n"
    table, sets = device_ir(api, irs, set(symbols))
    # data, read at run time (ncclbind.device.ir_tables): JSON, so no banner; .gitattributes marks it
    files[DEVICE_IR] = json.dumps({"api": table, "header_sets": sets}, indent=1) + "\n"
    return files
