"""Python rendering: per library, a CPython extension module written in C over
the generated C wrappers (nb_*), its .pyi stub, and a module of enums and
constants; once, the errors module (one exception class per result code).

Everything a template needs that is more than a lookup is planned here, as
data: how each parameter crosses from Python to C (`ParamPlan`), how each
record field is read and written in each of its layouts (`FieldAccess`), and
which conversion each value takes (`ToPython`, `FromPython`). The templates
write every line of C (templates/python/module.c.j2 and its partials
_values.j2, _params.j2, _fields.j2), calling the hand-written support in
bindings/python/src/ncclbind_python.h.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import RenderContext, environment, render_files
from .c import LIB_ENUM, PREFIX, CTypes, comment
from ..ir import TypeRef
from ..ir.types import int_range
from ..policy.python_api import load_python_api
from ..passes.naming import python_name

# Python-side facts with no place in the IR (function names come from the IR:
# Function.snake_name, conventions.toml [rename]).
# Enum classes that take a hand-written mixin (module, class) as an extra base.
ENUM_MIXINS = {"ncclDataType_t": ("ncclbind.base.dtypes", "DataTypeConversions")}
# The extension module that holds each library's functions.
MODULES = {"nccl": "_nccl", "nccl_ep": "_nccl_ep"}
# Generated files live in folders of their own; everything beside them is hand-written.
GENERATED_C = "bindings/python/src/generated"
GENERATED_PY = "bindings/python/ncclbind/_generated"
RESULT_ENUM = "ncclResult_t"
RESULT_IN_PROGRESS = "ncclInProgress"  # not an error: a non-blocking call is under way


def words(name: str) -> list[str]:
    """The words of a C identifier, lowercased: NCCL_GIN_TYPE_NONE / ncclGinTypeNone -> nccl gin type none."""
    out = []
    for part in name.split("_"):
        part = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", " ", part)
        part = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", part)
        out.extend(w.lower() for w in part.split() if w)
    return out


def enum_class_name(name: str) -> str:
    """ncclDataType_t -> NcclDataType."""
    stem = name[:-2] if name.endswith("_t") else name
    stem = stem[4:] if stem.startswith("nccl") else stem
    return "Nccl" + stem[0].upper() + stem[1:]


def enum_member_names(enum) -> dict[str, str]:
    """C enumerator -> Python member name: the words the enum's own name shares
    at the front are dropped (ncclGinType_t's NCCL_GIN_TYPE_PROXY -> PROXY)."""
    stem = enum.name[:-2] if enum.name.endswith("_t") else enum.name
    prefix = words(stem)
    out = {}
    for v in enum.values:
        w = words(v.name)
        n = 0
        while n < len(prefix) and n < len(w) - 1 and w[n] == prefix[n]:
            n += 1
        if w[n][0].isdigit():
            n -= 1
        out[v.name] = "_".join(w[n:]).upper()
    if len(set(out.values())) != len(out):  # a clash: keep the NCCL spelling minus "nccl"
        out = {v.name: "_".join(words(v.name)[1:]).upper() for v in enum.values}
    return out


def c_string(text: str | None) -> str:
    """A C string literal (split per line) for any text."""
    if not text:
        return '""'
    lines = text.split("\n")
    parts = []
    for i, line in enumerate(lines):
        s = line.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")
        s = s.encode("ascii", "backslashreplace").decode().replace("\\x", "\\\\x").replace("\\u", "\\\\u")
        parts.append(f'"{s}{chr(92) + "n" if i < len(lines) - 1 else ""}"')
    return "\n    ".join(parts)


def py_docstring(text: str | None, indent: str = "    ") -> str:
    if not text:
        return ""
    body = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    lines = body.split("\n")
    return f'{indent}"""' + ("\n".join(lines[:1] + [(indent + line).rstrip() for line in lines[1:]])) + \
        (f'\n{indent}"""' if len(lines) > 1 else '"""')


@dataclass
class ToPython:
    """How a C value becomes a new Python object (_values.j2: to_py)."""
    kind: str                  # signed | unsigned | bool | float | string | pointer | record
    record_class: str = ""     # record: the class's C name
    layout: int = 0            # record: the index of the value's layout


@dataclass
class FromPython:
    """How a Python object becomes a C value of one type (_values.j2: int_literal, and the
    conversions of _params.j2 and _fields.j2)."""
    kind: str                  # signed | unsigned | bool | float | pointer | record
    ctype: str = ""            # the C type it is stored as
    lo: int = 0                # signed / unsigned: the range checked
    hi: int = 0
    unsigned: bool = False     # the C type is unsigned: its range is spelled with ULL
    record_class: str = ""     # record: the class's C name


@dataclass
class ParamPlan:
    """One parameter of a function: how it crosses between Python and C (_params.j2)."""
    name: str
    role: str                  # in | length | out | inout
    kind: str = ""             # length | out_array | out_record | out_value | inout_record | scalar | string
                               # | record | in_array | record_pointer | memory | pointer
    index: int = -1            # position among the Python arguments (in / inout)
    ctype: str = ""            # the parameter's C type
    declarator: str = ""       # the C local a_<name> declared with its own type (length, out_value, scalar)
    value: FromPython | ToPython | None = None  # scalar: from Python; out_value, out_array's elements: to Python
    element: FromPython | None = None           # in_array: each element
    element_ctype: str = ""    # in_array / out_array: the element's C type
    length: str = ""           # in_array / out_array: the length parameter
    length_ctype: str = ""     # in_array: its C type
    record_class: str = ""     # out_record, inout_record, record, record_pointer
    writable: bool = False     # record_pointer, memory, inout_record
    non_null: bool = False     # pointer: None and 0 are refused (conventions.toml [non_null])
    py_type: str = "object"    # for the stub
    py_result_type: str = ""

    @property
    def held(self) -> bool:
        """Its argument holds a buffer or temporary: nbpy_release at the end."""
        return self.kind in ("out_array", "inout_record", "string", "record", "in_array", "record_pointer", "memory")

    @property
    def owned(self) -> bool:
        """A new object o_<name> that the function releases on failure."""
        return self.kind == "out_record"

    @property
    def converts(self) -> bool:
        """It has conversion statements before the call (each can jump to the cleanup label)."""
        return self.kind not in ("length", "out_value")


@dataclass
class FunctionPlan:
    fn: object
    py_name: str
    params: list
    inputs: list               # ParamPlans taken from Python, in order
    outputs: list              # ParamPlans returned
    result_kind: str           # nccl_result | void | value
    result_declarator: str     # the C local `result` (nccl_result, value)
    result_value: ToPython | None  # value: the result object
    since_code: int
    doc: str
    stub_result: str
    jumps: bool = False        # some failure path jumps to the cleanup label


@dataclass
class FieldAccess:
    """A record field in one layout, reached as ((record_ctype *)self->data)-><name> (_fields.j2)."""
    record_ctype: str
    kind: str                  # scalar | string | pointer | record | bytes | array
    value: ToPython | None = None      # scalar / string / pointer / record: read; array: each element
    store: FromPython | None = None    # scalar: written; array: each element
    record_class: str = ""     # record: the field's class
    length: int = 0            # array: the element count


@dataclass
class FieldPlan:
    name: str
    since: str
    until: str | None = None   # the release that removed it, when one did
    access: dict = field(default_factory=dict)    # layout index -> FieldAccess
    doc: str = ""
    py_type: str = "object"
    py_name: str = ""          # the attribute: the C name, or with a trailing _ where Python reserves it


@dataclass
class LayoutPlan:
    index: int
    ctype: str
    versions: list
    version: str
    version_code: int
    version_codes: list        # the code of every release with this layout
    init_function: str | None  # adapter name, or None
    init_macro: str | None
    c_init: str | None         # the nb_init_* it calls
    field_names: list = field(default_factory=list)
    bitfields: set = field(default_factory=set)


@dataclass
class RecordPlan:
    name: str
    ident: str                 # C identifier stem
    library: str
    anonymous: bool
    layouts: list
    fields: list
    doc: str
    initializer: str | None
    typedefs: list = field(default_factory=list)   # (c name, parent ctype, member) for inline records


class PythonTypes:
    """How each IR type crosses between Python and C."""

    def __init__(self, ctx: RenderContext):
        self.ct = CTypes(ctx.conventions, {n: vs for a in ctx.apis for n, vs in a.record_variants.items()})
        self.typedefs = {t.name: t for a in ctx.apis for t in a.typedefs}
        self.enums = {e.name: e for a in ctx.apis for e in a.enums}
        self.variants = {n: vs for a in ctx.apis for n, vs in a.record_variants.items()}
        self.record_library = {n: a.library for a in ctx.apis for n in a.record_variants}
        self.ext = ctx.conventions.external_types
        self.anon_ctypes = {}  # (name, suffix) -> C typedef name for inline records

    # ---- classification -------------------------------------------------

    def resolve(self, t: TypeRef) -> TypeRef:
        while t.kind == "typedef" and t.name in self.typedefs:
            t = self.typedefs[t.name].type
        return t

    def category(self, t: TypeRef) -> str:
        """int | enum | bool | float | string | pointer | record | array | void."""
        r = self.resolve(t)
        k = r.kind
        if k == "external":
            return "pointer" if self.ext[r.name]["kind"] == "handle" else "int"
        if k in ("int", "bool", "float", "enum", "record", "array", "void"):
            return k
        if k in ("function_pointer", "opaque"):
            return "pointer"
        if k == "pointer":
            p = r.pointee
            if p.kind == "int" and p.name == "char" and r.const:
                return "string"
            return "pointer"
        raise ValueError(f"no Python mapping for a {k}")

    def int_limits(self, t: TypeRef) -> tuple[int, int, bool]:
        r = self.resolve(t)
        if r.kind == "external":
            size, signed = self.ext[r.name]["size"], not self.ext[r.name]["c"].startswith("unsigned")
        elif r.kind == "enum":
            return -2 ** 31, 2 ** 32 - 1, True  # a C enum: int or unsigned int
        else:
            size, signed = r.size, bool(r.signed)
        lo, hi = int_range(size, signed)
        return lo, hi, signed

    def stub_type(self, t: TypeRef, for_input=True) -> str:
        c = self.category(t)
        if c in ("int", "enum"):
            return "int"
        if c == "bool":
            return "bool"
        if c == "float":
            return "float"
        if c == "string":
            return "str | bytes | None" if for_input else "str | None"
        if c == "record":
            return self.resolve(t).name + (" | bytes" if for_input else "")
        if c == "array":
            e = self.resolve(t).element
            return "bytes" if self.byte_array(t) else f"tuple[{self.stub_type(e, False)}, ...]"
        if c == "pointer":
            r = self.resolve(t)
            if r.kind == "pointer" and r.pointee.kind == "record" and r.pointee.name in self.variants and for_input:
                return f"{r.pointee.name} | int | None"
            return "int | None" if for_input else "int"
        return "None"

    def byte_array(self, t: TypeRef) -> bool:
        r = self.resolve(t)
        e = self.resolve(r.element)
        return e.kind == "int" and e.size == 1

    def record_class(self, name: str) -> str:
        return f"nbpy_class_{name}"

    def layout_index(self, name: str, versions) -> int:
        vs = self.variants[name]
        for i, v in enumerate(vs):
            if versions[-1] in v.versions:
                return i
        return len(vs) - 1

    def record_ctype(self, name: str, versions) -> str:
        var = self.ct.variant(name, versions)
        if var.record.anonymous:
            return self.anon_ctypes[(name, var.suffix)]
        return self.ct.record_name(name, versions)

    def ctype(self, t: TypeRef) -> str:
        return self.ct.type(t)

    # ---- conversions ------------------------------------------------------

    def to_python(self, t: TypeRef, versions=None) -> ToPython:
        """How a C value of type t becomes a new Python object (a record: in the layout of
        `versions`, or the newest)."""
        c = self.category(t)
        if c == "int":
            return ToPython("signed" if self.int_limits(t)[2] else "unsigned")
        if c == "enum":
            return ToPython("signed")
        if c in ("bool", "float", "string", "pointer"):
            return ToPython(c)
        if c == "record":
            name = self.resolve(t).name
            layout = self.layout_index(name, versions) if versions else len(self.variants[name]) - 1
            return ToPython("record", self.record_class(name), layout)
        raise ValueError(f"no value conversion for {c}")

    def from_python(self, t: TypeRef, where: str) -> FromPython:
        """How a Python object becomes a C value of type t."""
        c = self.category(t)
        if c in ("int", "enum"):
            lo, hi, signed = self.int_limits(t)
            kind = "signed" if signed or c == "enum" else "unsigned"
            return FromPython(kind, self.ctype(t), lo, hi, not signed)
        if c in ("bool", "float", "pointer"):
            return FromPython(c, self.ctype(t))
        if c == "record":
            return FromPython("record", self.ctype(t), record_class=self.record_class(self.resolve(t).name))
        raise ValueError(f"{where}: no Python mapping for a {c}")


class Planner:
    def __init__(self, ctx: RenderContext, types: PythonTypes):
        self.ctx, self.types = ctx, types

    # ---- functions ----------------------------------------------------------

    def function(self, api, fn) -> FunctionPlan:
        T = self.types
        derived_lengths = {p.length_param for p in fn.params
                           if p.length_param and p.direction in ("in", "inout")}
        plans, inputs, outputs = [], [], []
        for p in fn.params:
            plan = ParamPlan(p.name, "length" if p.name in derived_lengths else p.direction, ctype=T.ctype(p.type))
            cat = T.category(p.type)
            if plan.role == "length":
                plan.kind = "length"
                plan.declarator = T.ct.decl(p.type, f"a_{p.name}")
            elif plan.role == "out" and cat == "pointer" and T.resolve(p.type).kind == "pointer":
                self._out_param(plan, p)
                outputs.append(plan)
            elif plan.role == "inout" and T.resolve(p.type).kind == "pointer" \
                    and T.resolve(T.resolve(p.type).pointee).kind == "record":
                rec = T.resolve(T.resolve(p.type).pointee).name
                plan.kind = "inout_record"
                plan.record_class = T.record_class(rec)
                plan.writable = True
                plan.py_type = f"{rec}"
                plan.py_result_type = rec
                outputs.append(plan)
            else:  # in, and out/inout the rules above cannot return (taken as in)
                plan.role = "in"
                self._in_param(plan, p, fn, cat)
            if plan.role in ("in", "inout"):
                plan.index = len(inputs)
                inputs.append(plan)
            plans.append(plan)
        result_kind, result_declarator, result_value, stub_result = self._result(fn)
        outs = [o.py_result_type for o in outputs]
        if result_kind == "value":
            outs = [stub_result] + outs
        stub = "None" if not outs else outs[0] if len(outs) == 1 else f"tuple[{', '.join(outs)}]"
        # A call that returns no ncclResult_t checks the runtime's error instead, so always may jump.
        jumps = True
        return FunctionPlan(fn, fn.snake_name, plans, inputs, outputs, result_kind, result_declarator,
                            result_value, api.version_codes[fn.since], self._doc(api, fn, fn.snake_name, inputs), stub,
                            jumps)

    def _in_param(self, plan, p, fn, cat):
        T = self.types
        r = T.resolve(p.type)
        where = f"{fn.name}.{p.name}"
        if cat in ("int", "enum", "bool", "float"):
            plan.kind = "scalar"
            plan.declarator = T.ct.decl(p.type, f"a_{p.name}")
            plan.value = T.from_python(p.type, where)
            plan.py_type = T.stub_type(p.type)
        elif cat == "string":
            plan.kind = "string"
            plan.py_type = "str | bytes | None"
        elif cat == "record":
            name = r.name
            if len(T.variants[name]) > 1:
                raise ValueError(f"{where}: a by-value record with several layouts is not bindable")
            plan.kind = "record"
            plan.record_class = T.record_class(name)
            plan.py_type = f"{name} | bytes"
        elif cat == "pointer" and r.kind == "pointer" and p.length_param:
            self._in_array(plan, p, fn)
        elif cat == "pointer" and r.kind == "pointer" and T.resolve(r.pointee).kind == "record" \
                and T.resolve(r.pointee).name in T.variants:
            name = T.resolve(r.pointee).name
            plan.kind = "record_pointer"
            plan.record_class = T.record_class(name)
            plan.writable = not r.const
            plan.py_type = f"{name} | bytes | int | None"
        elif cat == "pointer" and r.kind == "pointer" and p.type.kind != "typedef" \
                and where not in self.ctx.conventions.addresses:
            plan.kind = "memory"
            plan.writable = not r.const
            plan.py_type = "int | bytes | bytearray | memoryview | None"
        elif cat == "pointer":  # handles, stream, function pointers, conventions' addresses: an address
            plan.kind = "pointer"
            plan.non_null = where in self.ctx.conventions.non_null
            plan.py_type = "int" if plan.non_null else "int | None"
        else:
            raise ValueError(f"{where}: no Python mapping for a {cat} parameter")

    def _in_array(self, plan, p, fn):
        """in[n]: a sequence of elements, copied into a temporary C array; n is derived."""
        T = self.types
        elem = T.resolve(p.type).pointee
        ecat = T.category(elem)
        if ecat not in ("int", "enum", "record", "pointer"):
            raise ValueError(f"{fn.name}.{p.name}: no Python mapping for an array of {ecat}")
        length_param = next(q for q in fn.params if q.name == p.length_param)
        plan.kind = "in_array"
        plan.element = T.from_python(elem, f"{fn.name}.{p.name}")
        plan.element_ctype = T.ct.type(elem)
        plan.length = length_param.name
        plan.length_ctype = T.ctype(length_param.type)
        plan.py_type = (f"Sequence[{T.resolve(elem).name} | bytes] | None" if ecat == "record"
                        else "Sequence[int] | None")

    def _out_param(self, plan, p):
        T = self.types
        r = T.resolve(p.type)
        pointee = r.pointee
        pr = T.resolve(pointee)
        if p.length_param:  # out[n]: a temporary array of n, returned as a tuple
            plan.kind = "out_array"
            plan.element_ctype = T.ct.type(pointee)
            plan.length = p.length_param
            plan.value = T.to_python(pointee)
            plan.py_result_type = f"tuple[{T.stub_type(pointee, False)}, ...]"
            return
        if pr.kind == "record" and pr.name in T.variants:
            plan.kind = "out_record"
            plan.record_class = T.record_class(pr.name)
            plan.py_result_type = pr.name
            return
        if pr.kind in ("void", "function_pointer"):
            raise ValueError(f"out parameter {p.name}: pointer to {pr.kind}")
        plan.kind = "out_value"
        plan.declarator = T.ct.decl(pointee, f"a_{p.name}")
        plan.value = T.to_python(pointee)
        plan.py_result_type = T.stub_type(pointee, False)

    def _result(self, fn):
        T = self.types
        r = fn.result
        if r.kind == "enum" and r.name == RESULT_ENUM:
            return "nccl_result", f"{T.ctype(r)} result", None, "None"
        if r.kind == "void":
            return "void", "", None, "None"
        return "value", T.ct.decl(r, "result"), T.to_python(r), T.stub_type(r, False)

    def _doc(self, api, fn, py_name, inputs) -> str:
        sig = ", ".join(["$module"] + [i.name for i in inputs] + (["/"] if inputs else []))
        header = f"{py_name}({sig})\n--\n\n"
        notes = [f"{fn.name} ({fn.header}:{fn.line}), since {_product(api.library)} {fn.since}."]
        if fn.blocking:
            notes.append("May block: the GIL is released during the call.")
        if fn.result.kind == "enum" and fn.result.name == RESULT_ENUM:
            notes.append("Raises NcclError (a subclass per result code) when the call fails; "
                         "ncclInProgress is not an error.")
        body = (fn.doc + "\n\n" if fn.doc else "") + " ".join(notes)
        return header + body

    # ---- records ------------------------------------------------------------

    def records(self, api) -> list[RecordPlan]:
        T = self.types
        plans = []
        inits = {}
        for init, var in api.initializers:
            inits[(init.record, var.suffix)] = init
        names = list(api.record_variants)
        # inline (unnamed) records get a C name through __typeof__ on their parent's member
        for name in names:
            for var in api.record_variants[name]:
                if var.record.anonymous:
                    T.anon_ctypes[(name, var.suffix)] = f"nbpy_inline_{name}{var.suffix}"
        order = self._parents_first(api)
        flattened = self._anonymous_member_types(api)
        for name in order:
            if name in flattened:  # no class: its fields are the parent's (_flat_fields)
                continue
            variants = api.record_variants[name]
            first = variants[-1].record
            ident = name
            layouts = []
            for i, var in enumerate(variants):
                ctype = T.record_ctype(name, var.versions)
                init = inits.get((name, var.suffix))
                layouts.append(LayoutPlan(
                    i, ctype, var.versions, var.versions[0], var.version_code,
                    [api.version_codes[v] for v in var.versions],
                    f"nbpy_init_{name}{var.suffix}" if init else None,
                    init.name if init else None,
                    f"{PREFIX}init_{init.name}{var.suffix}" if init else None,
                    [f.name for f in var.record.fields if f.name and not f.anonymous],
                    {f.name for f in var.record.fields if f.bit_width is not None}))
            plan = RecordPlan(name, ident, api.library, first.anonymous, layouts, [],
                              first.doc or "", next((l.init_macro for l in layouts if l.init_macro), None))
            if first.anonymous:
                plan.typedefs = [(T.anon_ctypes[(name, var.suffix)],) + self._parent_member(api, name, var)
                                 for var in variants]
            plan.fields = self._fields(api, name, variants, layouts)
            plans.append(plan)
        return plans

    def _parents_first(self, api):
        """Record names with each inline record after the record that holds it."""
        parent_of = {}
        for name, variants in api.record_variants.items():
            for var in variants:
                for f in var.record.fields:
                    t = f.type
                    while t.kind == "array":
                        t = t.element
                    if t.kind == "record" and t.name in api.record_variants \
                            and api.record_variants[t.name][-1].record.anonymous:
                        parent_of[t.name] = name
        done, out = set(), []

        def visit(n):
            if n in done:
                return
            done.add(n)
            if n in parent_of:
                visit(parent_of[n])
            out.append(n)
        for n in sorted(api.record_variants):
            visit(n)
        return out

    def _parent_member(self, api, name, var):
        T = self.types
        for pname, pvariants in api.record_variants.items():
            for pvar in pvariants:
                if var.versions[-1] not in pvar.versions:
                    continue
                for f in pvar.record.fields:
                    if f.type.kind == "record" and f.type.name == name:
                        if pname in self._anonymous_member_types(api):
                            # reached through the anonymous member's own parent, as in C11
                            return (self._parent_member(api, pname, pvar)[0], f.name)
                        return (T.record_ctype(pname, pvar.versions), f.name)
        raise ValueError(f"inline record {name} has no parent")

    @staticmethod
    def _anonymous_member_types(api) -> set[str]:
        """Records that are the type of an anonymous struct/union member."""
        return {f.type.name for vs in api.record_variants.values() for v in vs for f in v.record.fields
                if f.anonymous}

    @staticmethod
    def _flat_fields(api, record, versions):
        """The record's fields, with those of each anonymous struct/union member in its
        place: C11 (and so the extension) reaches them as if they were the record's own."""
        for f in record.fields:
            if not f.anonymous:
                if f.name:  # an unnamed bitfield is padding: no member to reach
                    yield f
                continue
            inner = next(v for v in api.record_variants[f.type.name] if versions[-1] in v.versions)
            yield from Planner._flat_fields(api, inner.record, versions)

    def _fields(self, api, name, variants, layouts) -> list[FieldPlan]:
        T = self.types
        by_name: dict[str, FieldPlan] = {}
        order = []
        for i, var in enumerate(variants):
            for f in self._flat_fields(api, var.record, var.versions):
                if f.name not in by_name:
                    by_name[f.name] = FieldPlan(f.name, f.since or var.versions[0], getattr(f, "until", None),
                                                doc=f.doc or "",
                                                py_type=T.stub_type(f.type, False), py_name=python_name(f.name))
                    order.append(f.name)
                by_name[f.name].access[i] = self._access(name, f, layouts[i].ctype, var.versions)
        return [by_name[n] for n in order]

    def _access(self, record, f, record_ctype, versions) -> FieldAccess:
        T = self.types
        c = T.category(f.type)
        where = f"{record}.{f.name}"
        if c in ("int", "enum", "bool", "float"):
            return FieldAccess(record_ctype, "scalar", T.to_python(f.type, versions), T.from_python(f.type, where))
        if c in ("string", "pointer"):
            return FieldAccess(record_ctype, c, T.to_python(f.type, versions))
        if c == "record":
            rec = T.resolve(f.type).name
            return FieldAccess(record_ctype, "record", T.to_python(f.type, versions), record_class=T.record_class(rec))
        if c == "array":
            r = T.resolve(f.type)
            if T.byte_array(f.type):
                return FieldAccess(record_ctype, "bytes")
            ecat = T.category(r.element)
            if ecat not in ("int", "enum", "bool", "float", "pointer", "record"):
                raise ValueError(f"{where}: no Python mapping for an array of {ecat}")
            return FieldAccess(record_ctype, "array", T.to_python(r.element, versions),
                               T.from_python(r.element, where), length=r.length)
        raise ValueError(f"{where}: no Python mapping for {c}")

    # ---- nccl4py's record classes (policy/python_api.toml [records]) --------

    def record_classes(self, api, records) -> tuple[list[dict], list[str]]:
        """What templates/python/records.py.j2 writes for each RecordClass: per field its
        annotation, and the expression that reads it from the struct (`struct.<C field>`);
        and the generated enum classes the module imports."""
        T = self.types
        generated = {e["enum"].name: e["class_name"] for e in self.enums(api)}
        classes = {r.c_record: r.class_name for r in records}
        initializers = {init.record: init.name.lower() for init, _ in api.initializers}
        out, imports = [], set()
        for r in records:
            fields = []
            for f in r.fields:
                value = f"struct.{f.c_name}"
                if f.form == "sequence":
                    annotation, read = "tuple[Any, ...]", None
                elif f.form == "set":
                    annotation = f"frozenset[{f.python_type}]"
                    read = f"frozenset({f.python_type}(i) for i, on in enumerate({value}) if on)"
                    imports.add(f.python_type)
                else:
                    t = T.resolve(f.field.type)
                    category = T.category(f.field.type)
                    if f.python_type:
                        annotation, read = f.python_type, f"{f.python_type}({value})"
                        imports.add(f.python_type)
                    elif category == "enum" and t.name in generated:
                        annotation, read = generated[t.name], f"{generated[t.name]}({value})"
                        imports.add(generated[t.name])
                    elif category == "record":
                        annotation, read = classes[t.name], f"{classes[t.name]}.from_struct({value})"
                    else:
                        annotation, read = T.stub_type(f.field.type, False), value
                if f.has_default and f.default is None and "None" not in annotation:
                    annotation += " | None"
                doc = f.doc or (f.field.doc or "").strip()  # the policy's (docs), else the header's
                where = f"{r.c_record}.{f.c_name}" + (f" ({f.form})" if f.form != "field" else "")
                fields.append({"f": f, "annotation": annotation, "read": read,
                               "alias": f.form == "field" and f.c_name != f.name,
                               "doc": (doc + "\n\n" if doc else "") + f"C: {where}, since NCCL {f.since}."})
            out.append({"r": r, "fields": fields, "initializer": initializers.get(r.c_record)})
        return out, sorted(imports)

    # ---- enums and constants -----------------------------------------------------

    def enums(self, api):
        out = []
        for e in api.enums:
            if e.dummy or e.name.startswith("anon_enum_"):
                continue
            names = enum_member_names(e)
            members = [(names[v.name], v) for v in e.values if not v.sentinel]
            mixin = ENUM_MIXINS.get(e.name)
            out.append({"enum": e, "class_name": enum_class_name(e.name), "members": members,
                        "sentinels": [(names[v.name], v) for v in e.values if v.sentinel],
                        "mixin": mixin})
        return out


def enum_names(api):
    """The module-level names and enum member aliases of a library's enums module, and where
    they come from: NCCL's from policy/python_api.toml (nccl4py's spellings), NCCL EP's
    aliases from policy/nccl_ep.toml [enum_aliases] (nccl-extensions' nccl.ep spellings)."""
    if api.library == "nccl_ep":
        from ..policy.nccl import load_policy
        from ..policy.ep import EpPolicy
        from ..policy.python_api import PythonApi
        ep = load_policy(api)
        enums = {e.name: e for e in api.enums}
        aliases = {}
        if isinstance(ep, EpPolicy):
            for c_enum, pairs in ep.enum_aliases.items():
                names = enum_member_names(enums[c_enum])
                for alias, enumerator in pairs:
                    if alias in names.values() and alias != names[enumerator]:
                        raise ValueError(f"nccl_ep.toml [enum_aliases.{c_enum}]: {alias} is already a member "
                                         f"of {enum_class_name(c_enum)}")
                aliases[c_enum] = tuple((alias, names[enumerator]) for alias, enumerator in pairs
                                        if alias != names[enumerator])
        return PythonApi(enum_aliases=aliases), "nccl-extensions' nccl.ep name (policy/nccl_ep.toml)"
    return load_python_api(api, enum_member_names, enum_class_name), "nccl4py's name (policy/python_api.toml)"


def _product(library: str) -> str:
    return "NCCL EP" if library == "nccl_ep" else "NCCL"


def py_literal(value) -> str:
    return repr(value)




def py_constant_type(constant) -> str:
    return {type(None): "None", str: "str", float: "float"}.get(type(constant.value), "int")


def outputs(ctx: RenderContext):
    types = PythonTypes(ctx)
    planner = Planner(ctx, types)
    out = []
    defined_records = {}
    record_plans = {}
    for api in ctx.apis:
        record_plans[api.library] = planner.records(api)
        defined_records[api.library] = {r.name for r in record_plans[api.library]}
    for api in ctx.apis:
        module = MODULES[api.library]
        functions = [planner.function(api, fn) for fn in api.functions]
        records = record_plans[api.library]
        referenced = sorted(_referenced_records(api, types) - defined_records[api.library])
        variables = {"api": api, "sources": ctx.source_line(api.header_sets), "module": module,
                     "functions": functions, "records": records, "lib_enum": LIB_ENUM[api.library],
                     "product": _product(api.library), "extern_records": referenced,
                     "initializers": [(i, v, types.layout_index(i.record, v.versions))
                                      for i, v in api.initializers],
                     "enums": planner.enums(api)}
        out.append((f"{GENERATED_C}/{api.library}_module.c", "python/module.c.j2", variables))
        out.append((f"{GENERATED_PY}/{module}.pyi", "python/module.pyi.j2", variables))
        python_api, alias_source = enum_names(api)
        out.append((f"{GENERATED_PY}/{api.library}_enums.py", "python/enums.py.j2",
                    {**variables, "python_api": python_api, "alias_source": alias_source}))
        if python_api.records:  # NCCL's real headers (a synthetic set has none of the structs)
            classes, imports = planner.record_classes(api, python_api.records)
            out.append((f"{GENERATED_PY}/{api.library}_records.py", "python/records.py.j2",
                        {**variables, "record_classes": classes, "enum_imports": imports}))
    nccl = ctx.api("nccl")
    result = next((e for e in nccl.enums if e.name == RESULT_ENUM), None)
    if result:  # every NCCL release has it; a synthetic header (tests/generator) may not
        out.append((f"{GENERATED_PY}/errors.py", "python/errors.py.j2",
                    {"result_enum": result, "sources": ctx.source_line(nccl.header_sets),
                     "member_names": enum_member_names(result), "in_progress": RESULT_IN_PROGRESS}))
    return out


def _referenced_records(api, types: PythonTypes) -> set[str]:
    found = set()

    def walk(t):
        if t is None:
            return
        t = types.resolve(t)
        if t.kind == "record":
            found.add(t.name)
        for sub in (t.pointee, t.element):
            walk(sub)
    for fn in api.functions:
        walk(fn.result)
        for p in fn.params:
            walk(p.type)
    for vs in api.record_variants.values():
        for v in vs:
            for f in v.record.fields:
                walk(f.type)
    return {n for n in found if n in types.variants}


def error_class_name(member: str) -> str:
    """UNHANDLED_CUDA_ERROR -> NcclUnhandledCudaError; IN_PROGRESS -> NcclInProgressError."""
    stem = "".join(w.capitalize() for w in member.split("_"))
    return "Nccl" + stem + ("" if stem.endswith("Error") else "Error")


def render(ctx: RenderContext) -> dict[str, str]:
    env = environment({"c_string": c_string, "c_comment": comment, "py_docstring": py_docstring,
                       "py_literal": py_literal, "error_class_name": error_class_name,
                       "py_constant_type": py_constant_type})
    env.globals["P"] = PREFIX
    files = render_files(env, outputs(ctx))
    return {path: _tidy(path, text) for path, text in files.items()}


def _tidy(path: str, text: str) -> str:
    """Collapse runs of blank lines the templates leave; end with one newline."""
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.rstrip("\n") + "\n"
