"""Object-like macros -> constants; initializer macros -> initializer data.

clang evaluates every value. Each macro becomes one probe line in a second
parse of the same headers (`static const auto p = (MACRO);`) and clang folds
it; a macro whose value is a record (a compound literal such as NCCL EP's
NCCL_EP_GROUP_CONFIG_INIT) or whose name ends in _INITIALIZER (a brace list
such as NCCL_CONFIG_INITIALIZER) is an initializer, and a third parse asks
clang for each of its fields (`((T) MACRO).field`). What clang cannot fold is
reported with clang's own message.
"""
from __future__ import annotations

import math

from .. import clang_frontend as cf
from ..header_sets import is_nccl_header
from ..ir import Constant, Initializer, InitializerField, TypeRef

CK, TK = cf.CursorKind, cf.TypeKind
_PROBE = "__ncclbind_probe_"
_NULL_BODIES = (["NULL"], ["nullptr"], ["(", "(", "void", "*", ")", "0", ")"])


def initializer_record(name: str, conv, record_names: set[str]) -> str | None:
    if name in conv.initializers:
        return conv.initializers[name]
    # NCCL_SIM_INFO_INITIALIZER -> ncclSimInfo_t
    words = name[: -len("_INITIALIZER")].split("_")
    camel = words[0].lower() + "".join(w.capitalize() for w in words[1:])
    for cand in (camel + "_t", camel):
        if cand in record_names:
            return cand
    # NCCL_COLLCONFIG_INITIALIZER -> ncclCollConfig_t: the macro does not mark the word break
    squashed = "".join(words).lower()
    matches = [r for r in record_names if r.lower() in (squashed + "_t", squashed)]
    return matches[0] if len(matches) == 1 else None


def _probe_parse(ex, include_dirs, lines: list[str], errors: dict):
    unit = cf.parse_headers(list(ex.hs.headers), include_dirs, extra_source="\n".join(lines) + "\n",
                            include_roots=[ex.hs.include_root], probe_errors=errors, language=ex.unit.language)
    return {int(c.spelling[len(_PROBE):]): c for c in unit.cursor.get_children()
            if c.kind == CK.VAR_DECL and c.spelling.startswith(_PROBE)}


def _string_constant(body):
    return body[0][1:-1].encode().decode("unicode_escape")


_CHAR_PTR = TypeRef("pointer", pointee=TypeRef("int", name="char", signed=True, size=1, align=1),
                    const=True, size=8, align=8)
_VOID_PTR = TypeRef("pointer", pointee=TypeRef("void"), size=8, align=8)


def extract_macros(ex, include_dirs) -> None:
    """ex: the Extractor that produced ex.ir (records must already be there)."""
    ir, conv, unit = ex.ir, ex.conv, ex.unit
    records = {r.name: r for r in ir.records}
    records.update({t: r for r in ir.records for t in r.typedefs})
    candidates = []  # (cursor, body tokens, probe line)
    for c in unit.cursor.get_children():
        if c.kind != CK.MACRO_DEFINITION or not is_nccl_header(ex.rel(c)):
            continue
        body = cf.macro_tokens(c)[1:]
        if cf.is_function_like_macro(c):
            ex.skip(c, "macro", "function-like macro: no value to bind")
        elif not body:
            ex.skip(c, "macro", "empty macro (include guard or feature flag)")
        elif c.spelling.endswith("_INITIALIZER"):
            rec = initializer_record(c.spelling, conv, set(records))
            if rec is None:
                ex.skip(c, "initializer", "no record matches this initializer "
                        "(add it to conventions.toml [initializers])")
            else:
                candidates.append((c, body, f"static {rec} {{p}} = {c.spelling};"))
        else:
            candidates.append((c, body, f"static const auto {{p}} = ({c.spelling});"))

    errors: dict[int, str] = {}
    probes = _probe_parse(ex, include_dirs, [line.format(p=f"{_PROBE}{i}")
                                             for i, (_, _, line) in enumerate(candidates)], errors)
    inits = []  # (cursor, record, access expression)
    for i, (c, body, _) in enumerate(candidates):
        var, expr = probes.get(i), " ".join(body)
        if i in errors or var is None:
            ex.skip(c, "macro", f"not a value clang can fold: {errors.get(i, 'no declaration')}")
            continue
        canon = var.type.get_canonical()
        if canon.kind == TK.RECORD:
            rec_name = ex.names_by_usr.get(canon.get_declaration().get_usr())
            if rec_name not in records:
                ex.skip(c, "initializer", f"initializes {canon.spelling}, which is not a bound record")
                continue
            access = f"(({rec_name}) {c.spelling})" if c.spelling.endswith("_INITIALIZER") \
                else f"({c.spelling})"
            inits.append((c, records[rec_name], access))
            continue
        if body in _NULL_BODIES or (len(body) > 1 and body[-1] == "NULL"):
            value, t = None, _VOID_PTR
        elif len(body) == 1 and body[0].startswith('"'):
            value, t = _string_constant(body), _CHAR_PTR
        else:
            value = cf.evaluate(var)
            if value is None:
                ex.skip(c, "macro", f"clang could not fold '{expr}' to a constant")
                continue
            if isinstance(value, float) and not math.isfinite(value):
                ex.skip(c, "macro", f"'{expr}' is {value}, which C, Python and Rust have no literal for")
                continue
            t = ex.type_ref(var.type)
        ir.constants.append(Constant(c.spelling, value, t, ex.rel(c), c.location.line,
                                     expression=expr, doc=cf.comment_text(c)))
    if inits:
        _initializers(ex, include_dirs, inits)


def _initializers(ex, include_dirs, inits) -> None:
    lines, index = [], []
    for n, (c, rec, access) in enumerate(inits):
        for f in rec.fields:
            if f.type.kind in ("array", "record") or f.anonymous:
                continue  # aggregates are zero unless set; checked by the layout test's init check
            index.append((n, f, False))
            lines.append(f"static const auto {{p}} = {access}.{f.name};")
            if f.type.kind not in ("int", "float", "bool", "enum"):
                index.append((n, f, True))  # a pointer-like field: is it null?
                lines.append(f"static const bool {{p}} = ({access}.{f.name}) == 0;")
    errors: dict[int, str] = {}
    probes = _probe_parse(ex, include_dirs, [line.format(p=f"{_PROBE}{i}") for i, line in enumerate(lines)],
                          errors)
    values: dict[int, list] = {n: [] for n in range(len(inits))}
    failed: dict[int, str] = {}
    folded = {}
    for i, (n, f, null_probe) in enumerate(index):
        var = probes.get(i)
        v = cf.evaluate(var) if var is not None and i not in errors else None
        if not null_probe:
            folded[(n, f.name)] = v
            continue
        if folded.get((n, f.name)) is None:
            if v == 1:
                folded[(n, f.name)] = "null"
            else:
                failed.setdefault(n, f"field {f.name}: not a constant clang can fold, nor null")
    for (n, name), v in folded.items():
        if v is None:
            failed.setdefault(n, f"field {name}: clang could not fold it")
        elif n not in failed:
            values[n].append(InitializerField(name, None if v == "null" else v))
    for n, (c, rec, _) in enumerate(inits):
        if n in failed:
            ex.skip(c, "initializer", failed[n])
            continue
        ex.ir.initializers.append(Initializer(c.spelling, rec.name, values[n], ex.rel(c),
                                              c.location.line, doc=cf.comment_text(c)))
