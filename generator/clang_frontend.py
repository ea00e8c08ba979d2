"""The one place that talks to libclang.

Everything else in the generator sees translation units, cursors and the few
helpers below (evaluate, macro tests, relative locations); no other module
imports clang.cindex.
"""
from __future__ import annotations

import ctypes
import importlib
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

# Debian's python3-clang-19 is pure Python (ctypes over libclang-19.so): any Python 3 can use it.
DEBIAN_DIST_PACKAGES = "/usr/lib/python3/dist-packages"
LIBCLANG_ADVICE = ("on Debian 12 `bash tools/setup.sh` installs them (python3-clang-19, libclang1-19) for "
                   "/usr/bin/python3 and any other Python; or, for this Python alone, "
                   "`{python} -m pip install libclang==18.1.1` (the bindings with their own libclang)")


def _import_cindex():
    """clang.cindex from this Python's packages (e.g. PyPI's `libclang`), else Debian's
    python3-clang-19; otherwise an ImportError that says what to install."""
    try:
        return importlib.import_module("clang.cindex")
    except ImportError:
        pass
    if os.path.isfile(os.path.join(DEBIAN_DIST_PACKAGES, "clang", "cindex.py")):
        sys.path.append(DEBIAN_DIST_PACKAGES)
        try:
            return importlib.import_module("clang.cindex")
        except ImportError:
            pass
        finally:  # only clang comes from there: Debian's compiled modules are for its own Python
            sys.path.remove(DEBIAN_DIST_PACKAGES)
    raise ModuleNotFoundError(f"python -m generator needs libclang's Python bindings (clang.cindex), which "
                              f"{sys.executable} cannot import: {LIBCLANG_ADVICE.format(python=sys.executable)}",
                              name="clang")


ci = _import_cindex()

CursorKind = ci.CursorKind
TypeKind = ci.TypeKind
Cursor = ci.Cursor
Type = ci.Type


def _unknown_type_kind(cls, value):
    # A type kind newer than these bindings (libclang 19 reports _Float16 as 32, which
    # python3-clang-19 lacks): UNEXPOSED, which the extractor reports by the type's spelling,
    # instead of a ValueError naming no declaration.
    return cls.UNEXPOSED


TypeKind._missing_ = classmethod(_unknown_type_kind)


def type_kind_number(t: Type) -> int:
    """clang's own number for the kind of t (also for kinds these bindings do not name)."""
    return t._kind_id

# CUDA qualifiers mean nothing to a host-side parse; clang without CUDA mode
# would reject them.
CUDA_QUALIFIERS = ["-D__host__=", "-D__device__=", "-D__global__=",
                   "-D__forceinline__=inline", "-D__shared__=", "-D__constant__="]

CUDA_SHIMS = Path(os.path.abspath(__file__)).parent / "cuda_shims"

_EVAL_UNEXPOSED, _EVAL_INT, _EVAL_FLOAT, _EVAL_OBJC, _EVAL_STR = 0, 1, 2, 3, 4


def _register_eval_api():
    lib = ci.conf.lib
    lib.clang_Cursor_Evaluate.argtypes = [ci.Cursor]
    lib.clang_Cursor_Evaluate.restype = ctypes.c_void_p
    lib.clang_EvalResult_getKind.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getKind.restype = ctypes.c_int
    lib.clang_EvalResult_isUnsignedInt.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_isUnsignedInt.restype = ctypes.c_uint
    lib.clang_EvalResult_getAsLongLong.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getAsLongLong.restype = ctypes.c_longlong
    lib.clang_EvalResult_getAsUnsigned.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getAsUnsigned.restype = ctypes.c_ulonglong
    lib.clang_EvalResult_getAsDouble.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getAsDouble.restype = ctypes.c_double
    lib.clang_EvalResult_getAsStr.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getAsStr.restype = ctypes.c_char_p
    lib.clang_EvalResult_dispose.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_dispose.restype = None
    lib.clang_Cursor_isMacroFunctionLike.argtypes = [ci.Cursor]
    lib.clang_Cursor_isMacroFunctionLike.restype = ctypes.c_uint
    lib.clang_Cursor_isAnonymousRecordDecl.argtypes = [ci.Cursor]
    lib.clang_Cursor_isAnonymousRecordDecl.restype = ctypes.c_uint
    lib.clang_Cursor_isFunctionInlined.argtypes = [ci.Cursor]
    lib.clang_Cursor_isFunctionInlined.restype = ctypes.c_uint


try:
    _register_eval_api()
except ci.LibclangError as e:  # the bindings are there, the shared library is not
    raise ModuleNotFoundError(f"python -m generator cannot load libclang ({e}): "
                              f"{LIBCLANG_ADVICE.format(python=sys.executable)}", name="clang") from None


class ParseError(Exception):
    """A header that does not parse: carries clang's diagnostics."""


@dataclass
class ParsedUnit:
    tu: ci.TranslationUnit
    include_roots: list[Path]
    language: str = "c++"  # what clang parsed the unit as: "c++", "c" or "cuda"
    _relative: dict = field(default_factory=dict)  # file name -> relative path

    @property
    def cursor(self) -> Cursor:
        return self.tu.cursor

    def relative_path(self, cursor: Cursor) -> str | None:
        """The cursor's file relative to the first include root that holds it."""
        loc = cursor.location
        if loc.file is None:
            return None
        name = loc.file.name
        if name not in self._relative:  # thousands of cursors share a few hundred files
            self._relative[name] = self._relative_to_roots(name)
        return self._relative[name]

    def _relative_to_roots(self, name: str) -> str | None:
        # Both spellings: under Bazel the include root is a folder of symlinks.
        paths = (Path(os.path.abspath(name)), Path(name).resolve())
        for root in self.include_roots:
            for path in paths:
                try:
                    return path.relative_to(root).as_posix()
                except ValueError:
                    continue
        return None

    def location(self, cursor: Cursor) -> str:
        rel = self.relative_path(cursor) or (cursor.location.file.name if cursor.location.file else "?")
        return f"{rel}:{cursor.location.line}"


def parse_headers(headers: list[str], include_dirs: list[Path], extra_source: str = "",
                  defines: list[str] | None = None, include_roots: list[Path] | None = None,
                  probe_errors: dict | None = None, cuda: bool = False,
                  cuda_path: str = "/usr/local/cuda", language: str | None = None) -> ParsedUnit:
    """Parse `#include <h>` for each header (plus extra_source) as one unit: C++ (or CUDA), or C
    where the headers are C only (language None: C++ first, then C; "c++" or "c": that one).

    Raises ParseError with clang's diagnostics on any error in the headers.
    Errors inside extra_source (probes) go into probe_errors {line: message}
    when that dict is given.
    """
    if cuda:
        return _parse(headers, include_dirs, extra_source, defines, include_roots, probe_errors, "cuda", cuda_path)
    # C++ first even for the C headers (nccl.h, nccl_ep.h), on purpose: the bindings describe the
    # library as NVIDIA built it, and a header's C view can lack what the library has. Parsed as C
    # (tried: -x c -std=c2x, every default set, 2026-12), the IR of 2.24.3 to 2.27.7 is the same;
    # 2.19.3 to 2.23.4 lose ncclBfloat16 (and ncclNumTypes drops to 9): their enum has it only
    # where __CUDA_BF16_TYPES_EXIST__ is defined, which cuda_bf16.h does for C++ only, though the
    # library takes the type (value 9). A header that is C only (_Bool, restrict, a field named
    # class) is parsed as C: C23, where `f()` is a prototype, as in C++ (NCCL's ncclGroupStart()).
    if language is not None:
        return _parse(headers, include_dirs, extra_source, defines, include_roots, probe_errors, language, cuda_path)
    try:
        return _parse(headers, include_dirs, extra_source, defines, include_roots, probe_errors, "c++", cuda_path)
    except ParseError as as_cxx:
        try:
            return _parse(headers, include_dirs, extra_source, defines, include_roots, probe_errors, "c", cuda_path)
        except ParseError:
            raise as_cxx from None  # C++'s errors: the headers are neither


_LANGUAGE_ARGS = {
    # The device-side view: what the headers declare under __CUDACC__, parsed as CUDA host code
    # (no GPU code is generated or needed).
    "cuda": ["-x", "cuda", "--cuda-host-only", "-std=c++17", "-nocudalib", "-Wno-unknown-cuda-version",
             f"-I{CUDA_SHIMS}"],
    "c++": ["-x", "c++", "-std=c++17", *CUDA_QUALIFIERS],
    "c": ["-x", "c", "-std=c2x", *CUDA_QUALIFIERS],
}
_UNIT_NAME = {"cuda": "ncclbind_probe.cu", "c++": "ncclbind_probe.cpp", "c": "ncclbind_probe.c"}


def _parse(headers, include_dirs, extra_source, defines, include_roots, probe_errors, language: str,
           cuda_path: str) -> ParsedUnit:
    src = "".join(f"#include <{h}>\n" for h in headers) + extra_source
    args = [*_LANGUAGE_ARGS[language], "-fparse-all-comments", "-fretain-comments-from-system-headers"]
    if language == "cuda":
        args += [f"--cuda-path={cuda_path}", f"-I{Path(cuda_path) / 'include' / 'cccl'}"]
        # clang's CUDA wrapper header leaves __CUDACC__ defined empty; NCCL 2.28 tests it
        # with #if, which needs nvcc's value, 1. The wrapper is included before this source.
        src = "#undef __CUDACC__\n#define __CUDACC__ 1\n" + src
    args += [f"-D{d}" for d in (defines or [])]
    args += [f"-I{d}" for d in include_dirs]
    index = ci.Index.create()
    name = _UNIT_NAME[language]
    tu = index.parse(name, args=args, unsaved_files=[(name, src)],
                     options=ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD
                     | ci.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES)
    errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
    if probe_errors is not None:
        first_probe_line = len(headers) + 1
        in_probe = [d for d in errors if d.location.file and d.location.file.name == name
                    and d.location.line >= first_probe_line]
        for d in in_probe:
            probe_errors.setdefault(d.location.line - first_probe_line, d.spelling)
        errors = [d for d in errors if d not in in_probe]
    if errors:
        text = "\n".join(d.format() for d in errors)  # clang's own: file:line:column: error: ...
        raise ParseError(f"clang could not parse {', '.join(headers)}:\n{text}")
    roots = []
    for r in include_roots or include_dirs:
        roots += [Path(os.path.abspath(r)), Path(r).resolve()]
    return ParsedUnit(tu, roots, language)


def evaluate(cursor: Cursor):
    """Ask clang for the constant value of an expression or variable.

    Returns int, float, str, or None when clang cannot fold it.
    """
    lib = ci.conf.lib
    res = lib.clang_Cursor_Evaluate(cursor)
    if not res:
        return None
    try:
        kind = lib.clang_EvalResult_getKind(res)
        if kind == _EVAL_INT:
            if lib.clang_EvalResult_isUnsignedInt(res):
                return int(lib.clang_EvalResult_getAsUnsigned(res))
            return int(lib.clang_EvalResult_getAsLongLong(res))
        if kind == _EVAL_FLOAT:
            return float(lib.clang_EvalResult_getAsDouble(res))
        if kind == _EVAL_STR:
            raw = lib.clang_EvalResult_getAsStr(res)
            return raw.decode() if raw is not None else None
        return None
    finally:
        lib.clang_EvalResult_dispose(res)


def is_function_like_macro(cursor: Cursor) -> bool:
    return bool(ci.conf.lib.clang_Cursor_isMacroFunctionLike(cursor))


def is_inlined(cursor: Cursor) -> bool:
    return bool(ci.conf.lib.clang_Cursor_isFunctionInlined(cursor))


def tag_name(cursor: Cursor) -> str | None:
    """A struct/union/enum's tag, or None when it has none (clang spells those
    "(unnamed struct at file:line)" or "(anonymous union at ...)")."""
    s = cursor.spelling
    return s if s and not s.startswith("(") and " at " not in s else None


def is_anonymous_member(cursor: Cursor) -> bool:
    """`union { ... };` inside a record: an anonymous struct/union member. libclang
    does not visit the implicit field that holds it, only this declaration."""
    return bool(ci.conf.lib.clang_Cursor_isAnonymousRecordDecl(cursor))


def has_c_linkage(cursor: Cursor) -> bool:
    """A function declared extern "C": its mangled name is its plain name."""
    return cursor.mangled_name in (cursor.spelling, "_" + cursor.spelling)


def aligned_attribute_value(attr: Cursor) -> int | None:
    """N of alignas(N) / __attribute__((aligned(N))): libclang exposes neither the
    expression nor the tokens of the argument, so read it at the attribute's location."""
    loc = attr.location
    if loc.file is None:
        return None
    line = Path(loc.file.name).read_text().splitlines()[loc.line - 1][loc.column - 1:]
    m = re.match(r"(?:alignas|aligned|__aligned__)\s*\(\s*(\d+)\s*\)", line)
    return int(m.group(1)) if m else None


def macro_tokens(cursor: Cursor) -> list[str]:
    return [t.spelling for t in cursor.get_tokens()]


def comment_text(cursor: Cursor) -> str | None:
    """The comment clang attached to a declaration, markers stripped."""
    raw = cursor.raw_comment
    if not raw:
        return None
    lines = []
    for line in raw.splitlines():
        s = line.strip()
        for marker in ("/**", "/*!", "/*", "*/", "///", "//!", "//"):
            if s.startswith(marker):
                s = s[len(marker):]
        if s.endswith("*/"):
            s = s[:-2]
        s = s.strip()
        if s.startswith("* ") or s == "*":
            s = s[1:].strip()
        lines.append(s)
    text = "\n".join(lines).strip()
    return text or None
