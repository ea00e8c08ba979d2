"""The device API's C-ABI wrapper as data (policy/device_wrapper.toml): what each
C-callable device function's body calls in the C++ device API, checked against the merged IR
when it loads, and which release can provide which function.

The function list and every signature are the IR's (the newest header set's device functions);
the policy adds only bodies and what they need. `load_device_wrapper(api)` raises
DeviceWrapperPolicyError naming the entry for a function the IR does not have, a {placeholder}
that is not a parameter, a parameter the body does not pass, or an IR function without a body.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..ir.serialize import to_json
from ..passes.capabilities import interface_functions
from .common import POLICY_DIR

POLICY_PATH = POLICY_DIR / "device_wrapper.toml"
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_TOP_KEYS = {"includes", "dtypes", "storage", "function", "header_inline", "polyfill"}
# The records templates/cuda/device_wrapper.cu.j2 can write a stand-in for ([polyfill.<name>]).
_POLYFILLS = {"ncclCoopAny"}
_ENTRY_KEYS = {"name", "family", "body", "needs", "variant"}


class DeviceWrapperPolicyError(ValueError):
    """device_wrapper.toml disagrees with the IR; the message names the entry."""


@dataclass
class Variant:
    body: str                    # C++ with the parameters substituted
    needs: list[str]             # names / Record.field the release must have


@dataclass
class WrapperFunction:
    function: object             # the merged IR's DeviceFunction (newest signature)
    variants: list[Variant]
    symbol: str = ""             # the name the wrapper defines: the function's, or prefixed (header_inline)
    # A forwarding body (a header_inline function without an entry) calls NCCL's function with the
    # newest signature: a release whose declaration differs cannot provide it.
    same_signature: bool = False

    def __post_init__(self):
        self.symbol = self.symbol or self.function.name


@dataclass
class Polyfill:
    """The wrapper's own definition of a record a release's headers lack ([polyfill.<name>]):
    the C++ types it holds (each a name the release must have) and the newest IR's layout."""
    name: str
    kinds: list[str]
    size: int
    align: int

    @property
    def needs(self) -> list[str]:
        return list(self.kinds)


@dataclass
class DeviceWrapperSpec:
    includes: list[str]
    dtypes: dict[str, str]
    storage: dict[str, list[str]]            # storage record -> needs
    functions: list[WrapperFunction] = field(default_factory=list)  # IR order
    header_inline_prefix: str = ""
    polyfills: list[Polyfill] = field(default_factory=list)
    # header_inline functions a release without the C ABI declaration may still provide: its C++
    # API defines a function of the same name with the newest declaration's parameters (which the
    # IR sees only by name, in device_cxx_names); the forwarding body calls it
    cxx_same_name: set[str] = field(default_factory=set)

    def symbols(self) -> dict[str, str]:
        """{IR function: the symbol the wrapper defines for it}."""
        return {wf.function.name: wf.symbol for wf in self.functions}


def _forwarding_body(fn) -> str:
    """`return ncclGinFlush(net, coop, ord);`: a header_inline function called as declared."""
    call = f"{fn.name}({', '.join(p.name for p in fn.params)});"
    return call if fn.result.kind == "void" else f"return {call}"


def _fail(where: str, message: str):
    raise DeviceWrapperPolicyError(f"{POLICY_PATH.name}: {where}: {message}")


def _pointee_spelling(spelling: str) -> str:
    return spelling.replace("const", "").replace("*", "").strip()


def _variants(where: str, entry: dict, fn, element: str | None) -> list[Variant]:
    unknown = set(entry) - _ENTRY_KEYS
    if unknown:
        _fail(where, f"unknown keys {sorted(unknown)} (allowed: {sorted(_ENTRY_KEYS)})")
    raw = entry.get("variant") or [{"body": entry.get("body"), "needs": []}]
    if "variant" in entry and "body" in entry:
        _fail(where, "has both body and variant: give one")
    shared = list(entry.get("needs", []))
    params = [p.name for p in fn.params]
    out = []
    for i, v in enumerate(raw):
        here = f"{where}, variant {i + 1}" if "variant" in entry else where
        if set(v) - {"body", "needs"}:
            _fail(here, f"unknown keys {sorted(set(v) - {'body', 'needs'})}")
        body = v.get("body")
        if not isinstance(body, str) or not body.strip():
            _fail(here, "no body")
        used = _PLACEHOLDER.findall(body)
        for name in used:
            if name == "T" and element is not None:
                continue
            if name not in params:
                _fail(here, f"{{{name}}} is not a parameter of {fn.name} ({', '.join(params) or 'none'})")
        unused = [p for p in params if p not in used]
        if unused:
            _fail(here, f"the body does not pass {', '.join(unused)} of {fn.name}")
        text = _PLACEHOLDER.sub(lambda m: element if m.group(1) == "T" else m.group(1), body)
        needs = shared + list(v.get("needs", []))
        if not all(isinstance(n, str) and n for n in needs):
            _fail(here, "needs must be a list of names")
        out.append(Variant(text, needs))
    return out


def _polyfills(raw: dict, api, bodies: dict[str, list[Variant]]) -> list[Polyfill]:
    """[polyfill.<name>] checked: a record the template can write, of the IR (its newest layout),
    whose kinds are exactly the types the <name>Init<Kind> functions' bodies need."""
    records = {r.name: r for r in api.records}
    out = []
    for name, entry in raw.items():
        where = f"[polyfill.{name}]"
        if name not in _POLYFILLS:
            _fail(where, f"templates/cuda/device_wrapper.cu.j2 writes a stand-in only for {', '.join(sorted(_POLYFILLS))}")
        if name not in records:
            _fail(where, "not a record of the IR (bindings/ir/api/nccl.json)")
        if not isinstance(entry, dict) or set(entry) - {"kinds"}:
            _fail(where, "allowed keys: ['kinds']")
        kinds = entry.get("kinds")
        if not isinstance(kinds, list) or not kinds or not all(isinstance(k, str) and k for k in kinds) \
                or len(set(kinds)) != len(kinds):
            _fail(where, "kinds must be a list of distinct C++ type names")
        inits = {n: vs for n, vs in bodies.items() if n.startswith(name + "Init")}
        if not inits:
            _fail(where, f"the IR has no {name}Init<Kind> function to take the kinds from")
        named = {need for vs in inits.values() for v in vs for need in v.needs}
        if set(kinds) != named:
            _fail(where, f"kinds {sorted(kinds)} are not the types the {name}Init<Kind> bodies need ({sorted(named)})")
        record = records[name]
        out.append(Polyfill(name, kinds, record.size, record.align))
    return out


def load_device_wrapper(api, path: Path = POLICY_PATH) -> DeviceWrapperSpec:
    """The policy, checked against `api` (the merged NCCL LibraryAPI)."""
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        _fail("top level", f"unknown keys {sorted(unknown)} (allowed: {sorted(_TOP_KEYS)})")
    # The wrapper's surface: NCCL's C ABI over ncclCoopAny (device_c_abi) and the header_inline
    # functions; another interface (device_ir's ncclIr*) is NCCL's own and not rendered here.
    surface = {fn.name for fn in interface_functions(api.device_functions, "device_c_abi")}
    by_name = {fn.name: fn for fn in api.device_functions if fn.header_inline or fn.name in surface}
    storage_names = {s.name for s in api.device_storage}
    dtypes = dict(raw.get("dtypes", {}))
    storage = {}
    for name, entry in raw.get("storage", {}).items():
        if name not in storage_names:
            _fail(f"[storage.{name}]", f"not a device storage record of the IR ({', '.join(sorted(storage_names))})")
        storage[name] = list(entry.get("needs", []))
    for name in sorted(storage_names - set(storage)):
        _fail("[storage]", f"no entry for the IR's storage record {name}")
    bodies: dict[str, list[Variant]] = {}
    for i, entry in enumerate(raw.get("function", [])):
        if ("name" in entry) == ("family" in entry):
            _fail(f"[[function]] #{i + 1}", "give exactly one of name and family")
        if "name" in entry:
            name = entry["name"]
            where = f"[[function]] {name}"
            if name not in by_name:
                _fail(where, "not a device function of the IR (bindings/ir/api/nccl.json device_functions)")
            if name in bodies:
                _fail(where, "a second entry for the same function")
            bodies[name] = _variants(where, entry, by_name[name], None)
            continue
        family = entry["family"]
        members = [n for n in by_name if n.startswith(family + "_")]
        if not members:
            _fail(f"[[function]] family {family}", "no device function of the IR is named family_TYPE")
        for name in members:
            suffix = name[len(family) + 1:]
            where = f"[[function]] family {family} ({name})"
            if suffix not in dtypes:
                _fail(where, f"element type {suffix!r} is not in [dtypes]")
            fn = by_name[name]
            for p in fn.params:
                if p.type.kind == "pointer" and p.type.pointee.kind in ("int", "float", "external") \
                        and _pointee_spelling(p.spelling) != dtypes[suffix]:
                    _fail(where, f"[dtypes] {suffix} = {dtypes[suffix]!r}, but {p.name} is {p.spelling!r}")
            if name in bodies:
                _fail(where, "a second entry for the same function")
            bodies[name] = _variants(where, entry, fn, dtypes[suffix])
    inline = raw.get("header_inline", {})
    if set(inline) - {"prefix", "cxx_same_name"}:
        _fail("[header_inline]", f"unknown keys {sorted(set(inline) - {'prefix', 'cxx_same_name'})} "
                                 f"(allowed: ['cxx_same_name', 'prefix'])")
    cxx_same_name = list(inline.get("cxx_same_name", []))
    wrong = [n for n in cxx_same_name if n not in by_name or not by_name[n].header_inline or n in bodies]
    if wrong:
        _fail("[header_inline] cxx_same_name", f"{', '.join(wrong)}: not a header_inline device function of the "
                                               f"IR forwarded as declared (one with a [[function]] entry says its body)")
    prefix = inline.get("prefix", "")
    if any(fn.header_inline for fn in by_name.values()) and not re.fullmatch(r"[A-Za-z_]\w*", prefix):
        _fail("[header_inline]", "prefix must be a C identifier prefix: the IR has header_inline functions, "
                                 "whose own names are NCCL's inline C++ functions")
    missing = [n for n in by_name if n not in bodies and not by_name[n].header_inline]
    if missing:
        _fail("[[function]]", f"no entry for the IR's device functions {', '.join(missing)}")
    policy = DeviceWrapperSpec(list(raw.get("includes", [])), dtypes, storage, header_inline_prefix=prefix,
                             polyfills=_polyfills(raw.get("polyfill", {}), api, bodies),
                             cxx_same_name=set(cxx_same_name))
    for n, fn in by_name.items():
        symbol = prefix + n if fn.header_inline else n
        if n in bodies:
            policy.functions.append(WrapperFunction(fn, bodies[n], symbol))
        else:
            policy.functions.append(WrapperFunction(fn, [Variant(_forwarding_body(fn), [n])], symbol,
                                                  same_signature=True))
    clash = sorted(set(by_name) & {wf.symbol for wf in policy.functions if wf.symbol != wf.function.name})
    if clash:
        _fail("[header_inline]", f"prefixed names {', '.join(clash)} are device functions of the IR too")
    return policy


def release_names(ir) -> tuple[set[str], set[str]]:
    """What one header set's IR has: type and C++ device API names, and Record.field names."""
    names = set(ir.device_cxx_names) | {e.name for e in ir.enums} | {t.name for t in ir.typedefs} | \
        {f.name for f in ir.functions}
    fields = set()
    for r in ir.records:
        names.update([r.name, *r.typedefs] + ([r.tag] if r.tag else []))
        fields.update(f"{r.name}.{f.name}" for f in r.fields)
    return names, fields


def _signature_names(fn) -> set[str]:
    found = set()

    def walk(t):
        if t is None:
            return
        if t.kind in ("record", "enum", "typedef"):
            found.add(t.name)
        for sub in (t.pointee, t.element, t.result, *t.params):
            walk(sub)
    walk(fn.result)
    for p in fn.params:
        walk(p.type)
    return found


def _by_name(value):
    """A JSON-form type with NCCL's records, enums and typedefs by name only: the wrapper of a
    release compiles against that release's layout of them."""
    if isinstance(value, dict):
        named = value.get("kind") in ("record", "enum", "typedef")
        return {k: _by_name(v) for k, v in value.items() if not (named and k in ("size", "align"))}
    if isinstance(value, list):
        return [_by_name(v) for v in value]
    return value


def _same_signature(mine, newest) -> bool:
    """Whether a release declares a function with the newest declaration's result and parameter types."""
    if mine is None:
        return False
    types = lambda fn: _by_name([to_json(fn.result)] + [to_json(p.type) for p in fn.params])  # noqa: E731
    return types(mine) == types(newest)


@dataclass
class ReleaseWrapper:
    """What the wrapper of one header set defines."""
    ir: object
    storage: list                          # DeviceStorage records it defines
    bodies: dict[str, str]                 # function -> body, for every function it can provide
    missing: dict[str, str | None] = field(default_factory=dict)  # function -> first release with it
    # function -> the last release with it, for a missing function that only older releases provide
    dropped: dict[str, str] = field(default_factory=dict)
    # The records the wrapper defines itself (Polyfill): the release's headers lack them, it has their kinds.
    polyfills: list = field(default_factory=list)
    # function -> parameter -> its default argument in this release's declarations (None: none).
    defaults: dict[str, dict[str, str | None]] = field(default_factory=dict)


_SCOPED_VALUE = re.compile(r"\b(\w+)::(\w+)\b")


def _default_in(default: str | None, ir) -> str | None:
    """A default argument as the release can spell it: one that names an enumerator the
    release's enum lacks (ncclGinFenceLevel::Put before 2.30) is left out there."""
    if default is None:
        return None
    enums = {e.name: {v.name for v in e.values} for e in ir.enums}
    for enum, value in _SCOPED_VALUE.findall(default):
        if enum in enums and value not in enums[enum]:
            return None
    return default


def plan_releases(policy: DeviceWrapperSpec, api, irs) -> list[ReleaseWrapper]:
    """Per header set of the library (oldest first): the storage records and bodies its C++
    device API can provide, and for every other function the first release that provides it."""
    plans = []
    for ir in sorted(irs, key=lambda ir: [int(x) for x in ir.version.split(".")]):
        names, fields = release_names(ir)
        have = lambda need: need in fields if "." in need else need in names  # noqa: E731
        polyfills = [p for p in policy.polyfills if p.name not in names and all(have(n) for n in p.needs)]
        names |= {p.name for p in polyfills}
        storage = [s for s in api.device_storage if all(have(n) for n in policy.storage[s.name])]
        names |= {s.name for s in storage}
        bodies = {}
        own = {fn.name: fn for fn in ir.device_functions}
        for wf in policy.functions:
            if not all(have(n) for n in _signature_names(wf.function)):
                continue
            if wf.same_signature and not _same_signature(own.get(wf.function.name), wf.function) and not (
                    wf.function.name not in own and wf.function.name in policy.cxx_same_name
                    and wf.function.name in ir.device_cxx_names):
                continue
            chosen = next((v for v in wf.variants if all(have(n) for n in v.needs)), None)
            if chosen is not None:
                bodies[wf.function.name] = chosen.body
        defaults = {wf.function.name: {p.name: _default_in(p.default, ir) for p in wf.function.params}
                    for wf in policy.functions}
        plans.append(ReleaseWrapper(ir, storage, bodies, defaults=defaults, polyfills=polyfills))
    for plan in plans:
        for wf in policy.functions:
            name = wf.function.name
            if name not in plan.bodies:
                having = [p for p in plans if name in p.bodies]
                plan.missing[name] = having[0].ir.version if having else None
                if having and having[-1].ir.version_code < plan.ir.version_code:
                    plan.dropped[name] = having[-1].ir.version
    return plans
