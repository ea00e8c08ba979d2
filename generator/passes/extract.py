"""Pass 1: clang's view of one header set -> HeaderSetIR.

Walks the top-level declarations of the NCCL headers (not CUDA's or libc's),
asks clang for every size, offset and value, and records everything it cannot
express in the skipped-items report with file:line and reason.
"""
from __future__ import annotations

import dataclasses
import re

from .. import clang_frontend as cf
from ..policy.conventions import Conventions
from ..header_sets import HeaderSet, cuda_home, is_nccl_header
from ..ir import (DeviceFunction, DeviceParam, DeviceStorage, Enum, EnumValue, Field, Function, HeaderSetIR,
                  Param, Record, SkippedItem, StorageMember, TypeRef, Typedef)
from . import macros

CK, TK = cf.CursorKind, cf.TypeKind

_INT_KINDS = {
    TK.CHAR_S: ("char", True), TK.SCHAR: ("signed char", True), TK.UCHAR: ("unsigned char", False),
    TK.CHAR_U: ("char", False), TK.SHORT: ("short", True), TK.USHORT: ("unsigned short", False),
    TK.INT: ("int", True), TK.UINT: ("unsigned int", False), TK.LONG: ("long", True),
    TK.ULONG: ("unsigned long", False), TK.LONGLONG: ("long long", True),
    TK.ULONGLONG: ("unsigned long long", False),
}
# Standard typedefs kept by name: every target language has a spelling for them.
_STD_INT_TYPEDEFS = {"size_t", "ssize_t", "uintptr_t", "intptr_t", "ptrdiff_t",
                     "int8_t", "int16_t", "int32_t", "int64_t",
                     "uint8_t", "uint16_t", "uint32_t", "uint64_t"}


# clang names an unnamed record by where it is: "(unnamed struct at /some/dir/nccl.h:11:9)".
_UNNAMED_AT = re.compile(r"\((unnamed|anonymous) (struct|union|enum|class) at (?:[^():]*/)?([^/():]+:\d+):\d+\)")


def _short_paths(text: str) -> str:
    """The report names an unnamed record by file name and line, as it does every location."""
    return _UNNAMED_AT.sub(r"(\1 \2 at \3)", text)


class Unbindable(Exception):
    """A declaration that uses something the IR cannot express."""


def include_dirs_for(hs: HeaderSet, all_sets: dict[str, HeaderSet]):
    dirs = [hs.include_root]
    dep = hs.depends_on
    while dep:
        dirs.append(all_sets[dep].include_root)
        dep = all_sets[dep].depends_on
    cuda_inc = cuda_home() / "include"
    if cuda_inc not in dirs:
        dirs.append(cuda_inc)
    return dirs


class Extractor:
    def __init__(self, hs: HeaderSet, unit: cf.ParsedUnit, conv: Conventions, device: bool = False):
        self.hs, self.unit, self.conv = hs, unit, conv
        self.device = device  # the __CUDACC__ view: records only, methods allowed
        self.ir = HeaderSetIR(hs.name, hs.library, hs.version, hs.version_code, list(hs.headers),
                              depends_on=hs.depends_on,
                              device_headers=None if hs.device_headers is None else list(hs.device_headers))
        self.names_by_usr: dict[str, str] = {}   # record/enum declaration -> IR name
        self.typedef_names_by_usr: dict[str, list[str]] = {}

    # ---- helpers -------------------------------------------------------
    def rel(self, c) -> str | None:
        return self.unit.relative_path(c)

    def skip(self, c, kind: str, reason: str, name: str | None = None):
        self.ir.skipped.append(SkippedItem(_short_paths(name or c.spelling or c.displayname), kind,
                                           self.unit.location(c), _short_paths(reason)))

    def own_declarations(self, cursor):
        """Top-level declarations in this set's NCCL headers, through extern "C" blocks."""
        for c in cursor.get_children():
            if c.kind == CK.LINKAGE_SPEC:
                yield from self.own_declarations(c)
            elif is_nccl_header(self.rel(c)):
                yield c

    # ---- types ---------------------------------------------------------
    def type_ref(self, t: cf.Type) -> TypeRef:
        k = t.kind
        if k == TK.ELABORATED:
            return self.type_ref(t.get_named_type())
        if k == TK.AUTO:
            return self.type_ref(t.get_canonical())
        size, align = max(t.get_size(), 0), max(t.get_align(), 0)
        if k == TK.TYPEDEF:
            decl = t.get_declaration()
            name = decl.spelling
            if name in self.conv.external_types:
                ext = self.conv.external_types[name]
                return TypeRef("external", name=name, size=ext["size"], align=ext["size"])
            if name in _STD_INT_TYPEDEFS:
                canon = t.get_canonical()
                return TypeRef("int", name=name, signed=_INT_KINDS[canon.kind][1], size=size, align=align)
            if is_nccl_header(self.rel(decl)) or self._is_dependency_header(decl):
                target = self._typedef_target(decl)
                if target is not None:
                    return target
                return TypeRef("typedef", name=name, size=size, align=align)
            under = decl.underlying_typedef_type
            if under.kind in _INT_KINDS or under.kind in (TK.FLOAT, TK.DOUBLE, TK.BOOL):
                return self.type_ref(under)
            raise Unbindable(f"uses type '{name}' from {self.unit.location(decl)}, "
                             f"which is neither NCCL's nor listed in conventions.toml [external_types]")
        if k in _INT_KINDS:
            name, signed = _INT_KINDS[k]
            return TypeRef("int", name=name, signed=signed, size=size, align=align)
        if k in (TK.FLOAT, TK.DOUBLE):
            return TypeRef("float", name="float" if k == TK.FLOAT else "double", size=size, align=align)
        if k == TK.BOOL:
            return TypeRef("bool", name="bool", size=size, align=align)
        if k == TK.VOID:
            return TypeRef("void")
        if k == TK.POINTER:
            pointee = t.get_pointee()
            if pointee.get_canonical().kind == TK.FUNCTIONPROTO:
                while pointee.kind in (TK.TYPEDEF, TK.ELABORATED):  # `typedef int fn_t(int)`, as spelled
                    pointee = pointee.get_declaration().underlying_typedef_type if pointee.kind == TK.TYPEDEF \
                        else pointee.get_named_type()
                return self._function_type(pointee if pointee.kind == TK.FUNCTIONPROTO else pointee.get_canonical(),
                                           size)
            return TypeRef("pointer", pointee=self.type_ref(pointee),
                           const=pointee.is_const_qualified(), size=size, align=align)
        if k == TK.LVALUEREFERENCE and self.device:
            # A reference member is laid out as a pointer (Itanium C++ ABI).
            pointee = t.get_pointee()
            return TypeRef("pointer", pointee=self.type_ref(pointee), const=pointee.is_const_qualified(),
                           size=8, align=8)
        if k == TK.CONSTANTARRAY:
            return TypeRef("array", element=self.type_ref(t.element_type), length=t.element_count,
                           size=size, align=align)
        if k in (TK.RECORD, TK.ENUM):
            decl = t.get_declaration()
            usr = decl.get_usr()
            if k == TK.RECORD and decl.get_definition() is None:
                return TypeRef("opaque", name=decl.spelling)
            if usr in self.names_by_usr:
                return TypeRef("record" if k == TK.RECORD else "enum", name=self.names_by_usr[usr],
                               size=size, align=align)
            if self._is_dependency_header(decl):
                # Declared by the NCCL set this one depends on (nccl_ep.h -> nccl.h).
                return TypeRef("record" if k == TK.RECORD else "enum",
                               name=self._dependency_name(decl), size=size, align=align)
            nested = self._nested_record(decl) if k == TK.RECORD else None
            if nested is not None:
                return TypeRef("record", name=nested, size=size, align=align)
            raise Unbindable(f"uses {t.spelling}, which is not a bound NCCL type")
        number = cf.type_kind_number(t)  # differs from k.value for a kind these bindings do not name
        raise Unbindable(f"type '{t.spelling}' ({k.name if number == k.value else f'clang type kind {number}'}) "
                         "has no IR form")

    def parameter_type(self, t: cf.Type) -> TypeRef:
        """A parameter declared as an array is a pointer to its element (C's decay)."""
        if t.kind in (TK.CONSTANTARRAY, TK.INCOMPLETEARRAY):
            element = t.element_type
            return TypeRef("pointer", pointee=self.type_ref(element), const=element.is_const_qualified(),
                           size=8, align=8)
        return self.type_ref(t)

    def _nested_record(self, decl) -> str | None:
        """A struct declared inside a bound record (ncclCoopAny::Storage): mirrored as a record
        of its own, named Parent__Nested, the first time a member uses it."""
        parent = decl.semantic_parent
        if parent is None or parent.kind not in (CK.STRUCT_DECL, CK.CLASS_DECL, CK.UNION_DECL):
            return None
        parent_name = self.names_by_usr.get(parent.get_usr())
        if parent_name is None or not decl.is_definition() or not cf.tag_name(decl):
            return None
        name = f"{parent_name}__{decl.spelling}"
        if decl.get_usr() not in self.names_by_usr:
            self.names_by_usr[decl.get_usr()] = name
            record = self.build_record(decl, name)
            record.cxx_name = f"{parent.spelling}::{decl.spelling}"
            self.ir.records.append(record)
        return name

    def _function_type(self, proto, size) -> TypeRef:
        if proto.is_function_variadic():
            raise Unbindable(f"pointer to a variadic function type '{proto.spelling}'")
        params = tuple(self.type_ref(a) for a in proto.argument_types())
        return TypeRef("function_pointer", result=self.type_ref(proto.get_result()), params=params,
                       size=size, align=size)

    def _typedef_target(self, decl) -> TypeRef | None:
        """A typedef that only names a record or enum refers to that IR item."""
        under = decl.underlying_typedef_type
        while under.kind == TK.ELABORATED:
            under = under.get_named_type()
        if under.kind == TK.TYPEDEF:
            return self._typedef_target(under.get_declaration())
        if under.kind in (TK.RECORD, TK.ENUM):
            usr = under.get_declaration().get_usr()
            if usr in self.names_by_usr:
                return TypeRef("record" if under.kind == TK.RECORD else "enum",
                               name=self.names_by_usr[usr], size=max(under.get_size(), 0),
                               align=max(under.get_align(), 0))
            if self._is_dependency_header(under.get_declaration()):
                return TypeRef("record" if under.kind == TK.RECORD else "enum",
                               name=decl.spelling, size=max(under.get_size(), 0),
                               align=max(under.get_align(), 0))
        return None

    def _is_dependency_header(self, decl) -> bool:
        return self.hs.depends_on is not None and decl.location.file is not None and \
            not is_nccl_header(self.rel(decl)) and "/nccl" in decl.location.file.name

    def _dependency_name(self, decl) -> str:
        for c in decl.semantic_parent.get_children() if decl.semantic_parent else []:
            if c.kind == CK.TYPEDEF_DECL and c.underlying_typedef_type.get_canonical() == decl.type.get_canonical():
                return c.spelling
        return decl.spelling

    # ---- pre-pass: names ---------------------------------------------
    def collect_names(self, decls):
        for c in decls:
            if c.kind == CK.TYPEDEF_DECL:
                under = c.underlying_typedef_type
                while under.kind == TK.ELABORATED:
                    under = under.get_named_type()
                if under.kind in (TK.RECORD, TK.ENUM):
                    usr = under.get_declaration().get_usr()
                    self.typedef_names_by_usr.setdefault(usr, []).append(c.spelling)
        for c in decls:
            if c.kind in (CK.STRUCT_DECL, CK.UNION_DECL, CK.ENUM_DECL):
                usr = c.get_usr()
                names = self.typedef_names_by_usr.get(usr)
                if names:
                    self.names_by_usr[usr] = names[0]
                elif cf.tag_name(c):
                    self.names_by_usr[usr] = c.spelling

    # ---- declarations ------------------------------------------------
    def run(self) -> HeaderSetIR:
        decls = list(self.own_declarations(self.unit.cursor))
        self.collect_names(decls)
        seen_records, seen_enums, seen_functions = set(), set(), {}
        function_cursors = []
        for c in decls:
            k = c.kind
            try:
                if k in (CK.STRUCT_DECL, CK.UNION_DECL, CK.CLASS_DECL):
                    self.record(c, seen_records)
                elif k == CK.ENUM_DECL:
                    self.enum(c, seen_enums)
                elif k == CK.TYPEDEF_DECL:
                    self.typedef(c)
                elif k == CK.FUNCTION_DECL:
                    function_cursors.append(c)
                elif k == CK.MACRO_DEFINITION or k in (CK.MACRO_INSTANTIATION, CK.INCLUSION_DIRECTIVE):
                    pass  # macros: passes/macros.py
                elif k == CK.NAMESPACE:
                    self.skip(c, "namespace", "C++ namespace (device-side utilities), not host-visible C API")
                elif k in (CK.CLASS_TEMPLATE, CK.FUNCTION_TEMPLATE, CK.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION):
                    self.skip(c, "template", "C++ template: no C layout or C symbol")
                elif k == CK.VAR_DECL:
                    self.skip(c, "variable", "variable declaration: not part of the host API")
                elif k == CK.USING_DECLARATION:
                    self.skip(c, "using", "C++ using-declaration")
                else:
                    self.skip(c, k.name.lower(), f"declaration kind {k.name} is not bound")
            except Unbindable as e:
                self.skip(c, k.name.lower(), str(e))
        profiled = {c.spelling for c in function_cursors}
        for c in function_cursors:
            try:
                self.function(c, seen_functions, profiled)
            except Unbindable as e:
                self.skip(c, "function", str(e))
        self.demote_skipped_records()
        return self.ir

    def drop_records_holding_unbound(self, bound_elsewhere=frozenset()):
        """A record that holds, by value, a record that could not be mirrored cannot be
        mirrored either: it goes to the skipped items too (until nothing changes)."""
        own = set(self.names_by_usr.values())
        while True:
            bound = {r.name for r in self.ir.records} | bound_elsewhere
            dropped = False
            for r in list(self.ir.records):
                for f in r.fields:
                    t = f.type
                    while t.kind == "array":
                        t = t.element
                    if t.kind == "record" and t.name not in bound and t.name in own:
                        self.ir.records.remove(r)
                        self.ir.skipped.append(SkippedItem(r.name, "record", f"{r.header}:{r.line}",
                                                           f"{r.name}.{f.name} holds {t.name} by value, "
                                                           "which is not bound"))
                        dropped = True
                        break
            if not dropped:
                return

    def demote_skipped_records(self, bound_elsewhere=frozenset()):
        """A pointer to a record that could not be mirrored becomes a pointer to an opaque type.
        bound_elsewhere: records the host-side pass mirrors (for the device-side pass)."""
        self.drop_records_holding_unbound(bound_elsewhere)
        bound = {r.name for r in self.ir.records} | bound_elsewhere
        own = set(self.names_by_usr.values())

        def fix(t):
            if t is None:
                return None
            if t.kind == "record" and t.name not in bound and t.name in own:
                return TypeRef("opaque", name=t.name)
            return dataclasses.replace(t, pointee=fix(t.pointee), element=fix(t.element),
                                       result=fix(t.result), params=tuple(fix(p) for p in t.params))
        for r in self.ir.records:
            for f in r.fields:
                f.type = fix(f.type)
        for fn in self.ir.functions:
            fn.result = fix(fn.result)
            for p in fn.params:
                p.type = fix(p.type)
        for td in self.ir.typedefs:
            td.type = fix(td.type)
            td.opaque_handle = td.type.kind == "pointer" and td.type.pointee.kind == "opaque"
        self.drop_users_of_skipped()

    def drop_users_of_skipped(self):
        """A function that takes or returns a skipped record by value (opaque now), and anything
        that names a skipped typedef, is skipped too, saying which and why (until nothing changes)."""
        def named(t, names):
            if t is None:
                return None
            if t.kind == "typedef" and t.name in names:
                return t.name
            return next((n for n in (named(u, names) for u in (t.pointee, t.element, t.result, *t.params))
                         if n), None)
        while True:
            gone = {s.name: s.reason for s in self.ir.skipped if s.kind.startswith("typedef")}
            dropped = []
            for fn in self.ir.functions:
                for what, t in [("the result", fn.result)] + [(f"parameter {p.name}", p.type) for p in fn.params]:
                    if t.kind == "opaque":
                        dropped.append((fn, "function", f"{what} is {t.name} by value, which is not bound"))
                        break
                    if named(t, gone):
                        dropped.append((fn, "function", f"{what} uses {named(t, gone)}, which is skipped "
                                                        f"({gone[named(t, gone)]})"))
                        break
            for td in self.ir.typedefs:
                if named(td.type, gone):
                    dropped.append((td, "typedef", f"uses {named(td.type, gone)}, which is skipped "
                                                   f"({gone[named(td.type, gone)]})"))
            for r in self.ir.records:
                f = next((f for f in r.fields if named(f.type, gone)), None)
                if f is not None:
                    dropped.append((r, "record", f"{r.name}.{f.name} uses {named(f.type, gone)}, which is skipped"))
            if not dropped:
                return
            for item, kind, reason in dropped:
                {"function": self.ir.functions, "typedef": self.ir.typedefs, "record": self.ir.records}[kind].remove(item)
                self.ir.skipped.append(SkippedItem(item.name, kind, f"{item.header}:{item.line}", reason))

    def record(self, c, seen):
        usr = c.get_usr()
        if not c.is_definition():
            return  # a forward declaration; one without a definition is an opaque type (type_ref)
        if usr in seen:
            return
        seen.add(usr)
        name = self.names_by_usr.get(usr)
        if name is None:
            self.skip(c, "record", "unnamed record that no typedef names")
            return
        start = len(self.ir.records)  # unnamed member types built before a failure go too
        try:
            self._record_checked(c, name)
        except Unbindable:
            del self.ir.records[start:]
            raise

    def _record_checked(self, c, name):
        for child in c.get_children():
            methods = (CK.CXX_METHOD, CK.CONSTRUCTOR, CK.DESTRUCTOR, CK.FUNCTION_TEMPLATE, CK.CONVERSION_FUNCTION)
            if child.kind == CK.CXX_BASE_SPECIFIER or (child.kind in methods and (
                    not self.device or child.is_virtual_method())):
                self.skip(c, "record", "C++ class with methods or bases: no C layout to mirror", name)
                return
        self.ir.records.append(self.build_record(c, name))

    def build_record(self, c, name, anonymous=False) -> Record:
        t = c.type
        fields, unresolved_alignas = [], []
        for child in c.get_children():
            if child.kind in (CK.STRUCT_DECL, CK.UNION_DECL) and cf.is_anonymous_member(child):
                fields.append(self.anonymous_member(child, name, t, len(fields)))
                continue
            if child.kind != CK.FIELD_DECL:
                continue
            ft = child.type
            decl = ft.get_declaration()
            is_anon = decl.kind in (CK.STRUCT_DECL, CK.UNION_DECL) and decl.is_anonymous() \
                and decl.get_usr() not in self.names_by_usr
            bit_off = child.get_field_offsetof()
            if is_anon:
                # An unnamed struct/union type: named after its parent and member.
                sub_name = f"{name}__{child.spelling or f'anon{len(fields)}'}"
                self.names_by_usr[decl.get_usr()] = sub_name
                self.ir.records.append(self.build_record(decl, sub_name, anonymous=True))
                ftype = TypeRef("record", name=sub_name, size=ft.get_size(), align=ft.get_align())
            else:
                ftype = self.type_ref(ft)
            unnamed_bitfield = child.is_bitfield() and not child.spelling
            f = Field(child.spelling or ("" if unnamed_bitfield else f"__anon{len(fields)}"), ftype,
                      bit_off // 8, doc=cf.comment_text(child),
                      anonymous=not child.spelling and not unnamed_bitfield)
            for attr in child.get_children():
                if attr.kind == CK.ALIGNED_ATTR:
                    f.align_attr = cf.aligned_attribute_value(attr)
                    if f.align_attr is None:
                        unresolved_alignas.append(f)
            f.reference = child.type.kind == TK.LVALUEREFERENCE
            if child.is_bitfield():
                f.bit_offset, f.bit_width = bit_off, child.get_bitfield_width()
                storage_bits = 8 * max(ft.get_canonical().get_size(), 0)
                if f.bit_width > min(storage_bits, 64):
                    # C++ allows `unsigned x : 40` (padding bits); C and Rust have no such member.
                    raise Unbindable(f"{name}.{f.name}: a {f.bit_width}-bit bitfield is wider than its type "
                                     f"{ft.spelling!r} ({storage_bits} bits)" if f.bit_width > storage_bits
                                     else f"{name}.{f.name}: a {f.bit_width}-bit bitfield is wider than 64 bits")
            fields.append(f)
        if unresolved_alignas:
            # alignas(expression), e.g. alignof(void*): libclang gives neither the expression nor
            # its value. With one such member, the record's own alignment (clang's) is what it asks
            # for when nothing else needs as much; the layout test checks the result.
            others = max([f.align_attr or f.type.align for f in fields
                          if f.bit_width is None and f not in unresolved_alignas] or [1])
            if len(unresolved_alignas) > 1 or t.get_align() <= others:
                raise Unbindable(f"{name}.{unresolved_alignas[0].name}: alignment attribute clang "
                                 "cannot fold")
            unresolved_alignas[0].align_attr = t.get_align()
        natural = max([f.align_attr or f.type.align for f in fields if f.bit_width is None] or [1])
        if t.get_align() < natural:
            raise Unbindable(f"{name}: packed record (align {t.get_align()} < {natural} of its members): "
                             "not mirrored")
        rel = self.rel(c) or ""
        names = [n for n in self.typedef_names_by_usr.get(c.get_usr(), []) if n != name]
        versioned = [f.name for f in fields[:3]] == ["size", "magic", "version"]
        tag = cf.tag_name(c) if cf.tag_name(c) != name else None
        return Record(name, "union" if c.kind == CK.UNION_DECL else "struct", t.get_size(),
                      t.get_align(), fields, rel, c.location.line, tag=tag, typedefs=names,
                      doc=cf.comment_text(c), versioned_header=versioned, anonymous=anonymous)

    def anonymous_member(self, decl, parent_name, parent_type, index) -> Field:
        sub_name = f"{parent_name}__anon{index}"
        self.names_by_usr[decl.get_usr()] = sub_name
        sub = self.build_record(decl, sub_name, anonymous=True)
        self.ir.records.append(sub)
        first = next((f.name for f in sub.fields if f.name and not f.anonymous), None)
        if first is None:
            raise Unbindable(f"{parent_name}: anonymous member with no named field")
        offset = parent_type.get_offset(first) // 8 - sub.fields[0].offset
        return Field(f"__anon{index}", TypeRef("record", name=sub_name, size=sub.size, align=sub.align),
                     offset, anonymous=True)

    def enum(self, c, seen):
        usr = c.get_usr()
        if not c.is_definition() or usr in seen:
            return
        seen.add(usr)
        name = self.names_by_usr.get(usr)
        if name is None:
            # An anonymous enum only defines constants.
            name = f"anon_enum_{self.rel(c).replace('/', '_').replace('.', '_')}_{c.location.line}"
        values, by_name = [], {}
        for v in c.get_children():
            if v.kind != CK.ENUM_CONSTANT_DECL:
                continue
            alias = None
            for sub in v.walk_preorder():
                if sub.kind == CK.DECL_REF_EXPR and sub.referenced is not None \
                        and sub.referenced.kind == CK.ENUM_CONSTANT_DECL and sub.spelling in by_name:
                    toks = [t.spelling for t in v.get_tokens()]
                    if toks[-1] == sub.spelling and len(toks) == 3:
                        alias = sub.spelling
                    break
            value = v.enum_value
            if not _INT_KINDS[c.enum_type.get_canonical().kind][1]:  # unsigned: clang gives ~1 as -2
                value &= (1 << (8 * c.enum_type.get_canonical().get_size())) - 1
            ev = EnumValue(v.spelling, value, alias_of=alias, doc=cf.comment_text(v))
            by_name[v.spelling] = ev
            values.append(ev)
        et = c.enum_type.get_canonical()
        tag = cf.tag_name(c) if cf.tag_name(c) != name else None
        self.ir.enums.append(Enum(name, values, et.get_size(), _INT_KINDS[et.kind][1],
                                  self.rel(c), c.location.line, tag=tag, doc=cf.comment_text(c),
                                  dummy="dummy" in name, scoped=c.is_scoped_enum()))

    def typedef(self, c):
        under = c.underlying_typedef_type
        while under.kind == TK.ELABORATED:
            under = under.get_named_type()
        if under.kind in (TK.RECORD, TK.ENUM):
            usr = under.get_declaration().get_usr()
            if self.names_by_usr.get(usr) == c.spelling or c.spelling in self.typedef_names_by_usr.get(usr, []):
                return  # folded into the record/enum
        if under.kind == TK.TYPEDEF and self._typedef_target(c) is not None:
            target = self._typedef_target(c)
            for r in self.ir.records:
                if r.name == target.name and c.spelling not in r.typedefs:
                    r.typedefs.append(c.spelling)
            return
        t = self.type_ref(under)
        opaque = t.kind == "pointer" and t.pointee.kind == "opaque"
        self.ir.typedefs.append(Typedef(c.spelling, t, self.rel(c), c.location.line,
                                        opaque_handle=opaque, doc=cf.comment_text(c)))

    def function(self, c, seen, all_names):
        name = c.spelling
        if name.startswith("p") and name[1:] in all_names:
            return  # recorded on the base function below
        if c.is_definition() or cf.is_inlined(c):
            self.skip(c, "function", "inline function with a body (device or host helper): not exported by the library")
            return
        if not cf.has_c_linkage(c):
            self.skip(c, "function", "C++ linkage: not exported under a C name")
            return
        if c.type.kind == TK.FUNCTIONPROTO and c.type.is_function_variadic():
            raise Unbindable("variadic function (...): the bindings call through a pointer of fixed "
                             "signature, which cannot pass the variable arguments")
        params = []
        for i, a in enumerate(c.get_arguments()):
            _refuse_unfaithful_by_value(f"parameter {a.spelling or f'arg{i}'}", a.type)
            params.append(Param(a.spelling or f"arg{i}", self.parameter_type(a.type)))
        _refuse_unfaithful_by_value("the result", c.result_type)
        result = self.type_ref(c.result_type)
        for what, t in [("the result", result)] + [(f"parameter {p.name}", p.type) for p in params]:
            if t.kind == "opaque":
                raise Unbindable(f"{what} is {t.name} by value, an incomplete type")
        if result.kind == "function_pointer":
            raise Unbindable(f"returns a function pointer with no typedef name ('{c.result_type.spelling}'), "
                             "which a C declaration of the binding cannot spell")
        fn = Function(name, result, params, self.rel(c), c.location.line,
                      self.hs.library, doc=cf.comment_text(c),
                      profiling_alias=("p" + name) if ("p" + name) in all_names else None)
        if name in seen:
            prev = seen[name]
            if [p.type for p in prev.params] != [p.type for p in params] or prev.result != fn.result:
                raise Unbindable(f"{name} is declared twice with different signatures "
                                 f"({prev.header}:{prev.line})")
            return
        seen[name] = fn
        self.ir.functions.append(fn)


def _refuse_unfaithful_by_value(what: str, t) -> None:
    """A union or an empty struct passed or returned by value has no faithful binding: which
    member of a union the library reads is not in the headers, and an empty struct is 0 bytes
    in C but 1 in C++ (and in the layout the binding mirrors)."""
    canonical = t.get_canonical()
    if canonical.kind != TK.RECORD:
        return
    decl = canonical.get_declaration()
    if decl.kind == CK.UNION_DECL:
        raise Unbindable(f"{what} is the union {t.spelling} by value: which member the library reads is not "
                         "in the headers, so no binding can fill it faithfully")
    if decl.is_definition() and not any(f.kind == CK.FIELD_DECL for f in decl.get_children()):
        raise Unbindable(f"{what} is the empty struct {t.spelling} by value: 0 bytes in C, 1 in C++, so the "
                         "two disagree on the call")


def extract_device_records(host: Extractor, dirs) -> None:
    """Records the headers declare only under __CUDACC__ (ncclCoopAny, the GIN
    completion-action tags, ...), from a CUDA-mode parse, marked device_only."""
    hs = host.hs
    unit = cf.parse_headers(list(hs.headers) + list(hs.device_headers), dirs, include_roots=[hs.include_root],
                            cuda=True, cuda_path=str(cuda_home()))
    dev = Extractor(hs, unit, host.conv, device=True)
    decls = list(dev.own_declarations(unit.cursor))
    dev.collect_names(decls)
    known = {r.name for r in host.ir.records} | {e.name for e in host.ir.enums} | \
        {s.name for s in host.ir.skipped}
    seen_records, seen_enums = set(), set()
    for c in decls:
        if not c.is_definition() or dev.names_by_usr.get(c.get_usr()) in known:
            continue
        try:
            if c.kind == CK.ENUM_DECL:
                dev.enum(c, seen_enums)
            elif c.kind in (CK.STRUCT_DECL, CK.UNION_DECL, CK.CLASS_DECL):
                if c.type.get_num_template_arguments() > 0:
                    dev.skip(c, "record", "device-only: C++ template specialization")
                else:
                    dev.record(c, seen_records)
        except Unbindable as e:
            dev.skip(c, "record", f"device-only: {e}")
    dev.demote_skipped_records(frozenset(r.name for r in host.ir.records))
    extract_device_functions(dev, decls)
    for item in dev.ir.records + dev.ir.enums:
        item.device_only = True
    host.ir.records.extend(dev.ir.records)
    host.ir.enums.extend(dev.ir.enums)
    host.ir.device_functions.extend(dev.ir.device_functions)
    host.ir.device_storage.extend(dev.ir.device_storage)
    host.ir.device_cxx_names = dev.ir.device_cxx_names
    host.ir.device_headers = dev.ir.device_headers
    host.ir.skipped.extend(dataclasses.replace(s, kind=f"{s.kind} (device)") for s in dev.ir.skipped)


def _device_type_ref(dev: Extractor, t) -> TypeRef:
    """A device function's parameter or result type: NCCL's types as everywhere, and a
    type from CUDA or libcu++ (half, __nv_bfloat16, cuda::memory_order) as external, by its
    spelling and clang's size, instead of a reason to drop the function."""
    try:
        return dev.parameter_type(t)
    except Unbindable:
        pass
    if t.kind in (TK.POINTER, TK.LVALUEREFERENCE):
        pointee = t.get_pointee()
        return TypeRef("pointer", pointee=_device_type_ref(dev, pointee), const=pointee.is_const_qualified(),
                       size=8, align=8)
    if t.kind == TK.ELABORATED:
        return _device_type_ref(dev, t.get_named_type())
    name = t.spelling.replace("const ", "").replace("volatile ", "").strip()
    return TypeRef("external", name=name, size=max(t.get_size(), 0), align=max(t.get_align(), 0))


def _default_argument(param) -> str | None:
    """The tokens after `=` in a parameter declaration (`false`, `{}`, `A::x | A::y`), or None."""
    tokens = [t.spelling for t in param.get_tokens()]
    if "=" not in tokens:
        return None
    text = " ".join(tokens[tokens.index("=") + 1:])
    return re.sub(r"\s*::\s*", "::", text).replace("{ }", "{}")


def _storage_members(c) -> list[StorageMember] | None:
    """The members of a record that only holds C++ class-template instances, or None."""
    members = [StorageMember(f.spelling, f.type.spelling) for f in c.get_children() if f.kind == CK.FIELD_DECL]
    if members and all(f.type.get_canonical().get_num_template_arguments() > 0
                       for f in c.get_children() if f.kind == CK.FIELD_DECL):
        return members
    return None


_IR_EXTERN_C = "NCCL_IR_EXTERN_C"
_STATEMENT_END = re.compile(r"[;{}]|^\s*#.*$", re.M)


def _declared_ir_extern_c(c) -> bool:
    """Whether a function declaration is spelled `NCCL_IR_EXTERN_C ...`: the macro expands to
    nothing outside NCCL's bitcode build, so clang's tokens and extent do not show it; the
    header's text between the previous statement and the function's name does."""
    path = c.location.file.name if c.location.file else None
    if not path:
        return False
    with open(path, "rb") as f:
        text = f.read(c.location.offset).decode("utf-8", "replace")
    ends = [m.end() for m in _STATEMENT_END.finditer(text)]
    return _IR_EXTERN_C in text[ends[-1] if ends else 0:]


def _c_abi_kind(c) -> str | None:
    """"library" for a device function of a C ABI that NCCL's device library defines: declared
    `extern "C" __device__` (in this parse, or in NCCL's bitcode build, where NCCL_IR_EXTERN_C is
    extern "C"), device-only and not inline (the headers do not define it); "header_inline" for one declared
    NCCL_IR_EXTERN_C that the headers define (inline C++ under nvcc); None for any other."""
    if c.kind != CK.FUNCTION_DECL:
        return None
    ir_extern_c = _declared_ir_extern_c(c)
    if cf.is_inlined(c):  # the parse skips bodies: an inline declaration is the headers' definition
        return "header_inline" if ir_extern_c else None
    attrs = {a.kind for a in c.get_children()}
    device_only = CK.CUDADEVICE_ATTR in attrs and CK.CUDAHOST_ATTR not in attrs
    return "library" if device_only and (ir_extern_c or cf.has_c_linkage(c)) else None


def extract_device_functions(dev: Extractor, decls) -> None:
    """The C-callable device functions of the device headers: every `extern "C" __device__`
    declaration (nccl_device_wrapper.h's, 2.30-2.32.3, and nccl_device_ir.h's ncclIr*, 2.32.6 on,
    which libnccl_device.ltoir/.bc define), wherever it stands; the functions the other device
    headers declare `NCCL_IR_EXTERN_C NCCL_DEVICE_INLINE` (gin.h, core.h: C names and C types, but
    inline C++ under nvcc; header_inline); the records the C-ABI headers hold only to take them by
    pointer (session storage: DeviceStorage); and the names of the C++ device API (templates,
    classes, functions) that a generated wrapper may call. The headers found to declare a C ABI
    become the IR's device_headers: a release's device interface is what its headers declare."""
    names = set()
    for c in decls:
        if c.kind in (CK.FUNCTION_TEMPLATE, CK.CLASS_TEMPLATE, CK.FUNCTION_DECL, CK.STRUCT_DECL,
                      CK.CLASS_DECL, CK.UNION_DECL, CK.ENUM_DECL, CK.TYPEDEF_DECL, CK.TYPE_ALIAS_DECL):
            if cf.tag_name(c):
                names.add(c.spelling)
    dev.ir.device_cxx_names = sorted(names)
    interface = {dev.rel(c) for c in decls if _c_abi_kind(c) == "library"}
    seen = set()
    for c in decls:
        header_inline = False
        if c.kind == CK.STRUCT_DECL and c.is_definition() and dev.rel(c) in interface:
            members = _storage_members(c)
            if members is not None:
                t = c.type
                dev.ir.device_storage.append(DeviceStorage(c.spelling, t.get_size(), t.get_align(), members,
                                                           dev.rel(c), c.location.line, doc=cf.comment_text(c)))
                dev.ir.skipped = [s for s in dev.ir.skipped if s.name != c.spelling]
            continue
        if c.kind != CK.FUNCTION_DECL or c.is_definition() or c.spelling in seen:
            continue
        kind = _c_abi_kind(c)
        if kind is None:
            continue
        header_inline = kind == "header_inline"
        seen.add(c.spelling)
        params = [DeviceParam(a.spelling or f"arg{i}", _device_type_ref(dev, a.type), a.type.spelling,
                              reference=a.type.kind == TK.LVALUEREFERENCE, default=_default_argument(a))
                  for i, a in enumerate(c.get_arguments())]
        dev.ir.device_functions.append(DeviceFunction(
            c.spelling, _device_type_ref(dev, c.result_type), c.result_type.spelling, params, dev.rel(c),
            c.location.line, doc=cf.comment_text(c), header_inline=header_inline))
    dev.ir.device_headers = sorted(interface)


def extract_header_set(hs: HeaderSet, all_sets: dict[str, HeaderSet], conv: Conventions) -> HeaderSetIR:
    """The header facts of one set, then the binding policy of conventions.toml."""
    from .policy import apply_conventions
    ir = extract_header_facts(hs, all_sets, conv)
    apply_conventions(ir, conv)
    return ir


def extract_header_facts(hs: HeaderSet, all_sets: dict[str, HeaderSet], conv: Conventions) -> HeaderSetIR:
    """What clang says about one set; of conventions.toml it reads only the header
    facts (Conventions.header_facts), so that the pipeline can cache the result."""
    dirs = include_dirs_for(hs, all_sets)
    try:
        unit = cf.parse_headers(list(hs.headers), dirs, include_roots=[hs.include_root])
        ex = Extractor(hs, unit, conv)
        ir = ex.run()
        if hs.device_headers is not None:
            extract_device_records(ex, dirs)
        macros.extract_macros(ex, dirs)
    except cf.ParseError as e:
        raise cf.ParseError(f"header set {hs.name}: {e}") from None
    for coll in (ir.functions, ir.records, ir.enums, ir.typedefs, ir.constants, ir.initializers,
                 ir.device_functions, ir.device_storage):
        coll.sort(key=lambda item: item.name)
    ir.skipped.sort(key=lambda s: (s.location, s.name))
    return ir
