"""C rendering: type spellings and the list of C files to emit.

Mirrors carry the prefix from conventions ([c] prefix, "nb_"), so they never
collide with nccl.h and both can be included in one translation unit (the
layout tests do exactly that).
"""
from __future__ import annotations

import sys

from . import RenderContext, environment, render_files
from ..policy.common import PolicyError
from ..policy.vocabulary import load_vocabulary
from ..ir import TypeRef
from ..ir.types import c_declarator

PREFIX = "nb_"


class CTypes:
    def __init__(self, conventions, variants: dict, prefix=PREFIX):
        self.ext = conventions.external_types
        self.variants = variants  # record name -> [RecordVariant], over all libraries
        self.p = prefix

    def record_name(self, name: str, versions=None) -> str:
        """A record's C name; with versions, the layout variant those versions have."""
        if versions and name in self.variants:
            for v in self.variants[name]:
                if versions[-1] in v.versions:
                    return self.p + name + v.suffix
        return self.p + name

    def variant(self, name: str, versions):
        """The RecordVariant of `name` that the given versions have."""
        for v in self.variants[name]:
            if versions[-1] in v.versions:
                return v
        return self.variants[name][-1]

    def literal(self, value, t: TypeRef) -> str:
        """A C literal for a constant or initializer value."""
        if value is None:
            return "((void *)0)"
        if isinstance(value, str):
            return '"' + value.encode("unicode_escape").decode().replace('"', '\\"') + '"'
        if isinstance(value, float):
            return repr(value) + ("f" if t is not None and t.name == "float" else "")
        if isinstance(value, bool):
            return "1" if value else "0"
        if value < -2**31:
            return f"({value + 1}LL - 1)"
        if value < 0:
            return f"({value})"
        if value > 2**31 - 1:
            return f"{value}ULL" if value > 2**32 - 1 else f"{value}u"
        return str(value)

    def enumerator(self, name: str, enum) -> str:
        """The mirror's name for an enumerator: scoped (enum class) values carry their enum's name."""
        return f"{self.p}{enum.name}_{name}" if enum.scoped else f"{self.p}{name}"

    @staticmethod
    def enum_is_int(enum) -> bool:
        """Whether a C enum (int-sized, int-valued in ISO C) can mirror it."""
        return enum.size == 4 and all(-2**31 <= v.value < 2**31 for v in enum.values)

    @staticmethod
    def enum_int_type(enum) -> str:
        return f"{'' if enum.signed else 'u'}int{8 * enum.size}_t"

    @staticmethod
    def real_enumerator(name: str, enum) -> str:
        """How the real header spells an enumerator."""
        return f"{enum.name}::{name}" if enum.scoped else name

    def init_value(self, value, t: TypeRef) -> str:
        """The right-hand side that stores an initializer value into a field of type t."""
        if value is None:
            return "NULL"
        if t.kind in ("enum", "typedef", "external", "pointer"):
            return f"({self.type(t)}){self.literal(value, t)}"
        return self.literal(value, t)

    def name(self, t: TypeRef, versions=None) -> str:
        """A named type's C spelling in the binding: the prefixed mirror (the layout
        variant those versions have), or the external type's spelling from conventions."""
        if t.kind == "record":
            return self.record_name(t.name, versions)
        if t.kind == "external":
            return self.ext[t.name]["c"]
        return self.p + t.name

    def type(self, t: TypeRef, versions=None) -> str:
        return c_declarator(t, "", lambda named: self.name(named, versions))

    def decl(self, t: TypeRef, name: str, versions=None) -> str:
        """A declarator: `int x`, `char x[128]`, `int (*x)(void *)`."""
        return c_declarator(t, name, lambda named: self.name(named, versions))

    def failure_value(self, t: TypeRef) -> str:
        """What a wrapper returns when the library or symbol is missing."""
        if t.kind == "enum" and t.name == "ncclResult_t":
            return f"({self.p}ncclResult_t)ncclbind_last_error_code()"
        if t.kind == "void":
            return ""
        if t.kind == "record":
            return f"({self.type(t)}){{0}}"
        if t.kind == "pointer":
            return "NULL"
        return f"({self.type(t)})0"


def comment(text: str | None, indent: str = "") -> str:
    """A doc comment block, or nothing."""
    if not text:
        return ""
    lines = text.replace("*/", "* /").splitlines()
    if len(lines) == 1:
        return f"{indent}/** {lines[0]} */\n"
    body = "".join(f"{indent} * {line}".rstrip() + "\n" for line in lines)
    return f"{indent}/**\n{body}{indent} */\n"


LIB_ENUM = {"nccl": "NCCLBIND_LIB_NCCL", "nccl_ep": "NCCLBIND_LIB_NCCL_EP"}


def ordered_typedefs(typedefs):
    """Typedefs in an order where a typedef naming another comes after it."""
    by_name = {t.name: t for t in typedefs}
    done, out = set(), []

    def visit(t):
        if t.name in done:
            return
        done.add(t.name)
        if t.type.kind == "typedef" and t.type.name in by_name:
            visit(by_name[t.type.name])
        out.append(t)
    for t in typedefs:
        visit(t)
    return out


def ordered_variants(record_variants: dict):
    """Record layout variants in an order where every by-value member is defined
    first; unnamed (inline) records are left out."""
    done, out = set(), []

    def visit(name, versions):
        for var in record_variants.get(name, []):
            if versions is not None and versions[-1] not in var.versions:
                continue
            key = (name, var.suffix)
            if key in done or var.record.anonymous:
                continue
            done.add(key)
            for f in var.record.fields:
                t = f.type
                while t.kind == "array":
                    t = t.element
                if t.kind == "record":
                    visit(t.name, var.versions)
            out.append(var)
    for name in sorted(record_variants):
        visit(name, None)
    return out


def dependency_code(ctx: RenderContext, api) -> int | None:
    """The version code of the header set api depends on (nccl_ep's depends_on), which the
    runtime names when the library in use is older."""
    if not api.depends_on:
        return None
    for other in ctx.apis:
        if api.depends_on in other.header_sets:
            return other.version_codes[other.versions[other.header_sets.index(api.depends_on)]]
    raise ValueError(f"{api.library}: depends_on {api.depends_on!r} is no header set of another library")


# The integer typedefs that <stddef.h>/<stdint.h> do not declare, and the header that does.
SYSTEM_INCLUDES = {"ssize_t": "sys/types.h"}


def result_codes(ctx: RenderContext, api) -> list[dict]:
    """The runtime's table of NCCL result codes: each ncclResult_t value of the merged IR (its code,
    name, first and last release), with conventions.toml's [result_descriptions] words."""
    enum = next((e for e in api.enums if e.name == "ncclResult_t"), None)
    if enum is None:
        return []
    descriptions = ctx.conventions.result_descriptions
    values = [v for v in enum.values if not v.sentinel]
    unknown = sorted(set(descriptions) - {v.name for v in values})
    if unknown:
        raise PolicyError(f"policy/conventions.toml [result_descriptions]: {', '.join(unknown)}: not a value of "
                        "ncclResult_t in any header set")
    missing = [v.name for v in values if v.name not in descriptions]
    if missing:
        print(f"warning: ncclResult_t: {', '.join(missing)} without a description in policy/conventions.toml "
              "[result_descriptions]: described by name", file=sys.stderr)
    return [{"code": v.value, "name": v.name, "since": v.since, "until": v.until,
             "description": descriptions.get(v.name, f"{v.name} (NCCL's result code {v.value})")} for v in values]


def outputs(ctx: RenderContext):
    out = []
    nccl = next((a for a in ctx.apis if a.library == "nccl"), None)
    codes = result_codes(ctx, nccl) if nccl is not None else []
    if codes:
        out.append(("runtime/src/generated/result_codes.h", "c/result_codes.h.j2",
                    {"sources": ctx.source_line(nccl.header_sets), "codes": codes}))
    data_types = load_vocabulary(nccl) if nccl is not None else ()
    if data_types:  # policy/vocabulary.toml's data types, for C code (the bench's worker)
        if [t.value for t in data_types] != list(range(len(data_types))):
            raise ValueError("ncclDataType_t's values are not 0..n-1: data_types.h indexes its table by value")
        out.append(("bindings/c/include/ncclbind/data_types.h", "c/data_types.h.j2",
                    {"sources": ctx.source_line(nccl.header_sets), "data_types": data_types}))
    for api in ctx.apis:
        base = api.library
        variables = {"api": api, "sources": ctx.source_line(api.header_sets),
                     "variants": ordered_variants(api.record_variants),
                     "inline_records": {n: vs for n, vs in api.record_variants.items()
                                        if vs[-1].record.anonymous},
                     "typedefs": ordered_typedefs(api.typedefs), "lib_enum": LIB_ENUM[base],
                     "opaque_types": api.referenced_names("opaque"),
                     "header_guard": f"NCCLBIND_{base.upper()}_H_",
                     "dependency": api.depends_on and next(a.library for a in ctx.apis if a.library != base),
                     "dependency_code": dependency_code(ctx, api), "lib_enums": LIB_ENUM,
                     "system_includes": sorted({SYSTEM_INCLUDES[n] for n in api.referenced_names("int")
                                                if n in SYSTEM_INCLUDES})}
        out.append((f"bindings/c/include/ncclbind/{base}.h", "c/library.h.j2", variables))
        out.append((f"bindings/c/src/{base}.c", "c/library.c.j2", variables))
    for ir in ctx.irs:
        api = ctx.api(ir.library)
        variables = {"ir": ir, "api": api, "sources": ctx.source_line([ir.name]),
                     "inline": {n for n, vs in api.record_variants.items() if vs[-1].record.anonymous},
                     "merged_enum_values": {(e.name, v.name): v.value for e in api.enums for v in e.values},
                     "merged_enums": {e.name: e for e in api.enums},
                     "merged_constants": {c.name: c.value for c in api.constants},
                     "variants": {name: next((v for v in vs if ir.version in v.versions), None)
                                  for name, vs in api.record_variants.items()}}
        out.append((f"bindings/c/layout_tests/{ir.name}.cc", "c/layout_test.cc.j2", variables))
        if any(r.device_only for r in ir.records):
            # nvcc's view: these records exist only under __CUDACC__
            out.append((f"bindings/c/layout_tests/{ir.name}.device.cu", "c/device_layout_test.cu.j2", variables))
    return out


def over_alignment(rec) -> int | None:
    """A record's own alignment where it asks for more than its members (`struct alignas(64) X`):
    C has no alignment on a struct type, so the mirror gives it to the first member."""
    natural = max([f.align_attr or f.type.align for f in rec.fields if f.bit_width is None] or [1])
    return rec.align if rec.align > natural else None


def render(ctx: RenderContext) -> dict[str, str]:
    ct = CTypes(ctx.conventions, {n: vs for a in ctx.apis for n, vs in a.record_variants.items()})
    env = environment({"c_type": ct.type, "c_decl": ct.decl, "c_failure": ct.failure_value,
                       "c_record": ct.record_name, "c_variant": ct.variant, "c_literal": ct.literal, "c_enumerator": ct.enumerator, "c_enum_is_int": ct.enum_is_int,
                       "c_enum_int_type": ct.enum_int_type, "c_real_enumerator": ct.real_enumerator, "c_init_value": ct.init_value,
                       "c_comment": comment, "c_over_alignment": over_alignment})
    env.globals["P"] = PREFIX
    return render_files(env, outputs(ctx))
