"""Names and ownership from conventions.toml: snake_case names for Python and
Rust, and the function that releases each handle type."""
from __future__ import annotations

import keyword
import re

from ..ir import HeaderSetIR, SkippedItem

_PREFIXES = ("ncclEp", "nccl")

# Words a parameter name cannot be in some target language. Such a parameter is renamed with a
# trailing underscore in every language (fn -> fn_), so that C, Python and Rust agree.
RESERVED = {
    "Python": frozenset(keyword.kwlist),  # None, True, False, lambda, in, ...
    "Rust": frozenset("""as async await break const continue crate dyn else enum extern false fn for if impl
        in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe
        use where while abstract become box do final macro override priv try typeof unsized virtual
        yield""".split()),
    "C": frozenset("""auto break case char const continue default do double else enum extern float for goto
        if inline int long register restrict return short signed sizeof static struct switch typedef union
        unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn
        _Static_assert _Thread_local alignas alignof bool constexpr false nullptr static_assert
        thread_local true typeof typeof_unqual""".split()),
    "C++": frozenset("""and and_eq asm bitand bitor catch char8_t char16_t char32_t class co_await co_return
        co_yield compl concept const_cast consteval constinit decltype delete dynamic_cast explicit export
        friend mutable namespace new noexcept not not_eq operator or or_eq private protected public
        reinterpret_cast requires static_cast template this throw try typeid typename using virtual
        wchar_t xor xor_eq""".split()),
}


def snake_case(name: str, rename: dict) -> str:
    if name in rename:
        return rename[name]
    for prefix in _PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix) and name[len(prefix)].isupper():
            name = name[len(prefix):]
            break
    # LsaBarrier -> lsa_barrier; LLA2ACalcSlots -> lla2a_calc_slots; GetCftDeviceLeInfo -> get_cft_device_le_info
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def reserved_in(name: str) -> list[str]:
    return [language for language, words in RESERVED.items() if name in words]


def python_name(name: str) -> str:
    """A record field's attribute in Python: its C name, or with a trailing _ where Python
    reserves the name (C keeps it; Rust spells keywords as raw identifiers, self as self_)."""
    return name + "_" if name in RESERVED["Python"] else name


def note_python_field_names(ir: HeaderSetIR) -> None:
    for r in ir.records:
        for f in r.fields:
            if f.name and python_name(f.name) != f.name:
                ir.renamed.append(SkippedItem(f"{r.name}.{f.name}", "field", f"{r.header}:{r.line}",
                                              f"Python attribute {python_name(f.name)}: {f.name!r} is reserved in "
                                              "Python"))


def rename_reserved_parameters(ir: HeaderSetIR) -> None:
    for fn in ir.functions:
        taken, renamed = {p.name for p in fn.params}, {}
        for p in fn.params:
            languages = reserved_in(p.name)
            if not languages:
                continue
            new = p.name + "_"
            while new in taken or reserved_in(new):
                new += "_"
            ir.renamed.append(SkippedItem(f"{fn.name}.{p.name}", "parameter", f"{fn.header}:{fn.line}",
                                          f"renamed {new}: {p.name!r} is reserved in {' and '.join(languages)}"))
            taken.add(new)
            renamed[p.name], p.name = new, new
        for p in fn.params:  # an array's count named by another parameter (directions)
            p.length_param = renamed.get(p.length_param, p.length_param)


def apply(ir: HeaderSetIR, conv) -> None:
    rename_reserved_parameters(ir)
    if not any(r.kind == "field" for r in ir.renamed):  # applied once per IR
        note_python_field_names(ir)
    for fn in ir.functions:
        fn.snake_name = snake_case(fn.name, conv.rename)
    for td in ir.typedefs:
        td.destructor = conv.ownership.get(td.name)
    names = [fn.snake_name for fn in ir.functions]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"{ir.name}: functions collide in snake_case: {sorted(dupes)} "
                         "(add a [rename] entry to conventions.toml)")
