"""Merge the header sets of each library into one API surface.

Every item carries the header-set versions that have it (`versions`), the first
one (`since`) and, when a newer release dropped it, the first release without it
(`until`); so do enum values and record fields. A record whose layout differs
between versions keeps one variant per layout; other items take their newest form.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ..ir import HeaderSetIR, Record
from ..ir.serialize import to_json


def version_key(v: str):
    return tuple(int(x) for x in v.split("."))


@dataclass
class RecordVariant:
    """One layout of a record, and the versions that have exactly it."""
    record: Record
    versions: list[str]
    suffix: str           # "" for the newest layout, "__v22809" for older ones
    version_code: int     # first version code with this layout


@dataclass
class LibraryAPI:
    library: str                     # nccl | nccl_ep
    versions: list[str]              # header-set versions, oldest first
    version_codes: dict              # version -> code
    header_sets: list[str]
    functions: list = field(default_factory=list)
    records: list = field(default_factory=list)       # newest variant of each record
    record_variants: dict = field(default_factory=dict)  # name -> [RecordVariant], oldest first
    enums: list = field(default_factory=list)
    typedefs: list = field(default_factory=list)
    constants: list = field(default_factory=list)
    initializers: list = field(default_factory=list)  # (Initializer, RecordVariant) per layout
    skipped: list = field(default_factory=list)
    depends_on: str | None = None
    # version -> the NCCL header set that version was compiled with (HeaderSetIR.kernel_headers)
    kernel_headers: dict = field(default_factory=dict)
    device_functions: list = field(default_factory=list)  # the device API's C-callable functions
    device_storage: list = field(default_factory=list)    # records those take only by pointer

    def since_code(self, version: str) -> int:
        return self.version_codes[version]

    def to_json(self) -> dict:
        """What the renderers read, as bindings/ir/api/<library>.json: every item with its
        since/versions, and each record's layout variants (the per-set skipped items
        stay in bindings/ir/<set>.json)."""
        return {
            "library": self.library, "versions": self.versions, "version_codes": to_json(self.version_codes),
            "header_sets": self.header_sets, "depends_on": self.depends_on,
            **({"kernel_headers": self.kernel_headers} if self.kernel_headers else {}),
            "functions": to_json(self.functions), "enums": to_json(self.enums),
            "typedefs": to_json(self.typedefs), "constants": to_json(self.constants),
            "record_variants": {name: [{"suffix": v.suffix, "version_code": v.version_code,
                                        "versions": v.versions, "record": to_json(v.record)} for v in vs]
                                for name, vs in sorted(self.record_variants.items())},
            "initializers": [dict(to_json(init), layout=var.suffix) for init, var in self.initializers],
            **({"device_functions": to_json(self.device_functions), "device_storage": to_json(self.device_storage)}
               if self.device_functions or self.device_storage else {}),
        }

    def referenced_names(self, kind: str) -> list[str]:
        """Names of every type of this kind (opaque, external, ...) that a function,
        typedef or record field of the API uses, however deeply nested."""
        found = set()

        def walk(t):
            if t is None:
                return
            if t.kind == kind:
                found.add(t.name)
            for sub in (t.pointee, t.element, t.result, *t.params):
                walk(sub)
        for fn in self.functions:
            walk(fn.result)
            for p in fn.params:
                walk(p.type)
        for td in self.typedefs:
            walk(td.type)
        for vs in self.record_variants.values():
            for v in vs:
                for f in v.record.fields:
                    walk(f.type)
        return sorted(found)


def _layout_key(r: Record):
    return (r.size, r.align, tuple((f.name, f.type, f.offset, f.bit_offset, f.bit_width) for f in r.fields))


def until_of(having: list[str], versions: list[str]) -> str | None:
    """The first of `versions` (all releases, oldest first) after the last one in `having`,
    or None when the newest release has it: the release that removed it."""
    last = versions.index(having[-1])
    return versions[last + 1] if last + 1 < len(versions) else None


def _merge_simple(items_by_version, versions):
    """name -> newest item, with since/until/versions filled."""
    out = {}
    for v in versions:
        for item in items_by_version[v]:
            prev = out.get(item.name)
            merged = copy.deepcopy(item)
            merged.versions = (prev.versions if prev else []) + [v]
            merged.since = prev.since if prev else v
            out[item.name] = merged
    for item in out.values():
        item.until = until_of(item.versions, versions)
    return [out[k] for k in sorted(out)]


def merge_library(irs: list[HeaderSetIR]) -> LibraryAPI:
    irs = sorted(irs, key=lambda ir: version_key(ir.version))
    versions = [ir.version for ir in irs]
    api = LibraryAPI(irs[0].library, versions, {ir.version: ir.version_code for ir in irs},
                     [ir.name for ir in irs], depends_on=irs[-1].depends_on,
                     kernel_headers={ir.version: ir.kernel_headers for ir in irs if ir.kernel_headers})
    by_v = {ir.version: ir for ir in irs}
    api.functions = _merge_simple({v: by_v[v].functions for v in versions}, versions)
    _member_since(api.functions, by_v, "functions", "params")
    _former_param_names(api.functions, by_v)
    api.typedefs = _merge_simple({v: by_v[v].typedefs for v in versions}, versions)
    api.constants = _merge_simple({v: by_v[v].constants for v in versions}, versions)
    api.enums = _merge_simple({v: by_v[v].enums for v in versions}, versions)
    _keep_removed_enum_values(api, by_v)
    _member_since(api.enums, by_v, "enums", "values", until=True)
    _records(api, by_v)
    api.device_functions = _merge_simple({v: by_v[v].device_functions for v in versions}, versions)
    _member_since(api.device_functions, by_v, "device_functions", "params")
    api.device_storage = _merge_simple({v: by_v[v].device_storage for v in versions}, versions)
    for v in versions:
        api.skipped.extend((v, s) for s in by_v[v].skipped)
    return api


def _former_param_names(functions, by_v) -> None:
    """Each parameter's names in older releases (Param.former_names: the same position and
    type, another name), and the names that changed position or type (Function.dropped_params)."""
    for fn in functions:
        current = {p.name for p in fn.params}
        for version in fn.versions[:-1]:
            old = next(x for x in by_v[version].functions if x.name == fn.name)
            for i, p in enumerate(old.params):
                if p.name in current:
                    continue
                if i < len(fn.params) and fn.params[i].type == p.type:
                    if p.name not in fn.params[i].former_names:
                        fn.params[i].former_names.append(p.name)
                    fn.dropped_params.pop(p.name, None)
                else:
                    fn.dropped_params[p.name] = version


def _keep_removed_enum_values(api, by_v) -> None:
    """An enumerator that a newer version dropped stays in the merged enum (after the
    newest ones, with its last value): an older library may still return it."""
    for e in api.enums:
        names = {v.name for v in e.values}
        for version in reversed(e.versions[:-1]):
            old = next(x for x in by_v[version].enums if x.name == e.name)
            for v in old.values:
                if v.name not in names:
                    names.add(v.name)
                    kept = copy.deepcopy(v)
                    if not e.signed and kept.value < 0:  # the same bits, read through the newer unsigned type
                        kept.value &= (1 << (8 * e.size)) - 1
                    e.values.append(kept)


def _member_since(items, by_v, collection: str, members: str, until: bool = False) -> None:
    """Set .since on each member (a function's params, an enum's values): the first
    version whose item of the same name has a member of that name; with `until`, also the
    first release without it after the last that has it (None: the item's newest has it)."""
    versions = list(by_v)
    for item in items:
        for member in getattr(item, members):
            having = [v for v in item.versions
                      if any(m.name == member.name
                             for m in getattr(next(x for x in getattr(by_v[v], collection) if x.name == item.name),
                                              members))]
            member.since = having[0] if having else None
            if until and having:
                member.until = until_of(having, versions)


def _records(api, by_v):
    names = sorted({r.name for ir in by_v.values() for r in ir.records})
    for name in names:
        variants: list[RecordVariant] = []
        for v in api.versions:
            r = next((r for r in by_v[v].records if r.name == name), None)
            if r is None:
                continue
            if variants and _layout_key(variants[-1].record) == _layout_key(r):
                variants[-1].versions.append(v)
                variants[-1].record = copy.deepcopy(r)
            else:
                variants.append(RecordVariant(copy.deepcopy(r), [v], "", api.version_codes[v]))
        all_versions = [v for var in variants for v in var.versions]
        for var in variants[:-1]:
            var.suffix = f"__v{var.version_code}"
        for var in variants:
            var.record.since = all_versions[0]
            var.record.until = until_of(all_versions, api.versions)
            var.record.versions = list(var.versions)
            for f in var.record.fields:
                having = [v for v in all_versions if any(g.name == f.name for g in _record_in(by_v[v], name).fields)]
                f.since = having[0] if having else None
                f.until = until_of(having, api.versions) if having else None
        api.record_variants[name] = variants
        api.records.append(variants[-1].record)
        for var in variants:
            for v in var.versions:
                for init in by_v[v].initializers:
                    if init.record == name and not any(i.name == init.name and rv is var
                                                       for i, rv in api.initializers):
                        init = copy.deepcopy(init)
                        init.since, init.versions = var.versions[0], list(var.versions)
                        api.initializers.append((init, var))
                    elif init.record == name:
                        # same layout, later version: keep the newest values (version stamps differ)
                        for k, (i, rv) in enumerate(api.initializers):
                            if i.name == init.name and rv is var:
                                newer = copy.deepcopy(init)
                                newer.since, newer.versions = i.since, list(var.versions)
                                api.initializers[k] = (newer, var)


def _record_in(ir, name):
    return next((r for r in ir.records if r.name == name), None) or Record(name, "struct", 0, 0, [], "", 0)


def merge_all(irs: list[HeaderSetIR]) -> list[LibraryAPI]:
    libs = {}
    for ir in irs:
        libs.setdefault(ir.library, []).append(ir)
    return [merge_library(libs[k]) for k in sorted(libs)]
