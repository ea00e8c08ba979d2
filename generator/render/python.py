"""Python rendering: per library, a CPython extension module written in C over
the generated C wrappers (nb_*), its .pyi stub, and a module of enums and
constants; once, the errors module (one exception class per result code).

Everything a template needs that is more than a lookup is planned here:
how each parameter crosses from Python to C (`ParamPlan`), how each record
field is read and written in each of its layouts (`FieldPlan`). The C
snippets name the hand-written support in bindings/python/src/ncclbind_python.h.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import RenderContext, environment, render_files
from .c import LIB_ENUM, PREFIX, CTypes, comment
from ..ir import TypeRef

# Python-side facts with no place in the IR (function names come from the IR:
# Function.snake_name, conventions.toml [rename]).
# Enum classes that take a hand-written mixin (module, class) as an extra base.
ENUM_MIXINS = {"ncclDataType_t": ("ncclbind.core.dtypes", "DataTypeConversions")}
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


def int_range(size: int, signed: bool) -> tuple[str, str]:
    """C literals for the range of an integer of `size` bytes."""
    bits = size * 8
    if signed:
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        lo_s = f"({lo + 1}LL - 1)" if bits == 64 else f"{lo}LL"
        return lo_s, f"{hi}LL"
    return "0", f"{2 ** bits - 1}ULL"


@dataclass
class ParamPlan:
    name: str
    role: str                  # in | length | out | inout
    index: int = -1            # position among the Python arguments (in / inout)
    decl: str = ""             # the C local(s)
    convert: str = ""          # C statements: args[index] -> the local
    call: str = ""             # the C argument expression
    result: str = ""           # C statements setting r_<name>, the returned object (out / inout)
    held: bool = False         # needs nbpy_release at the end
    owned: str = ""            # a PyObject * local to release on failure
    py_type: str = "object"    # for the stub
    py_result_type: str = ""


@dataclass
class FunctionPlan:
    fn: object
    py_name: str
    params: list
    inputs: list               # ParamPlans taken from Python, in order
    outputs: list              # ParamPlans returned
    result_kind: str           # nccl_result | void | value
    result_decl: str
    result_value: str          # C expression building the result object (value kind)
    since_code: int
    doc: str
    stub_result: str
    jumps: bool = False        # some failure path jumps to the cleanup label


@dataclass
class FieldPlan:
    name: str
    since: str
    getters: dict = field(default_factory=dict)   # layout index -> C statements returning PyObject *
    setters: dict = field(default_factory=dict)   # layout index -> C statements returning int
    doc: str = ""
    py_type: str = "object"


@dataclass
class LayoutPlan:
    index: int
    ctype: str
    versions: list
    version: str
    version_code: int
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

    def int_limits(self, t: TypeRef) -> tuple[str, str, bool]:
        r = self.resolve(t)
        if r.kind == "external":
            size, signed = self.ext[r.name]["size"], not self.ext[r.name]["c"].startswith("unsigned")
        elif r.kind == "enum":
            return "-2147483648LL", "4294967295LL", True  # a C enum: int or unsigned int
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

    # ---- C -> Python ----------------------------------------------------

    def to_py(self, t: TypeRef, expr: str, versions=None, owner: str | None = None) -> str:
        """A C expression building a new PyObject * from the C value `expr`."""
        c = self.category(t)
        if c == "int":
            lo, hi, signed = self.int_limits(t)
            return (f"PyLong_FromLongLong((long long)({expr}))" if signed
                    else f"PyLong_FromUnsignedLongLong((unsigned long long)({expr}))")
        if c == "enum":
            return f"PyLong_FromLongLong((long long)({expr}))"
        if c == "bool":
            return f"PyBool_FromLong((long)({expr}))"
        if c == "float":
            return f"PyFloat_FromDouble((double)({expr}))"
        if c == "string":
            return f"nbpy_from_string({expr})"
        if c == "pointer":
            return f"nbpy_from_pointer((const void *)(uintptr_t)({expr}))"
        if c == "record":
            name = self.resolve(t).name
            layout = self.layout_index(name, versions) if versions else len(self.variants[name]) - 1
            if owner:
                return f"nbpy_record_view(&{self.record_class(name)}, {layout}, (void *)&({expr}), {owner})"
            return f"nbpy_record_copy_of(&{self.record_class(name)}, {layout}, &({expr}))"
        raise ValueError(f"no value conversion for {c}")


class Planner:
    def __init__(self, ctx: RenderContext, types: PythonTypes):
        self.ctx, self.types = ctx, types

    # ---- functions ----------------------------------------------------------

    def function(self, api, fn) -> FunctionPlan:
        T = self.types
        fname = f'"{fn.name}"'
        derived_lengths = {p.length_param for p in fn.params
                           if p.length_param and p.direction in ("in", "inout")}
        plans, inputs, outputs = [], [], []
        for p in fn.params:
            plan = ParamPlan(p.name, "length" if p.name in derived_lengths else p.direction)
            local = f"a_{p.name}"
            argname = f'"{p.name}"'
            ctype = T.ctype(p.type)
            cat = T.category(p.type)
            if plan.role == "length":
                plan.decl = f"{T.ct.decl(p.type, local)} = 0;"
                plan.call = local
            elif plan.role == "out" and cat == "pointer" and T.resolve(p.type).kind == "pointer":
                self._out_param(plan, p, local, fname)
                outputs.append(plan)
            elif plan.role == "inout" and T.resolve(p.type).kind == "pointer" \
                    and T.resolve(T.resolve(p.type).pointee).kind == "record":
                rec = T.resolve(T.resolve(p.type).pointee).name
                plan.decl = f"void *{local} = NULL;\n  nbpy_held h_{p.name} = NBPY_HELD_INIT;"
                plan.convert = (f"if (nbpy_arg_record_pointer(args[{{i}}], &{T.record_class(rec)}, {fname}, "
                                f"{argname}, 1, &h_{p.name}, &{local}) < 0) goto done;")
                plan.held = True
                plan.call = f"({ctype}){local}"
                plan.result = f"r_{p.name} = Py_NewRef(args[{{i}}]);"
                plan.py_type = f"{rec}"
                plan.py_result_type = rec
                outputs.append(plan)
            else:  # in, and out/inout the rules above cannot return (taken as in)
                plan.role = "in"
                self._in_param(plan, p, fn, local, fname, argname, ctype, cat)
            if plan.role in ("in", "inout"):
                plan.index = len(inputs)
                plan.convert = plan.convert.replace("{i}", str(plan.index))
                plan.result = plan.result.replace("{i}", str(plan.index))
                inputs.append(plan)
            plans.append(plan)
        result_kind, result_decl, result_value, stub_result = self._result(fn)
        outs = [o.py_result_type for o in outputs]
        if result_kind == "value":
            outs = [stub_result] + outs
        stub = "None" if not outs else outs[0] if len(outs) == 1 else f"tuple[{', '.join(outs)}]"
        jumps = result_kind == "nccl_result" or bool(outputs) or any("goto done" in p.convert for p in plans)
        return FunctionPlan(fn, fn.snake_name, plans, inputs, outputs, result_kind, result_decl,
                            result_value, api.version_codes[fn.since], self._doc(api, fn, fn.snake_name, inputs), stub,
                            jumps)

    def _in_param(self, plan, p, fn, local, fname, argname, ctype, cat):
        T = self.types
        r = T.resolve(p.type)
        plan.call = local
        if cat in ("int", "enum"):
            lo, hi, signed = T.int_limits(p.type)
            if signed or cat == "enum":
                plan.decl = f"{T.ct.decl(p.type, local)};\n  long long v_{p.name};"
                plan.convert = (f"if (nbpy_arg_signed(args[{{i}}], {fname}, {argname}, {lo}, {hi}, &v_{p.name}) < 0) "
                                f"goto done;\n  {local} = ({ctype})v_{p.name};")
            else:
                plan.decl = f"{T.ct.decl(p.type, local)};\n  unsigned long long v_{p.name};"
                plan.convert = (f"if (nbpy_arg_unsigned(args[{{i}}], {fname}, {argname}, {hi}, &v_{p.name}) < 0) "
                                f"goto done;\n  {local} = ({ctype})v_{p.name};")
            plan.py_type = "int"
        elif cat == "bool":
            plan.decl = f"{T.ct.decl(p.type, local)};\n  int v_{p.name};"
            plan.convert = (f"if (nbpy_arg_bool(args[{{i}}], {fname}, {argname}, &v_{p.name}) < 0) goto done;\n"
                            f"  {local} = v_{p.name};")
            plan.py_type = "bool"
        elif cat == "float":
            plan.decl = f"{T.ct.decl(p.type, local)};\n  double v_{p.name};"
            plan.convert = (f"if (nbpy_arg_double(args[{{i}}], {fname}, {argname}, &v_{p.name}) < 0) goto done;\n"
                            f"  {local} = ({ctype})v_{p.name};")
            plan.py_type = "float"
        elif cat == "string":
            plan.decl = f"const char *{local} = NULL;\n  nbpy_held h_{p.name} = NBPY_HELD_INIT;"
            plan.convert = (f"if (nbpy_arg_string(args[{{i}}], {fname}, {argname}, &h_{p.name}, &{local}) < 0) "
                            f"goto done;")
            plan.call = f"({ctype}){local}"
            plan.held = True
            plan.py_type = "str | bytes | None"
        elif cat == "record":
            name = r.name
            if len(T.variants[name]) > 1:
                raise ValueError(f"{fn.name}.{p.name}: a by-value record with several layouts is not bindable")
            plan.decl = f"void *{local} = NULL;\n  nbpy_held h_{p.name} = NBPY_HELD_INIT;"
            plan.convert = (f"if (nbpy_arg_record(args[{{i}}], &{T.record_class(name)}, {fname}, {argname}, "
                            f"&h_{p.name}, &{local}) < 0) goto done;")
            plan.call = f"*({ctype} *){local}"
            plan.held = True
            plan.py_type = f"{name} | bytes"
        elif cat == "pointer" and r.kind == "pointer" and p.length_param:
            self._in_array(plan, p, fn, local, fname, argname)
        elif cat == "pointer" and r.kind == "pointer" and T.resolve(r.pointee).kind == "record" \
                and T.resolve(r.pointee).name in T.variants:
            name = T.resolve(r.pointee).name
            writable = "0" if r.const else "1"
            plan.decl = f"void *{local} = NULL;\n  nbpy_held h_{p.name} = NBPY_HELD_INIT;"
            plan.convert = (f"if (nbpy_arg_record_pointer(args[{{i}}], &{T.record_class(name)}, {fname}, "
                            f"{argname}, {writable}, &h_{p.name}, &{local}) < 0) goto done;")
            plan.call = f"({ctype}){local}"
            plan.held = True
            plan.py_type = f"{name} | bytes | int | None"
        elif cat == "pointer" and r.kind == "pointer" and p.type.kind != "typedef":
            writable = "0" if r.const else "1"
            plan.decl = f"void *{local} = NULL;\n  nbpy_held h_{p.name} = NBPY_HELD_INIT;"
            plan.convert = (f"if (nbpy_arg_memory(args[{{i}}], {fname}, {argname}, {writable}, &h_{p.name}, "
                            f"&{local}) < 0) goto done;")
            plan.call = f"({ctype}){local}"
            plan.held = True
            plan.py_type = "int | bytes | bytearray | memoryview | None"
        elif cat == "pointer":  # handles, stream, function pointers: an address
            plan.decl = f"void *{local} = NULL;"
            plan.convert = f"if (nbpy_arg_pointer(args[{{i}}], {fname}, {argname}, &{local}) < 0) goto done;"
            plan.call = f"({ctype})(uintptr_t){local}"
            plan.py_type = "int | None"
        else:
            raise ValueError(f"{fn.name}.{p.name}: no Python mapping for a {cat} parameter")

    def _in_array(self, plan, p, fn, local, fname, argname):
        """in[n]: a sequence of elements, copied into a temporary C array; n is derived."""
        T = self.types
        r = T.resolve(p.type)
        elem = r.pointee
        ecat = T.category(elem)
        etype = T.ct.type(elem)
        n = f"n_{p.name}"
        length_param = next(q for q in fn.params if q.name == p.length_param)
        plan.decl = (f"{etype} *{local} = NULL;\n  Py_ssize_t {n} = 0;\n  nbpy_held h_{p.name} = NBPY_HELD_INIT;")
        lines = [f"if (nbpy_arg_sequence(args[{{i}}], {fname}, {argname}, &{n}) < 0) goto done;",
                 f"a_{length_param.name} = ({T.ctype(length_param.type)}){n};",
                 "if (args[{i}] != Py_None) {",
                 f"  if (!({local} = ({etype} *)nbpy_temp_array(&h_{p.name}, {n}, sizeof *{local}))) goto done;",
                 f"  for (Py_ssize_t k = 0; k < {n}; ++k) {{",
                 "    PyObject *item = PySequence_GetItem(args[{i}], k);",
                 "    if (!item) goto done;"]
        if ecat in ("int", "enum"):
            lo, hi, signed = T.int_limits(elem)
            lines += ["    long long v;",
                      f"    int bad = nbpy_arg_signed(item, {fname}, {argname}, {lo}, {hi}, &v);",
                      "    Py_DECREF(item);",
                      "    if (bad) goto done;",
                      f"    {local}[k] = ({etype})v;"]
            plan.py_type = "Sequence[int] | None"
        elif ecat == "record":
            name = T.resolve(elem).name
            lines += ["    void *p = NULL;",
                      "    nbpy_held h = NBPY_HELD_INIT;",
                      f"    int bad = nbpy_arg_record(item, &{T.record_class(name)}, {fname}, {argname}, &h, &p);",
                      f"    if (!bad) memcpy(&{local}[k], p, sizeof {local}[k]);",
                      "    nbpy_release(&h);",
                      "    Py_DECREF(item);",
                      "    if (bad) goto done;"]
            plan.py_type = f"Sequence[{name} | bytes] | None"
        elif ecat == "pointer":
            lines += ["    void *v = NULL;",
                      f"    int bad = nbpy_arg_pointer(item, {fname}, {argname}, &v);",
                      "    Py_DECREF(item);",
                      "    if (bad) goto done;",
                      f"    {local}[k] = ({etype})(uintptr_t)v;"]
            plan.py_type = "Sequence[int] | None"
        else:
            raise ValueError(f"{fn.name}.{p.name}: no Python mapping for an array of {ecat}")
        lines += ["  }", "}"]
        plan.convert = "\n  ".join(lines)
        plan.call = f"({T.ctype(p.type)}){local}"
        plan.held = True

    def _out_param(self, plan, p, local, fname):
        T = self.types
        r = T.resolve(p.type)
        pointee = r.pointee
        pr = T.resolve(pointee)
        if p.length_param:  # out[n]: a temporary array of n, returned as a tuple
            etype = T.ct.type(pointee)
            n = f"a_{p.length_param}"
            plan.decl = f"{etype} *{local} = NULL;\n  nbpy_held h_{p.name} = NBPY_HELD_INIT;"
            plan.convert = f"if (!({local} = ({etype} *)nbpy_temp_array(&h_{p.name}, {n}, sizeof *{local}))) goto done;"
            plan.call = local
            plan.held = True
            element = T.to_py(pointee, f"{local}[k]")
            plan.result = (f"if ((r_{p.name} = PyTuple_New({n}))) {{\n"
                           f"    for (Py_ssize_t k = 0; k < {n}; ++k) {{\n"
                           f"      PyObject *e = {element};\n"
                           f"      if (!e) {{ Py_CLEAR(r_{p.name}); break; }}\n"
                           f"      PyTuple_SET_ITEM(r_{p.name}, k, e);\n"
                           f"    }}\n"
                           f"  }}")
            plan.py_result_type = f"tuple[{T.stub_type(pointee, False)}, ...]"
            return
        if pr.kind == "record" and pr.name in T.variants:
            cls = T.record_class(pr.name)
            plan.decl = f"PyObject *o_{p.name} = NULL;"
            plan.convert = (f"if (!(o_{p.name} = nbpy_record_new(&{cls}, nbpy_record_layout_for(&{cls}, 0), 1))) "
                            f"goto done;")
            plan.call = f"({T.ctype(p.type)})((nbpy_record *)o_{p.name})->data"
            plan.result = f"r_{p.name} = Py_NewRef(o_{p.name});"
            plan.owned = f"o_{p.name}"
            plan.py_result_type = pr.name
            return
        if pr.kind in ("void", "function_pointer"):
            raise ValueError(f"out parameter {p.name}: pointer to {pr.kind}")
        plan.decl = f"{T.ct.decl(pointee, local)};\n  memset(&{local}, 0, sizeof {local});"
        plan.call = f"&{local}"
        plan.result = f"r_{p.name} = {T.to_py(pointee, local)};"
        plan.py_result_type = T.stub_type(pointee, False)

    def _result(self, fn):
        T = self.types
        r = fn.result
        if r.kind == "enum" and r.name == RESULT_ENUM:
            return "nccl_result", f"{T.ctype(r)} result;", "", "None"
        if r.kind == "void":
            return "void", "", "", "None"
        return "value", f"{T.ct.decl(r, 'result')};", T.to_py(r, "result"), T.stub_type(r, False)

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
                    f"nbpy_init_{name}{var.suffix}" if init else None,
                    init.name if init else None,
                    f"{PREFIX}init_{init.name}{var.suffix}" if init else None,
                    [f.name for f in var.record.fields if not f.anonymous],
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
                yield f
                continue
            inner = next(v for v in api.record_variants[f.type.name] if versions[-1] in v.versions)
            yield from Planner._flat_fields(api, inner.record, versions)

    def _fields(self, api, name, variants, layouts) -> list[FieldPlan]:
        T = self.types
        by_name: dict[str, FieldPlan] = {}
        order = []
        for i, var in enumerate(variants):
            ctype = layouts[i].ctype
            for f in self._flat_fields(api, var.record, var.versions):
                if f.name not in by_name:
                    by_name[f.name] = FieldPlan(f.name, f.since or var.versions[0], doc=f.doc or "",
                                                py_type=T.stub_type(f.type, False))
                    order.append(f.name)
                fp = by_name[f.name]
                lvalue = f"(({ctype} *)self->data)->{f.name}"
                fp.getters[i] = self._getter(f, lvalue, var.versions)
                fp.setters[i] = self._setter(name, f, lvalue, var.versions)
        return [by_name[n] for n in order]

    def _getter(self, f, lvalue, versions) -> str:
        T = self.types
        c = T.category(f.type)
        if c == "record":
            return f"return {T.to_py(f.type, lvalue, versions, owner='(PyObject *)self')};"
        if c == "array":
            r = T.resolve(f.type)
            if T.byte_array(f.type):
                return f"return PyBytes_FromStringAndSize((const char *){lvalue}, sizeof {lvalue});"
            elem = T.to_py(r.element, f"({lvalue})[k]", versions, owner="(PyObject *)self")
            return ("{\n"
                    f"      PyObject *t = PyTuple_New({r.length});\n"
                    f"      for (Py_ssize_t k = 0; t && k < {r.length}; ++k) {{\n"
                    f"        PyObject *e = {elem};\n"
                    f"        if (!e) Py_CLEAR(t); else PyTuple_SET_ITEM(t, k, e);\n"
                    f"      }}\n"
                    f"      return t;\n"
                    "    }")
        return f"return {T.to_py(f.type, lvalue, versions)};"

    def _setter(self, record, f, lvalue, versions) -> str:
        T = self.types
        c = T.category(f.type)
        rname, fname = f'"{record}"', f'"{f.name}"'
        guard = f"if (!value) return nbpy_record_no_delete({fname});"
        if c in ("int", "enum"):
            lo, hi, signed = T.int_limits(f.type)
            if signed or c == "enum":
                return (f"{{ {guard} long long v; if (nbpy_arg_signed(value, {rname}, {fname}, {lo}, {hi}, &v) < 0) "
                        f"return -1; {lvalue} = ({T.ctype(f.type)})v; return 0; }}")
            return (f"{{ {guard} unsigned long long v; if (nbpy_arg_unsigned(value, {rname}, {fname}, {hi}, &v) < 0) "
                    f"return -1; {lvalue} = ({T.ctype(f.type)})v; return 0; }}")
        if c == "bool":
            return (f"{{ {guard} int v; if (nbpy_arg_bool(value, {rname}, {fname}, &v) < 0) return -1; "
                    f"{lvalue} = v; return 0; }}")
        if c == "float":
            return (f"{{ {guard} double v; if (nbpy_arg_double(value, {rname}, {fname}, &v) < 0) return -1; "
                    f"{lvalue} = ({T.ctype(f.type)})v; return 0; }}")
        if c == "string":
            return f"return nbpy_set_string_field(self, {fname}, value, (const char **)&{lvalue});"
        if c == "pointer":
            return f"return nbpy_set_pointer_field(self, {fname}, value, (void **)&{lvalue});"
        if c == "record":
            rec = T.resolve(f.type).name
            return (f"return nbpy_set_record_field(self, {fname}, value, &{T.record_class(rec)}, "
                    f"&{lvalue}, sizeof {lvalue});")
        if c == "array":
            r = T.resolve(f.type)
            if T.byte_array(f.type):
                return f"return nbpy_set_bytes_field({fname}, value, {lvalue}, sizeof {lvalue});"
            ecat = T.category(r.element)
            etype = T.ctype(r.element)
            if ecat in ("int", "enum"):
                lo, hi, signed = T.int_limits(r.element)
                conv = (f"long long v; bad = nbpy_arg_signed(e, {rname}, {fname}, {lo}, {hi}, &v); "
                        f"if (!bad) ({lvalue})[k] = ({etype})v;")
            elif ecat == "bool":
                conv = f"int v; bad = nbpy_arg_bool(e, {rname}, {fname}, &v); if (!bad) ({lvalue})[k] = v;"
            elif ecat == "float":
                conv = (f"double v; bad = nbpy_arg_double(e, {rname}, {fname}, &v); "
                        f"if (!bad) ({lvalue})[k] = ({etype})v;")
            elif ecat == "pointer":
                conv = (f"void *v; bad = nbpy_arg_pointer(e, {rname}, {fname}, &v); "
                        f"if (!bad) ({lvalue})[k] = ({etype})(uintptr_t)v;")
            elif ecat == "record":
                rec = T.resolve(r.element).name
                conv = (f"bad = nbpy_set_record_field(self, {fname}, e, &{T.record_class(rec)}, "
                        f"&({lvalue})[k], sizeof ({lvalue})[k]);")
            else:
                raise ValueError(f"{record}.{f.name}: no Python mapping for an array of {ecat}")
            return ("{\n"
                    f"      {guard}\n"
                    f"      PyObject *seq = PySequence_Fast(value, \"{f.name} must be a sequence\");\n"
                    f"      if (!seq) return -1;\n"
                    f"      if (PySequence_Fast_GET_SIZE(seq) != {r.length}) {{\n"
                    f"        Py_DECREF(seq);\n"
                    f"        nbpy_raise_invalid({rname}, {fname}, \"{f.name} takes exactly {r.length} elements\");\n"
                    f"        return -1;\n"
                    f"      }}\n"
                    f"      for (Py_ssize_t k = 0; k < {r.length}; ++k) {{\n"
                    f"        PyObject *e = PySequence_Fast_GET_ITEM(seq, k);\n"
                    f"        int bad;\n"
                    f"        {{ {conv} }}\n"
                    f"        if (bad) {{ Py_DECREF(seq); return -1; }}\n"
                    f"      }}\n"
                    f"      Py_DECREF(seq);\n"
                    f"      return 0;\n"
                    "    }")
        raise ValueError(f"{record}.{f.name}: no Python mapping for {c}")

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


def _product(library: str) -> str:
    return "NCCL EP" if library == "nccl_ep" else "NCCL"


def py_literal(value) -> str:
    return repr(value)


def py_constant(constant) -> str:
    """The C expression of a new Python object holding a constant's value."""
    v = constant.value
    if v is None:
        return "Py_NewRef(Py_None)"
    if isinstance(v, str):
        return f"PyUnicode_FromString({c_string(v)})"
    if isinstance(v, float):
        return f"PyFloat_FromDouble({v!r})"
    if v > 2 ** 63 - 1:
        return f"PyLong_FromUnsignedLongLong({v}ULL)"
    if v < -(2 ** 63 - 1):
        return f"PyLong_FromLongLong({v + 1}LL - 1)"
    return f"PyLong_FromLongLong({v}LL)"


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
        out.append((f"{GENERATED_PY}/{api.library}_enums.py", "python/enums.py.j2", variables))
    nccl = ctx.api("nccl")
    result = next(e for e in nccl.enums if e.name == RESULT_ENUM)
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
                       "py_constant": py_constant, "py_constant_type": py_constant_type})
    env.globals["P"] = PREFIX
    files = render_files(env, outputs(ctx))
    return {path: _tidy(path, text) for path, text in files.items()}


def _tidy(path: str, text: str) -> str:
    """Collapse runs of blank lines the templates leave; end with one newline."""
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.rstrip("\n") + "\n"
