"""NCCL's vocabulary beyond its headers (generator/spec/vocabulary.toml): each ncclDataType_t
type's element size and its spellings in the libraries and tools users pass types from, stated
once, checked against the merged IR, and read by every renderer that needs a type's name or
width (the Python vocabulary module, the shim's byte counts, the EP spec's dtype names)."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..ir.serialize import to_json
from . import SPEC_DIR, SpecError

VOCABULARY = SPEC_DIR / "vocabulary.toml"
DATA_TYPE_KEYS = {"name", "bytes", "aliases", "nccl_tests", "dlpack", "typestr", "c_element", "cute"}
DATA_TYPE_ENUM = "ncclDataType_t"


@dataclass(frozen=True)
class DataType:
    enumerator: str               # the canonical C enumerator (ncclFloat32)
    value: int                    # its ncclDataType_t value, from the IR
    names: tuple[str, ...]        # every C enumerator of that value, the canonical one first
    name: str                     # NumPy's / torch's name: ncclbind's canonical one
    bytes: int
    aliases: tuple[str, ...]
    nccl_tests: str | None
    dlpack: tuple[int, int]
    typestr: str | None
    c_element: str                # the C type of an element in device code (float, __nv_bfloat16)
    cute: tuple[str, ...]         # the CuTe DSL's numeric type names (Float32)

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every name a user may write for it: the canonical name, the aliases, nccl-tests'."""
        return tuple(dict.fromkeys((self.name, *self.aliases, *((self.nccl_tests,) if self.nccl_tests else ()))))


def data_type_names(path: Path = VOCABULARY) -> frozenset[str]:
    """The canonical names of the data types (for a spec that names types without the nccl API at
    hand: NCCL EP's); load_vocabulary checks them against the headers."""
    with open(path, "rb") as f:
        return frozenset(t["name"] for t in tomllib.load(f).get("data_types", {}).values())


def load_vocabulary(api, path: Path = VOCABULARY) -> tuple[DataType, ...]:
    """The data types of `api` (the merged nccl LibraryAPI), in value order; none for headers
    without ncclDataType_t (a synthetic set; every NCCL release has it)."""
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    return build_vocabulary(raw, api, path.name)


def build_vocabulary(raw: dict, api, where: str = "vocabulary.toml") -> tuple[DataType, ...]:
    def fail(message: str):
        raise SpecError(f"{where}: {message}")

    unknown = set(raw) - {"data_types"}
    if unknown:
        fail(f"unknown table(s) {sorted(unknown)} (known: data_types)")
    enum = next((e for e in api.enums if e.name == DATA_TYPE_ENUM), None)
    if enum is None:
        return ()  # headers without data types (a synthetic set): nothing to name
    by_value: dict[int, list[str]] = {}
    for v in enum.values:
        if not v.sentinel and not v.name.startswith("ncclNum"):
            by_value.setdefault(v.value, []).append(v.name)
    value_of = {name: value for value, names in by_value.items() for name in names}
    tables = raw.get("data_types", {})
    out: dict[int, DataType] = {}
    seen: dict[str, str] = {}
    for enumerator, t in tables.items():
        where_t = f"[data_types.{enumerator}]"
        if enumerator not in value_of:
            fail(f"{where_t}: {enumerator} is no {DATA_TYPE_ENUM} enumerator of the headers")
        value = value_of[enumerator]
        if value in out:
            fail(f"{where_t}: {enumerator} is the same type as {out[value].enumerator} (value {value})")
        keys = set(t)
        if keys - DATA_TYPE_KEYS:
            fail(f"{where_t}: unknown key(s) {sorted(keys - DATA_TYPE_KEYS)} (known: {sorted(DATA_TYPE_KEYS)})")
        for key in ("name", "bytes", "aliases", "dlpack", "c_element", "cute"):
            if key not in t:
                fail(f"{where_t}: {key} is required")
        if type(t["bytes"]) is not int or t["bytes"] <= 0:
            fail(f"{where_t}: bytes must be an int > 0, not {t['bytes']!r}")
        dlpack = t["dlpack"]
        if not (isinstance(dlpack, list) and len(dlpack) == 2 and all(type(x) is int and x >= 0 for x in dlpack)):
            fail(f"{where_t}: dlpack must be [type code, bits], not {dlpack!r}")
        if dlpack[1] != 8 * t["bytes"]:
            fail(f"{where_t}: dlpack's {dlpack[1]} bits are not bytes = {t['bytes']}")
        names = [t["name"], *t["aliases"]] + ([t["nccl_tests"]] if "nccl_tests" in t else [])
        for name in names:
            if not isinstance(name, str) or not name:
                fail(f"{where_t}: a name must be a non-empty string, not {name!r}")
            if seen.get(name, enumerator) != enumerator:
                fail(f"{where_t}: {name!r} already names {seen[name]}")
            seen[name] = enumerator
        if not isinstance(t["c_element"], str) or not t["c_element"]:
            fail(f"{where_t}: c_element must be a C type name, not {t['c_element']!r}")
        if not (isinstance(t["cute"], list) and all(isinstance(c, str) and c for c in t["cute"])):
            fail(f"{where_t}: cute must be a list of the CuTe DSL's type names, not {t['cute']!r}")
        for kind, name in [("c_element", t["c_element"])] + [("cute", c) for c in t["cute"]]:
            if seen.get((kind, name), enumerator) != enumerator:
                fail(f"{where_t}: {kind} {name!r} already names {seen[(kind, name)]}")
            seen[(kind, name)] = enumerator
        names_of_value = by_value[value]
        out[value] = DataType(enumerator, value, (enumerator, *(n for n in names_of_value if n != enumerator)),
                              t["name"], t["bytes"], tuple(t["aliases"]), t.get("nccl_tests"), tuple(dlpack),
                              t.get("typestr"), t["c_element"], tuple(t["cute"]))
    missing = [names[0] for value, names in sorted(by_value.items()) if value not in out]
    if missing:
        fail(f"no [data_types] entry for {', '.join(missing)} (a data type of the headers): add one")
    _check_device_elements(out.values(), api, fail)
    return tuple(out[value] for value in sorted(out))


def _check_device_elements(types, api, fail) -> None:
    """Where the headers have a device API: each type's c_element is an element type of its per-type
    functions, and each element type of those (a pointer parameter beside a `count`) is a type's."""
    elements = set()
    for fn in to_json(getattr(api, "device_functions", None) or []):
        params = fn.get("params", ())
        if any(p["name"] == "count" for p in params):
            elements.update(p["type"]["pointee"].get("name") for p in params
                            if p["type"]["kind"] == "pointer" and p["type"]["pointee"]["kind"] != "record")
    elements.discard(None)
    if not elements:
        return  # no device API in these headers (before NCCL 2.28, or a synthetic set)
    named = {t.c_element: t.enumerator for t in types}
    for t in types:
        if t.c_element not in elements:
            fail(f"[data_types.{t.enumerator}]: c_element {t.c_element!r} is no element type of the device API's "
                 f"per-type functions (those are {', '.join(sorted(elements))})")
    unnamed = sorted(elements - set(named) - {"size_t", "void"})
    if unnamed:
        fail(f"the device API's per-type functions take {', '.join(unnamed)}, which no [data_types] entry's "
             "c_element names: add it to the type's entry")
