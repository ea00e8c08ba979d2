"""policy/python_api.toml: ncclbind's module-level Python names that are not one NCCL
call each (nccl4py's data type and op constants, its flag enums, its enum member spellings),
resolved against the merged IR to values for templates/python/enums.py.j2 (and [records.*], nccl4py's
record classes over NCCL's structs, for templates/python/records.py.j2). An entry whose enum or
constants the headers lack renders nothing (a synthetic header set has few); against the real
headers, //tests/conformance:nccl4py_test fails on every name that did not come out."""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .common import POLICY_DIR, PolicyError

PATH = POLICY_DIR / "python_api.toml"
KEYS = {"module_constants", "flag_groups", "enum_aliases", "records"}
GROUP_KEYS = {"prefix", "exclude", "doc"}


def pascal(name: str) -> str:
    """COLL_SYMMETRIC -> CollSymmetric (nccl4py's second spelling of each flag)."""
    return "".join(word.capitalize() for word in name.split("_"))


@dataclass(frozen=True)
class FlagGroup:
    class_name: str
    doc: str
    members: tuple[tuple[str, int, str], ...]   # (name, value, C constant), then the aliases
    aliases: tuple[tuple[str, str], ...]        # (alias, member)


@dataclass(frozen=True)
class PythonApi:
    module_constants: tuple[tuple[str, str], ...] = ()   # (name, enum class) for each member
    flag_groups: tuple[FlagGroup, ...] = ()
    enum_aliases: dict[str, tuple[tuple[str, str], ...]] | None = None  # C enum -> (alias, member)
    records: tuple[RecordClass, ...] = ()                # [records.*]: nccl4py's record classes


def load_python_api(api, member_names, enum_class_name, path: Path = PATH) -> PythonApi:
    """The names of python_api.toml for the merged `api` (NCCL's); member_names(enum) gives a
    generated enum's member names by C name (render/python.py's enum_member_names)."""
    if api.library != "nccl" or not path.exists():
        return PythonApi()
    raw = tomllib.loads(path.read_text())

    def fail(where, message):
        raise PolicyError(f"{path.name}:[{where}]: {message}")

    for key in set(raw) - KEYS:
        fail(key, f"unknown table (known: {sorted(KEYS)})")
    enums = {e.name: e for e in api.enums}
    constants = [(name, enum_class_name(e.name)) for e in map(enums.get, raw.get("module_constants", {}).get("enums", ()))
                 if e for name in _names(e, member_names)]
    groups = []
    for class_name, table in raw.get("flag_groups", {}).items():
        unknown = set(table) - GROUP_KEYS
        if unknown:
            fail(f"flag_groups.{class_name}", f"unknown key(s) {sorted(unknown)}")
        prefix, exclude = table["prefix"], set(table.get("exclude", ()))
        members = tuple((c.name[len(prefix):], c.value, c.name) for c in api.constants
                        if c.name.startswith(prefix) and c.name not in exclude and isinstance(c.value, int))
        if not members:
            continue  # headers without the group (a synthetic set): the conformance test misses the name
        aliases = tuple((pascal(n), n) for n, _, _ in members if pascal(n) != n)
        groups.append(FlagGroup(class_name, table["doc"], members, aliases))
    enum_aliases = {}
    for c_name, table in raw.get("enum_aliases", {}).items():
        if c_name not in enums:
            continue
        strip = table["strip"]
        pairs = []
        for name in _names(enums[c_name], member_names):
            if name.startswith(strip):
                short = name[len(strip):]
                pairs += [(short, name), (pascal(short), name)]
        enum_aliases[c_name] = tuple(pairs)
    class_names = {enum_class_name(e.name) for e in api.enums} | {g.class_name for g in groups}
    flags = {g.class_name: tuple((name, value) for name, value, _ in g.members) for g in groups}
    records = load_records(api, raw, enum_class_name, class_names, path, flags)
    return PythonApi(tuple(constants), tuple(groups), enum_aliases, records)


def _names(enum, member_names) -> list[str]:
    names = member_names(enum)
    return [names[v.name] for v in enum.values if not v.sentinel]


# ---- records: nccl4py's classes over NCCL's structs ([records.<C struct>]) -------------------------

RECORD_KINDS = ("input", "value", "view")
RECORD_KEYS = {"class", "kind", "doc", "names", "hide", "sequences", "sets", "types", "defaults", "kw_only", "on_off",
               "docs", "ranges"}
STAMP_FIELDS = ("size", "magic", "version")  # a versioned struct's header, set by its initializer


def snake(name: str) -> str:
    """The mechanical Python spelling of a C field: nRanks -> n_ranks, cgaClusterSize ->
    cga_cluster_size (ncclbind.base.config's rule too). Where nccl4py differs (minCTAs: min_ctas,
    not min_ct_as) the table's `names` says so."""
    name = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


@dataclass(frozen=True)
class RecordField:
    name: str               # the Python name
    c_name: str             # the C field
    form: str               # field (a C field's value) | sequence (a C list, a tuple in Python) |
                            # set (a C bool array indexed by an enum, a frozenset of its members)
    since: str              # the first release whose layout has it
    field: object           # the IR Field (its type and doc), from the newest layout that has it
    python_type: str | None = None  # a generated enum or flag class its values are (types, sets)
    default: object = None  # the value it takes when not given (has_default), else it is required
    has_default: bool = False
    on_off: bool = False    # an int field that is a switch (on_off): Rust takes a bool
    doc: str = ""           # what it does, in every language (docs), where the header says too little
    range: tuple[int, int] | None = None  # the values NCCL documents for an int field (ranges)
    flags: tuple[tuple[str, int], ...] = ()  # a field typed as a flag group: its flags (name, value)

    @property
    def flag_mask(self) -> int:
        """Every flag of a flag field or-ed (0 for another field)."""
        mask = 0
        for _, value in self.flags:
            mask |= value
        return mask

    @property
    def flag_text(self) -> str:
        """What a flag field takes, in words: "CTAPolicy flags (DEFAULT 0, EFFICIENCY 1, ZERO 2)"."""
        return f"{self.python_type} flags ({', '.join(f'{name} {value}' for name, value in self.flags)})"


@dataclass(frozen=True)
class RecordClass:
    class_name: str
    c_record: str
    kind: str                          # input | value | view
    doc: str
    kw_only: bool
    first_version: str                 # the record's oldest layout
    fields: tuple[RecordField, ...]


def load_records(api, raw: dict, enum_class_name, class_names: set[str], path: Path = PATH,
                 flag_groups: dict[str, tuple[tuple[str, int], ...]] | None = None) -> tuple[RecordClass, ...]:
    """The [records.<C struct>] tables, checked against the merged IR: every field a table names
    is in some layout of its struct, every Python name is an identifier used once, every type is
    a generated class (class_names). A struct the headers lack renders nothing (a synthetic set)."""
    tables = raw.get("records", {})
    typedefs = {t.name: t for t in api.typedefs}
    out = []
    for c_record, table in tables.items():
        where = f"{path.name}:[records.{c_record}]"

        def fail(message):
            raise PolicyError(f"{where}: {message}")

        unknown = set(table) - RECORD_KEYS
        if unknown:
            fail(f"unknown key(s) {sorted(unknown)} (known: {sorted(RECORD_KEYS)})")
        for key in ("class", "kind", "doc"):
            if not isinstance(table.get(key), str):
                fail(f"{key} is required (a string)")
        if table["kind"] not in RECORD_KINDS:
            fail(f"kind {table['kind']!r} is not one of {RECORD_KINDS}")
        variants = api.record_variants.get(c_record)
        if not variants:
            continue  # headers without the struct (a synthetic set): the conformance test misses the class
        since, latest, order = {}, {}, []
        for var in variants:
            for f in var.record.fields:
                if not f.name or f.anonymous:
                    continue
                if f.name not in since:
                    since[f.name] = f.since or var.versions[0]
                    order.append(f.name)
                latest[f.name] = f
        stamps = {f for f in STAMP_FIELDS if any(v.record.versioned_header for v in variants)}

        def named(key, kind=dict):
            value = table.get(key, kind())
            if not isinstance(value, kind):
                fail(f"{key} must be a {'table' if kind is dict else 'list'}")
            for c_name in value:
                if c_name not in since:
                    fail(f"{key}: {c_name!r} is a field of no layout of {c_record} "
                         f"(its fields: {', '.join(order)})")
            return value

        names, hide = named("names"), set(named("hide", list))
        on_off, docs = set(named("on_off", list)), named("docs")
        for c_name in on_off:
            t = latest[c_name].type
            while t.kind == "typedef" and t.name in typedefs:
                t = typedefs[t.name].type
            if t.kind != "int":
                fail(f"on_off: {c_name} is not an integer field")
        for c_name, text in docs.items():
            if not isinstance(text, str) or not text.strip():
                fail(f"docs: {c_name}'s must be a non-empty string")
        ranges = named("ranges")
        for c_name, bounds in ranges.items():
            t = latest[c_name].type
            while t.kind == "typedef" and t.name in typedefs:
                t = typedefs[t.name].type
            if t.kind != "int":
                fail(f"ranges: {c_name} is not an integer field")
            if not (isinstance(bounds, list) and len(bounds) == 2 and all(type(b) is int for b in bounds)
                    and bounds[0] <= bounds[1]):
                fail(f"ranges: {c_name} must be [lowest, highest], not {bounds!r}")
        sequences, sets, types, defaults = named("sequences"), named("sets"), named("types"), named("defaults")
        if sequences and table["kind"] != "input":
            fail("sequences: only an input class has them (ncclbind.core links their nodes)")
        for c_name, enum_name in sets.items():
            t = latest[c_name].type
            if t.kind != "array" or t.element.kind != "bool":
                fail(f"sets: {c_name} is not an array of bool")
            if enum_name not in {e.name for e in api.enums}:
                fail(f"sets: {c_name}: {enum_name!r} is not an enum of the headers")
            if c_name not in names:
                fail(f"sets: {c_name} needs its Python name in names (nccl4py's: available_gin_types)")
        for c_name, class_name in types.items():
            if class_name not in class_names:
                fail(f"types: {c_name}: {class_name!r} is not a generated enum or flag class")
        fields, seen = [], set()
        # sequences last, in the table's order (nccl4py's: the lists after the fields)
        for c_name in [c for c in order if c not in sequences] + list(sequences):
            if c_name in hide or c_name in stamps:
                continue
            form = "sequence" if c_name in sequences else "set" if c_name in sets else "field"
            name = sequences.get(c_name) or names.get(c_name) or snake(c_name)
            if not name.isidentifier() or name in seen:
                fail(f"{c_name}: Python name {name!r} is not an identifier, or is used twice")
            seen.add(name)
            python_type = types.get(c_name) or (enum_class_name(sets[c_name]) if c_name in sets else None)
            has_default = c_name in defaults or form == "sequence" or table["kind"] == "input" \
                or (table["kind"] == "value" and since[c_name] != variants[0].versions[0])
            default = defaults.get(c_name, () if form == "sequence" else None)
            if form == "field" and table["kind"] != "view":
                t = latest[c_name].type
                while t.kind == "typedef" and t.name in typedefs:
                    t = typedefs[t.name].type
                if t.kind == "record" and t.name not in tables:
                    fail(f"{c_name} is a {t.name}, which has no [records.{t.name}] class")
            flags = (flag_groups or {}).get(python_type, ()) if form == "field" else ()
            fields.append(RecordField(name, c_name, form, since[c_name], latest[c_name], python_type, default,
                                      has_default, c_name in on_off, docs.get(c_name, "").strip(),
                                      tuple(ranges[c_name]) if c_name in ranges else None, flags))
        if table["kind"] == "value" and not table.get("kw_only"):
            required_after = [f.name for i, f in enumerate(fields) if not f.has_default
                              and any(g.has_default for g in fields[:i])]
            if required_after:
                fail(f"{', '.join(required_after)}: required after a field with a default (set kw_only = true)")
        out.append(RecordClass(table["class"], c_record, table["kind"], table["doc"].strip(),
                               bool(table.get("kw_only", table["kind"] == "input")), variants[0].versions[0],
                               tuple(fields)))
    return tuple(out)
