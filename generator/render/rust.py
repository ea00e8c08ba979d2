"""Rust rendering: type spellings, struct layout plans and the list of Rust files to emit.

The generated sys modules (bindings/rust/src/generated/sys/) keep NCCL's own names: the
module path is the namespace (ncclbind::sys::nccl::ncclConfig_t), and every
function is declared under its NCCL name with the link name of the generated C
wrapper (nb_ncclAllReduce), so Rust links the same C runtime and wrappers as C.

Rust has no bitfields, no per-member alignment and no anonymous members, so a
record is first planned (plan_record): explicit padding where clang's offsets
say so, bitfield runs as byte storage with accessors, repr(align) from the
record's alignment. The layout assertions then check every planned mirror
against each header set's IR at compile time.
"""
from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import REPO, RenderContext, environment, render_files
from ..ir import TypeRef

CRATE = "bindings/rust"
SYS = f"{CRATE}/src/generated/sys"
EDITION = "2021"
PRODUCT = {"nccl": "NCCL", "nccl_ep": "NCCL EP"}

# C integer spellings -> Rust; core::ffi names where the C type's width is the platform's.
INTEGERS = {
    "char": "c_char", "signed char": "c_schar", "unsigned char": "c_uchar",
    "short": "c_short", "unsigned short": "c_ushort", "int": "c_int", "unsigned int": "c_uint",
    "long": "c_long", "unsigned long": "c_ulong", "long long": "c_longlong",
    "unsigned long long": "c_ulonglong",
    "int8_t": "i8", "int16_t": "i16", "int32_t": "i32", "int64_t": "i64",
    "uint8_t": "u8", "uint16_t": "u16", "uint32_t": "u32", "uint64_t": "u64",
    "size_t": "usize", "ssize_t": "isize", "intptr_t": "isize", "uintptr_t": "usize",
    "ptrdiff_t": "isize",
}
FLOATS = {"float": "f32", "double": "f64"}

KEYWORDS = frozenset("""as break const continue crate else enum extern false fn for if impl in let loop
match mod move mut pub ref return self Self static struct super trait true type unsafe use where while
async await dyn abstract become box do final macro override priv typeof unsized virtual yield try gen
union""".split())
NOT_RAW = frozenset({"self", "Self", "super", "crate"})
LIST_ITEM = re.compile(r"^([-*+]|\d+[.)])\s")


class Unbindable(Exception):
    """Something the Rust mirror cannot express; generation stops with its name."""


def ident(name: str) -> str:
    """A C name as a Rust identifier (raw where it is a keyword)."""
    if name in NOT_RAW:
        return name + "_"
    return f"r#{name}" if name in KEYWORDS and name != "union" else name


def int_type(t: TypeRef) -> str:
    if t.name in INTEGERS:
        return INTEGERS[t.name]
    if t.size in (1, 2, 4, 8, 16):
        return f"{'i' if t.signed else 'u'}{t.size * 8}"
    raise Unbindable(f"integer type {t.name!r} has no Rust spelling")


def align_up(n: int, align: int) -> int:
    return (n + align - 1) // align * align


@dataclass
class Member:
    """One member of an emitted struct or union."""
    name: str
    type: str
    offset: int
    size: int
    doc: str | None = None
    padding: bool = False        # explicit padding or bitfield storage: no C member of that name


@dataclass
class BitfieldAccessor:
    name: str
    type: str                    # the Rust type the accessor reads and writes
    storage: str                 # the [u8; N] member holding it
    bit_offset: int              # from the start of the storage
    width: int
    kind: str                    # int | signed_int | bool | enum: how bits become a value
    doc: str | None = None


@dataclass
class RecordPlan:
    """A record layout variant as Rust will spell it."""
    name: str                    # Rust type name, with the variant suffix
    kind: str                    # struct | union
    repr: str                    # contents of #[repr(...)]
    members: list[Member] = field(default_factory=list)
    accessors: list[BitfieldAccessor] = field(default_factory=list)
    debug: bool = True           # derive(Debug): not for unions or records holding one


class RustTypes:
    """Rust spellings of IR types, for one set of merged libraries."""

    def __init__(self, conventions, apis):
        self.ext = conventions.external_types
        self.variants = {n: vs for a in apis for n, vs in a.record_variants.items()}
        self.typedefs = {t.name: t for a in apis for t in a.typedefs}
        self.enums = {e.name: e for a in apis for e in a.enums}

    def record_name(self, name: str, versions=None) -> str:
        """A record's Rust name; with versions, the layout variant those versions have."""
        return name + self.variant(name, versions).suffix if name in self.variants else name

    def variant(self, name: str, versions=None):
        if versions:
            for v in self.variants[name]:
                if versions[-1] in v.versions:
                    return v
        return self.variants[name][-1]

    def external(self, name: str) -> str:
        policy = self.ext[name]
        if policy["kind"] == "handle":
            return "*mut c_void"
        return INTEGERS[policy["c"]]

    def enum_repr(self, e) -> str:
        return f"{'i' if e.signed else 'u'}{e.size * 8}"

    def type(self, t: TypeRef, versions=None) -> str:
        k = t.kind
        if k == "void":
            return "c_void"
        if k == "int":
            return int_type(t)
        if k == "float":
            if t.name not in FLOATS:
                raise Unbindable(f"floating type {t.name!r} has no Rust spelling")
            return FLOATS[t.name]
        if k == "bool":
            return "bool"
        if k == "record":
            return self.record_name(t.name, versions)
        if k in ("typedef", "enum", "opaque", "external"):
            return t.name
        if k == "pointer":
            return f"*{'const' if t.const else 'mut'} {self.type(t.pointee, versions)}"
        if k == "array":
            return f"[{self.type(t.element, versions)}; {t.length}]"
        if k == "function_pointer":
            params = ", ".join(self.param_type(p) for p in t.params)
            result = "" if t.result.kind == "void" else f" -> {self.type(t.result)}"
            return f'Option<unsafe extern "C" fn({params}){result}>'
        raise Unbindable(f"no Rust spelling for a {k}")

    def param_type(self, t: TypeRef) -> str:
        """A parameter's type: C arrays decay to pointers."""
        if t.kind == "array":
            return f"*mut {self.type(t.element)}"
        return self.type(t)

    def result_type(self, t: TypeRef) -> str:
        return "" if t.kind == "void" else f" -> {self.type(t)}"

    def resolved(self, t: TypeRef) -> TypeRef:
        """t with typedefs followed to what they name."""
        while t.kind == "typedef" and t.name in self.typedefs:
            td = self.typedefs[t.name]
            if td.opaque_handle:
                return t
            t = td.type
        return t

    def literal(self, value) -> str:
        """A Rust literal for a constant or initializer value."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                raise Unbindable(f"no Rust literal for {value}")
            text = repr(value)
            return text if any(c in text for c in ".eE") else text + ".0"
        return str(value)

    def constant_value(self, c) -> tuple[str, str]:
        """(Rust type, Rust expression) of a constant."""
        t = c.type
        if c.value is None:
            return self.type(t), "core::ptr::null()" if t.const else "core::ptr::null_mut()"
        if isinstance(c.value, str):
            return "&CStr", cstr_literal(c.value)
        if t.kind == "enum":
            return t.name, f"{t.name}({c.value})"
        if isinstance(c.value, float):
            return (self.type(t) if t.kind == "float" else "f64"), self.literal(c.value)
        return self.type(t), self.literal(c.value)

    def init_value(self, value, t: TypeRef) -> str:
        """The expression an initializer stores into a field of type t."""
        r = self.resolved(t)
        if r.kind == "typedef":  # an opaque handle newtype
            if value is not None:
                raise Unbindable(f"initializer value {value!r} for handle {r.name}")
            return f"{r.name}(core::ptr::null_mut())"
        if value is None:
            if r.kind == "pointer":
                return "core::ptr::null()" if r.const else "core::ptr::null_mut()"
            if r.kind == "function_pointer":
                return "None"
            if r.kind == "external" and self.ext[r.name]["kind"] == "handle":
                return "core::ptr::null_mut()"
            raise Unbindable(f"null initializer value for a {r.kind}")
        if r.kind == "enum":
            return f"{r.name}({value})"
        if r.kind == "bool":
            return "true" if value else "false"
        if r.kind == "float":
            return self.literal(float(value))
        if r.kind in ("int", "external"):
            return str(value)
        raise Unbindable(f"initializer value {value!r} for a {r.kind}")


def cstr_literal(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= ord(ch) < 0x7F:
            out.append(ch)
        elif ord(ch) < 0x80 and ch != "\0":
            out.append(f"\\x{ord(ch):02x}")
        else:
            raise Unbindable(f"string constant {text!r}: only ASCII without NUL is supported")
    return 'c"' + "".join(out) + '"'


def plan_record(rec, rust_name: str, types: RustTypes, versions) -> RecordPlan:
    """How rust_name spells one layout of rec, member by member, at clang's offsets."""
    plan = RecordPlan(rust_name, rec.kind, "C")
    if rec.kind == "union":
        natural_align = plan_union_members(plan, rec, types, versions)
        plan.debug = False
    else:
        natural_align = plan_struct_members(plan, rec, types, versions)
    if rec.align > natural_align:
        plan.repr = f"C, align({rec.align})"
    elif rec.align < natural_align:
        raise Unbindable(f"{rec.name}: packed record (align {rec.align} < {natural_align})")
    return plan


def plan_union_members(plan: RecordPlan, rec, types: RustTypes, versions) -> int:
    """Adds the union's members; returns the alignment Rust gives them."""
    for f in rec.fields:
        if f.bit_width is not None:
            raise Unbindable(f"{rec.name}.{f.name}: bitfields in a union")
        plan.members.append(Member(ident(f.name), types.type(f.type, versions), 0, f.type.size, f.doc))
    return max((f.type.align for f in rec.fields), default=1)


def plan_struct_members(plan: RecordPlan, rec, types: RustTypes, versions) -> int:
    """Adds the struct's members, with explicit padding wherever clang's offset is past the
    one repr(C) would pick; returns the alignment Rust gives them."""
    def pad(start, end):
        if end > start:
            plan.members.append(Member(f"_padding_at_{start}", f"[u8; {end - start}]", start, end - start,
                                       padding=True))

    cursor, natural_align, fields, i = 0, 1, rec.fields, 0
    while i < len(fields):
        f = fields[i]
        if f.bit_width is not None:
            j = next((k for k in range(i, len(fields)) if fields[k].bit_width is None), len(fields))
            run = fields[i:j]
            start = run[0].bit_offset // 8
            end = fields[j].offset if j < len(fields) else \
                (max(b.bit_offset + b.bit_width for b in run) + 7) // 8
            if start < cursor:
                raise Unbindable(f"{rec.name}.{f.name}: bitfield storage overlaps the member before it")
            pad(cursor, start)
            plan_bitfield_run(plan, rec, run, start, end, types, versions)
            cursor, i = end, j
            continue
        natural = align_up(cursor, f.type.align)
        if f.offset < natural:
            raise Unbindable(f"{rec.name}.{f.name}: packed member (offset {f.offset})")
        if f.offset > natural:  # an alignment attribute moved it
            pad(cursor, f.offset)
        plan.members.append(Member(ident(f.name), types.type(f.type, versions), f.offset, f.type.size, f.doc))
        natural_align = max(natural_align, f.type.align)
        cursor = f.offset + f.type.size
        i += 1
    if align_up(cursor, max(natural_align, rec.align)) < rec.size:
        pad(cursor, rec.size)
    return natural_align


def plan_bitfield_run(plan: RecordPlan, rec, run, start: int, end: int, types: RustTypes, versions):
    """Consecutive bitfields: one byte array from start to end, and accessors for the named ones."""
    storage = f"_bitfield_at_{start}"
    plan.members.append(Member(storage, f"[u8; {end - start}]", start, end - start, padding=True))
    for b in run:
        if not b.name:
            continue  # an unnamed bitfield only pads
        r = types.resolved(b.type)
        if r.kind not in ("int", "bool", "enum"):
            raise Unbindable(f"{rec.name}.{b.name}: a bitfield of {r.kind}")
        kind = "signed_int" if r.kind == "int" and r.signed else r.kind
        if r.kind == "enum" and types.enums[r.name].signed:
            raise Unbindable(f"{rec.name}.{b.name}: a bitfield of a signed enum")
        plan.accessors.append(BitfieldAccessor(ident(b.name), types.type(b.type, versions), storage,
                                               b.bit_offset - start * 8, b.bit_width, kind, b.doc))


def holds_union(rec_name: str, types: RustTypes, versions, seen=None) -> bool:
    seen = seen or set()
    if rec_name in seen or rec_name not in types.variants:
        return False
    seen.add(rec_name)
    rec = types.variant(rec_name, versions).record
    if rec.kind == "union":
        return True
    for f in rec.fields:
        t = f.type
        while t.kind == "array":
            t = t.element
        if t.kind == "record" and holds_union(t.name, types, versions, seen):
            return True
    return False


def doc_lines(text: str | None, since: str | None = None, notes=()) -> list[str]:
    """A doc comment's lines (without ///). Text with indentation or fences is kept verbatim
    in a ```text block, so rustdoc neither reformats it nor runs it as a doctest."""
    lines = [line.rstrip() for line in (text or "").replace("\t", "    ").splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    # NCCL's comments are plain text: where Markdown would misread them (indented code,
    # fences, list items whose next lines would be folded in), keep them as they are.
    verbatim = any(line.startswith(" ") or "```" in line or LIST_ITEM.match(line) for line in lines)
    if verbatim:
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall("`+", "\n".join(lines))), default=0))
        lines = [fence + "text"] + lines + [fence]
    extra = ([f"Since {since}."] if since else []) + list(notes)
    if extra:
        lines += ([""] if lines else []) + [" ".join(extra)]
    return lines


def doc_comment(text: str | None, since: str | None = None, notes=(), indent: str = "") -> str:
    return "".join(f"{indent}///{' ' + line if line else ''}\n" for line in doc_lines(text, since, notes))


def module_name(header_set: str) -> str:
    return header_set.replace("-", "_").replace(".", "_")


def since_text(api, item) -> str | None:
    """"NCCL 2.32.3" for an item newer than the oldest header set, "NCCL 2.24.3; removed in NCCL
    2.30.7" for one a newer release dropped, else None."""
    product, until = PRODUCT[api.library], getattr(item, "until", None)
    if until:
        return f"{product} {item.since}; removed in {product} {until}"
    return f"{product} {item.since}" if item.since and item.since != api.versions[0] else None


def rustfmt_command() -> tuple[str, dict]:
    """rustfmt and its environment. A rustup proxy finds its toolchain through RUSTUP_HOME,
    which is set here from the user's home because sandboxes (Bazel tests) move HOME."""
    user_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    env = dict(os.environ)
    if "RUSTUP_HOME" not in env and (user_home / ".rustup").is_dir():
        env["RUSTUP_HOME"] = str(user_home / ".rustup")
    cargo_home = Path(os.environ.get("CARGO_HOME", user_home / ".cargo"))
    for candidate in (os.environ.get("RUSTFMT"), shutil.which("rustfmt"), str(cargo_home / "bin" / "rustfmt"),
                      str(user_home / ".cargo" / "bin" / "rustfmt")):
        if candidate and Path(candidate).is_file():
            return candidate, env
    raise Unbindable("rustfmt not found (set RUSTFMT, put it on PATH, or install it under ~/.cargo/bin): "
                     "the generated Rust is committed rustfmt-formatted")


def rustfmt(text: str, path: str) -> str:
    """text as rustfmt formats it, with the crate's own configuration."""
    command, env = rustfmt_command()
    crate = REPO / CRATE  # where `cargo fmt` looks for configuration too
    proc = subprocess.run([command, "--edition", EDITION, "--emit", "stdout"], input=text,
                          capture_output=True, text=True, cwd=crate if crate.is_dir() else None, env=env)
    if proc.returncode != 0:
        raise Unbindable(f"rustfmt rejected the rendering of {path}:\n{proc.stderr}")
    return proc.stdout


def library_variables(ctx: RenderContext, api, types: RustTypes) -> dict:
    dependency = next((a for a in ctx.apis if a.library != api.library), None) if api.depends_on else None
    inherited = set(dependency.referenced_names("external")) if dependency else set()
    plans = []
    for name in sorted(api.record_variants):
        for var in api.record_variants[name]:
            plan = plan_record(var.record, name + var.suffix, types, var.versions)
            plan.debug = plan.debug and not holds_union(name, types, var.versions)
            plans.append((var, plan))
    return {
        "api": api, "product": PRODUCT[api.library], "sources": ctx.source_line(api.header_sets),
        "enums": [(e, types.enum_repr(e), debug_names(e)) for e in api.enums],
        "initializers": [(init, var, initializer_assignments(init, var.record, types))
                         for init, var in api.initializers],
        "dependency": dependency.library if dependency else None,
        "externals": [(n, ctx.conventions.external_types[n]) for n in api.referenced_names("external") if n not in inherited],
        "opaque_types": api.referenced_names("opaque"),
        "records": plans,
        "record_aliases": [(alias, name) for name, vs in sorted(api.record_variants.items())
                           for alias in vs[-1].record.typedefs],
        "has_bitfields": any(plan.accessors for _, plan in plans),
        "has_signed_bitfields": any(a.kind == "signed_int" for _, plan in plans for a in plan.accessors),
    }


def debug_names(enum) -> list[str]:
    """The enumerators Debug prints by name: one per value, no aliases or count markers
    (a value NCCL creates at run time, like a PreMulSum op, prints as a number)."""
    seen, names = set(), []
    for v in enum.values:
        if v.alias_of or v.sentinel or v.value in seen:
            continue
        seen.add(v.value)
        names.append(v.name)
    return names


def initializer_assignments(init, rec, types: RustTypes) -> list[str]:
    """One Rust statement per value an initializer macro assigns."""
    fields = {f.name: f for f in rec.fields}
    statements = []
    for v in init.values:
        f = fields.get(v.field)
        if f is None:
            raise Unbindable(f"{init.name} assigns {v.field}, which {rec.name} lacks")
        value = types.init_value(v.value, f.type)
        if f.bit_width is not None:
            statements.append(f"value.set_{v.field}({value});")
        else:
            statements.append(f"value.{ident(v.field)} = {value};")
    return statements


def layout_variables(ctx: RenderContext, ir, types: RustTypes) -> dict:
    api = ctx.api(ir.library)
    records = []
    for rec in ir.records:
        var = types.variant(rec.name, [ir.version])
        if ir.version not in var.versions:
            raise Unbindable(f"{ir.name}: no layout variant of {rec.name} covers {ir.version}")
        plan = plan_record(rec, rec.name + var.suffix, types, [ir.version])
        records.append((rec, plan))
    sized = [(t.name, t.type.size) for t in ir.typedefs if t.type.size]
    modules = [a.library for a in ctx.apis if ir.depends_on and a.library != ir.library] + [ir.library]
    return {"ir": ir, "api": api, "sources": ctx.source_line([ir.name]), "records": records,
            "enums": ir.enums, "typedefs": sized, "modules": modules}


# Records NCCL reads by their size and version stamp, so the crate fills the layout of the
# loaded library: record -> (sys module, type-name prefix, the crate's user of it, whether it
# converts a layout into the newest one (an out-record returned to the user)).
VERSIONED_RECORDS = {
    "ncclConfig_t": ("config_layouts", "Config", "`crate::config::CommConfig` fills one", False),
    "ncclCollConfig_t": ("coll_config_layouts", "CollConfig", "`crate::coll_config::CollConfig` fills one",
                         False),
    "ncclCommProperties_t": ("comm_properties_layouts", "CommProperties",
                             "`Communicator::query_properties` has NCCL fill one", True),
}
# The field accessors of a layout enum, by the Rust type of the field: (method, C spelling).
FIELD_ACCESSORS = {"c_int": ("int_field", "int"), "*const c_char": ("string_field", "const char *"),
                   "u64": ("u64_field", "uint64_t"), "cudaEvent_t": ("event_field", "cudaEvent_t")}
STAMP_FIELDS = ("size", "magic", "version")


def versioned_layout_variables(ctx: RenderContext, api, types: RustTypes, record: str) -> dict:
    """One entry per layout of `record` (oldest first), the first layout of each field, and
    accessors by field type, for the hand-written code that fills or reads the layout the
    loaded library accepts (VERSIONED_RECORDS)."""
    module, prefix, user, upgrade = VERSIONED_RECORDS[record]
    variants = api.record_variants[record]
    initializer = next(init.name for init, var in api.initializers if init.record == record)
    newest = variants[-1]
    newest_types = {f.name: types.type(f.type, newest.versions) for f in newest.record.fields
                    if f.bit_width is None}
    layouts, first_layout, accessors = [], {}, {}
    for var in variants:
        variant = f"V{var.version_code}"
        common = []
        for f in var.record.fields:
            first_layout.setdefault(f.name, variant)
            if f.bit_width is not None:
                continue
            rust_type = types.type(f.type, var.versions)
            if f.name not in STAMP_FIELDS and rust_type in FIELD_ACCESSORS:
                accessors.setdefault(rust_type, []).append(
                    {"variant": variant, "c_name": f.name, "rust_name": ident(f.name)})
            if f.name != "size" and newest_types.get(f.name) == rust_type:
                common.append(ident(f.name))
        layouts.append({"variant": variant, "rust_type": record + var.suffix, "size": var.record.size,
                        "versions": var.versions, "version_codes": [api.version_codes[v] for v in var.versions],
                        "initializer": initializer + var.suffix, "newest": var is newest, "common": common})
    version_field = next(f for f in newest.record.fields if f.name == "version")
    return {"record": record, "library": api.library, "initializer": initializer, "layouts": layouts,
            "layout_type": f"{prefix}Layout", "raw_type": f"Raw{prefix}Layout", "user": user,
            "upgrade": upgrade,
            "accessors": [{"method": FIELD_ACCESSORS[t][0], "c_type": FIELD_ACCESSORS[t][1], "rust_type": t,
                           "arms": arms} for t, arms in accessors.items()],
            "fields": [{"name": n, "since": v} for n, v in first_layout.items()],
            "stamp_type": types.type(version_field.type),
            "sources": ctx.source_line(api.header_sets)}


def versioned_records(ctx: RenderContext):
    """(api, record, sys module) of every VERSIONED_RECORDS entry the APIs have."""
    return [(api, record, module) for record, (module, *_rest) in VERSIONED_RECORDS.items()
            for api in ctx.apis if record in api.record_variants]


def outputs(ctx: RenderContext, types: RustTypes):
    out = []
    for api in ctx.apis:
        out.append((f"{SYS}/{api.library}.rs", "rust/library.rs.j2", library_variables(ctx, api, types)))
    for ir in ctx.irs:
        out.append((f"{SYS}/layout_assertions/{module_name(ir.name)}.rs", "rust/layout_assertions.rs.j2",
                    layout_variables(ctx, ir, types)))
    layout_modules = []
    for api, record, module in versioned_records(ctx):
        out.append((f"{SYS}/{module}.rs", "rust/config_layouts.rs.j2",
                    versioned_layout_variables(ctx, api, types, record)))
        layout_modules.append(module)
    out.append((f"{SYS}/mod.rs", "rust/sys.rs.j2",
                {"apis": ctx.apis, "sources": ctx.source_line([ir.name for ir in ctx.irs]),
                 "versioned_layout_modules": layout_modules,
                 "layout_modules": [(module_name(ir.name), ir.name) for ir in ctx.irs],
                 "products": PRODUCT}))
    return out


def render(ctx: RenderContext) -> dict[str, str]:
    types = RustTypes(ctx.conventions, ctx.apis)
    env = environment({"rs_type": types.type, "rs_param": types.param_type, "rs_result": types.result_type,
                       "rs_ident": ident, "rs_doc": doc_comment, "rs_init_value": types.init_value,
                       "rs_constant": types.constant_value, "rs_external": types.external,
                       "rs_enum_repr": types.enum_repr})
    env.globals["since_text"] = since_text
    files = render_files(env, outputs(ctx, types))
    return {path: rustfmt(text, path) for path, text in files.items()}
