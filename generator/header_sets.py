"""The generator's inputs: header_sets.toml resolved to paths on this machine."""
from __future__ import annotations

import difflib
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

# Not resolve(): under Bazel the sources are symlinks and REPO must stay in runfiles.
REPO = Path(os.path.abspath(__file__)).parent.parent
CACHE = Path(os.environ.get("NCCLBIND_CACHE", REPO / ".cache"))
# A folder holding <set name>/include and <set name>/lib for every set (Bazel's
# @ncclbind_inputs//:sets); overrides CUDA_HOME and .cache when set.
HEADER_ROOT = os.environ.get("NCCLBIND_HEADER_ROOT")


def cuda_home() -> Path:
    return Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))


@dataclass(frozen=True)
class HeaderSet:
    name: str
    library: str
    version: str
    headers: tuple[str, ...]
    include_root: Path
    lib_dir: Path
    soname: str
    depends_on: str | None
    default: bool
    source: str   # how it was obtained: "cuda_toolkit", the wheel pin, or "directory <path>"
    # None: no device-side parse. Otherwise extra headers for it (beyond `headers`).
    device_headers: tuple[str, ...] | None = None
    # The NCCL set whose device headers the library was compiled with (NCCL EP compiles its
    # kernels again at run time against $NCCL_HOME/include, which must hold that version).
    kernel_headers: str | None = None

    @property
    def version_code(self) -> int:
        major, minor, patch = (int(x) for x in self.version.split("."))
        if self.library == "nccl" and major <= 2 and minor <= 8:
            return major * 1000 + minor * 100 + patch
        return major * 10000 + minor * 100 + patch


def directory_path(hs: dict) -> Path:
    """The folder of a `source = "directory"` set: `path` with $VARIABLES expanded,
    relative to the repository root."""
    expanded = os.path.expandvars(hs["path"])
    if "$" in expanded or not expanded:
        raise SystemExit(f"header set {hs['name']}: path {hs['path']!r} names an unset variable")
    return REPO / expanded


def describe_source(hs: dict) -> str:
    if hs["source"] == "wheel":
        return hs["wheel"]
    if hs["source"] == "directory":
        return f"directory {directory_path(hs)}"
    return hs["source"]


class HeaderSetsError(SystemExit):
    """header_sets.toml does not follow the schema below: the message names the file, the set
    and the line. A SystemExit, so that a script reading the sets stops with it, untraced."""


# The schema of one [[header_set]]: key -> (type, when it is required). "always": every set;
# a source kind: only sets of that source (and an error in any other); None: optional.
SCHEMA = {
    "name": (str, "always"),
    "library": (str, "always"),
    "version": (str, "always"),
    "source": (str, "always"),
    "headers": (list, None),
    "soname": (str, "always"),
    "default": (bool, None),
    "depends_on": (str, None),
    "kernel_headers": (str, None),
    "device_headers": (list, None),
    "wheel": (str, "wheel"),
    "wheel_include": (str, "wheel"),
    "wheel_lib": (str, "wheel"),
    "path": (str, "directory"),
}
SOURCES = ("cuda_toolkit", "wheel", "directory")
LIBRARIES = ("nccl", "nccl_ep")  # what a set's library may be: the libraries the generator renders
TYPE_NAMES = {str: "a string", list: "a list of strings", bool: "true or false"}
_TABLE_LINE = re.compile(r"^\s*(\[\[?)\s*([^\]]*?)\s*\]\]?")


class _Lines:
    """Where things are in the TOML text (tomllib gives no line numbers): the line of each
    table header, and of a key inside the n-th [[header_set]] table."""

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.tables = []  # (line number, header text, first body line, last body line)
        for i, line in enumerate(self.lines):
            m = _TABLE_LINE.match(line)
            if m:
                self.tables.append([i + 1, m.group(1) + m.group(2), i + 2, None])
        for this, following in zip(self.tables, self.tables[1:] + [[len(self.lines) + 1]]):
            this[3] = following[0] - 1

    def table(self, header: str, index: int = 0) -> int | None:
        spelled = [(t, t[1].replace(" ", "")) for t in self.tables]
        found = [t for t, h in spelled if h == header or h.startswith(header + ".")]
        return found[index][0] if index < len(found) else None

    def key(self, key: str, set_index: int | None) -> int | None:
        if set_index is None:  # a top-level key: before the first table
            first, last = 1, (self.tables[0][0] - 1 if self.tables else len(self.lines))
        else:
            found = [t for t in self.tables if t[1].replace(" ", "") == "[[header_set"]
            if set_index >= len(found):
                return None
            first, last = found[set_index][2], found[set_index][3]
        pattern = re.compile(rf"^\s*(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')\s*[=.]")
        for n in range(first, last + 1):
            if pattern.match(self.lines[n - 1]):
                return n
        return None


def _suggestion(word: str, choices) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def read_header_set_tables(path: Path | None = None) -> list[dict]:
    """The [[header_set]] tables of header_sets.toml, checked against SCHEMA: a TOML error,
    a table other than [[header_set]], an unknown, missing or misplaced key, a value of the
    wrong type, an unknown source or dependency, kernel_headers naming no NCCL set, a repeated
    name: HeaderSetsError naming
    the file, the set and the line."""
    path = Path(path or REPO / "generator" / "header_sets.toml")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise HeaderSetsError(f"{path}: cannot be read: {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise HeaderSetsError(f"{path}:{line}: not UTF-8 text (byte {data[e.start]:#04x}); TOML is UTF-8") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise HeaderSetsError(f"{path}: not valid TOML: {e}") from None
    lines = _Lines(text)

    def fail(line: int | None, where: str, message: str):
        raise HeaderSetsError(f"{path}:{line or '?'}: {where}{message}")

    for key, value in raw.items():
        if key == "header_set":
            continue
        if isinstance(value, dict):
            what, line = f"table [{key}]", lines.table(f"[{key}")
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            what, line = f"table [[{key}]]", lines.table(f"[[{key}")
        else:
            what, line = f"key {key!r}", lines.key(key, None)
        fail(line, "", f"unknown {what}{_suggestion(key, ['header_set'])}: the file holds [[header_set]] tables only")
    sets = raw.get("header_set")
    if not isinstance(sets, list) or not sets:
        fail(lines.table("[header_set") if sets is not None else None, "",
             "no [[header_set]] table (an array of tables: [[header_set]], twice bracketed)")
    names = {}
    versions = {}  # (library, version) -> (the set's name, its version line)
    for i, hs in enumerate(sets):
        start = lines.table("[[header_set", i)
        label = f"header set {hs.get('name')!r}: " if isinstance(hs.get("name"), str) else f"header set #{i + 1}: "
        for key, value in hs.items():
            if key not in SCHEMA:
                line = lines.key(key, i) or lines.table(f"[header_set.{key}")  # or a sub-table
                fail(line, label, f"unknown key {key!r}{_suggestion(key, SCHEMA)}")
            kind = SCHEMA[key][0]
            ok = isinstance(value, kind) and (kind is not list or all(isinstance(v, str) for v in value))
            if not ok or (kind is str and not value):
                fail(lines.key(key, i), label, f"{key} must be {'a non-empty string' if kind is str else TYPE_NAMES[kind]}, "
                     f"not {value!r}")
        missing = [k for k, (_, need) in SCHEMA.items() if need == "always" and k not in hs]
        if missing:
            fail(start, label, f"missing key{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}")
        source = hs["source"]
        if source not in SOURCES:
            fail(lines.key("source", i), label, f"unknown source {source!r}{_suggestion(source, SOURCES)} "
                 f"(one of {', '.join(SOURCES)})")
        for key, (_, need) in SCHEMA.items():
            if need == source and key not in hs:
                fail(start, label, f"missing key {key!r} (a source = {source!r} set needs it)")
            if need in SOURCES and need != source and key in hs:
                fail(lines.key(key, i), label, f"key {key!r} is for source = {need!r} sets, this one's is {source!r}")
        if hs["library"] not in LIBRARIES:
            fail(lines.key("library", i), label, f"unknown library {hs['library']!r}"
                 f"{_suggestion(hs['library'], LIBRARIES)} (one of {', '.join(LIBRARIES)})")
        if not re.fullmatch(r"\d+\.\d+\.\d+", hs["version"]):
            fail(lines.key("version", i), label, f"version {hs['version']!r} is not MAJOR.MINOR.PATCH")
        if "headers" in hs and not hs["headers"]:
            fail(lines.key("headers", i), label, "headers is empty (leave the key out to take every header of "
                 "the library the set's include/ holds)")
        if hs["name"] in names:
            fail(lines.key("name", i), label, f"a second set named {hs['name']!r} (the first is at line {names[hs['name']]})")
        names[hs["name"]] = lines.key("name", i)
        release = (hs["library"], hs["version"])
        if release in versions:
            fail(lines.key("version", i), label, f"a second set of {hs['library']} {hs['version']} "
                 f"(the first is {versions[release][0]!r}, at line {versions[release][1]})")
        versions[release] = (hs["name"], lines.key("version", i))
    libraries = {hs["name"]: hs["library"] for hs in sets}
    nccl_sets = [name for name, library in libraries.items() if library == "nccl"]
    for i, hs in enumerate(sets):
        dep = hs.get("depends_on")
        if dep is not None and dep not in names:
            fail(lines.key("depends_on", i), f"header set {hs['name']!r}: ",
                 f"depends_on {dep!r} is not a header set here{_suggestion(dep, names)}")
        chain, at = [hs["name"]], dep
        while at is not None:  # every set's dependencies end (the loaded order needs a bottom)
            if at in chain:
                fail(lines.key("depends_on", i), f"header set {hs['name']!r}: ",
                     f"depends_on goes round: {' -> '.join(chain + [at])}")
            chain.append(at)
            at = next(s.get("depends_on") for s in sets if s["name"] == at)
        kernel = hs.get("kernel_headers")
        if kernel is not None and kernel not in names:
            fail(lines.key("kernel_headers", i), f"header set {hs['name']!r}: ",
                 f"kernel_headers {kernel!r} is not a header set here{_suggestion(kernel, nccl_sets)}")
        if kernel is not None and libraries[kernel] != "nccl":
            fail(lines.key("kernel_headers", i), f"header set {hs['name']!r}: ",
                 f"kernel_headers {kernel!r} is a set of library {libraries[kernel]!r}; it must name an NCCL "
                 f"header set (library \"nccl\")")
    return sets


# The headers of each library, as a set without a `headers` line takes them from its include/:
# (header, whether every release has it). A set has a device API when it holds nccl_device.h
# (NCCL 2.28 on); it is then parsed a second time as CUDA, with every other header of the
# library's own family in its include/ (DEVICE_HEADER_FAMILY, top level only): which of them
# declare a C ABI of device functions (nccl_device_wrapper.h in 2.30-2.32.3, nccl_device_ir.h
# from 2.32.6, whatever comes next) the extractor reads from what they declare (extern "C"
# __device__ functions), not from their names.
LIBRARY_HEADERS = {
    "nccl": (("nccl.h", True), ("nccl_device.h", False)),
    "nccl_ep": (("nccl_ep.h", True),),
}
DEVICE_API_HEADER = {"nccl": "nccl_device.h"}
DEVICE_HEADER_FAMILY = {"nccl": "nccl*.h"}


def is_nccl_header(rel: str | None) -> bool:
    """Whether a declaration's header (its path relative to the include root that holds it, or
    None) is the library's own: nccl*.h or a file under an nccl* folder. The extraction passes
    (passes/extract.py, passes/macros.py) both ask it; neither imports the other for it."""
    return rel is not None and rel.split("/")[0].startswith("nccl")


def discover_headers(library: str, include: Path) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """(headers, device_headers) of a set without a `headers` line: every header of
    LIBRARY_HEADERS that `include` holds (a required one is listed even when absent, so that
    check_present names it), and, when the set has a device API, the library's other headers
    at the top of `include` (the candidates for a device C ABI), sorted."""
    headers = tuple(h for h, required in LIBRARY_HEADERS[library] if required or (include / h).is_file())
    device_api = DEVICE_API_HEADER.get(library)
    if device_api is None or device_api not in headers:
        return headers, None
    known = {h for h, _ in LIBRARY_HEADERS[library]}
    family = DEVICE_HEADER_FAMILY.get(library)
    found = sorted(p.name for p in include.glob(family) if p.is_file() and p.name not in known) if family else []
    return headers, tuple(found)


def load_header_sets(path: Path | None = None) -> list[HeaderSet]:
    path = path or REPO / "generator" / "header_sets.toml"
    raw = read_header_set_tables(path)
    sets = []
    for hs in raw:
        if HEADER_ROOT:
            base = Path(HEADER_ROOT).absolute() / hs["name"]
            include, lib, source = base / "include", base / "lib", describe_source(hs)
        elif hs["source"] == "cuda_toolkit":
            include, lib, source = cuda_home() / "include", cuda_home() / "lib", "cuda_toolkit"
        elif hs["source"] == "wheel":
            base = CACHE / "header_sets" / hs["name"]
            include, lib, source = base / "include", base / "lib", hs["wheel"]
        else:
            base = directory_path(hs)
            include, lib, source = base / "include", base / "lib", describe_source(hs)
        headers, device_headers = discover_headers(hs["library"], include)
        if "headers" in hs:
            headers = tuple(hs["headers"])
        if "device_headers" in hs:
            device_headers = tuple(hs["device_headers"])
        sets.append(HeaderSet(hs["name"], hs["library"], hs["version"], headers,
                              include, lib, hs["soname"], hs.get("depends_on"),
                              hs.get("default", False), source, device_headers,
                              hs.get("kernel_headers")))
    return sets


def check_present(hs: HeaderSet) -> None:
    """Every header the set names is there. A missing header of a set whose folder is there
    (its wheel unpacked, its directory present) is one the release does not ship: say so,
    rather than send the user to tools/setup.sh."""
    fetched = (hs.include_root / LIBRARY_HEADERS[hs.library][0][0]).is_file()
    for h in (*hs.headers, *(hs.device_headers or ())):
        if (hs.include_root / h).is_file():
            continue
        if not fetched:
            raise SystemExit(f"header set {hs.name}: {hs.include_root / h} is missing "
                             f"(run tools/setup.sh, which fetches the pinned wheels)")
        raise SystemExit(f"header set {hs.name}: {hs.source} has no {h} (its include/ holds "
                         f"{', '.join(sorted(p.name for p in hs.include_root.glob('*.h'))) or 'no header'}); "
                         f"take {h} out of the set's headers, or leave `headers` out to use what the release ships")
