"""Versions: of NCCL and NCCL EP as loaded, and of this binding.

A library that cannot be loaded shows as absent (LibraryInfo.loaded False, the
reason in .error), never as an exception from version_info / show_versions.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from .. import _nccl

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from typing import TextIO

LIBRARIES = {"nccl": _nccl.LIB_NCCL, "nccl_ep": _nccl.LIB_NCCL_EP}
_FILE_NAMES = {"nccl": "libnccl", "nccl_ep": "libnccl_ep"}


class Version(tuple):
    """A library version, e.g. Version(2, 28, 9): a (major, minor, patch) tuple,
    so ordered and comparable with tuples; prints as "2.28.9"."""

    __slots__ = ()

    def __new__(cls, major: int, minor: int, patch: int):
        return tuple.__new__(cls, (int(major), int(minor), int(patch)))

    @property
    def major(self) -> int:
        """The major version: 2 in 2.28.9."""
        return self[0]

    @property
    def minor(self) -> int:
        """The minor version: 28 in 2.28.9."""
        return self[1]

    @property
    def patch(self) -> int:
        """The patch level: 9 in 2.28.9."""
        return self[2]

    def __repr__(self) -> str:
        return f"Version({self[0]}, {self[1]}, {self[2]})"

    @classmethod
    def parse(cls, text: str) -> Version:
        """Version.parse("2.28.9"): the first three dot-separated numbers."""
        major, minor, patch = (int(x) for x in text.strip().split(".")[:3])
        return cls(major, minor, patch)

    @classmethod
    def from_code(cls, code: int, library: str = "nccl") -> Version:
        """NCCL's version code (22809; X*1000+Y*100+Z before 2.9) or NCCL EP's (MAJOR*10000+MINOR*100+PATCH)."""
        if library == "nccl" and code < 10000:
            return cls(code // 1000, code % 1000 // 100, code % 100)
        return cls(code // 10000, code % 10000 // 100, code % 100)

    @property
    def code(self) -> int:
        """The version code: 22809 for 2.28.9."""
        return self.major * 10000 + self.minor * 100 + self.patch

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


class CudaVersion(tuple):
    """The CUDA major.minor a library was built for, e.g. CudaVersion(13, 0): a tuple,
    printed "13.0" (nccl4py's LibraryInfo.cuda_variant); .variant is the wheel suffix "cu13"."""

    __slots__ = ()

    def __new__(cls, major: int, minor: int):
        return tuple.__new__(cls, (int(major), int(minor)))

    major = property(lambda self: self[0], doc="The CUDA major version: 13 in 13.0.")
    minor = property(lambda self: self[1], doc="The CUDA minor version: 0 in 13.0.")
    variant = property(lambda self: f"cu{self[0]}", doc='The CUDA wheel variant: "cu13".')

    def __repr__(self) -> str:
        return f"CudaVersion({self[0]}, {self[1]})"

    def __str__(self) -> str:
        return f"{self[0]}.{self[1]}"


class LibraryInfo:
    """One library as the runtime found it (nccl4py's fields first): version (Version),
    cuda_variant (CudaVersion, the CUDA it was built for, or None), path (pathlib.Path of
    the file loaded, or None); then name ("libnccl", "libnccl_ep"), loaded, and error
    (why it is absent)."""

    __slots__ = ("version", "cuda_variant", "path", "name", "loaded", "error")

    def __init__(self, version: Version | None, cuda_variant: CudaVersion | None = None,
                 path: str | os.PathLike | None = None, *, name: str = "libnccl", loaded: bool = True,
                 error: str = ""):
        self.version, self.cuda_variant = version, cuda_variant
        self.path = Path(path) if path else None
        self.name, self.loaded, self.error = name, loaded, error

    @property
    def cuda_version(self) -> CudaVersion | None:
        """The same as cuda_variant (ncclbind's earlier name)."""
        return self.cuda_variant

    def __repr__(self) -> str:
        return (f"LibraryInfo(version={self.version!r}, cuda_variant={self.cuda_variant!r}, path={self.path!r}, "
                f"name={self.name!r}, loaded={self.loaded})")

    def __str__(self) -> str:
        if not self.loaded:
            # The whole reason: its first line ends in "tried, in order:", the places follow.
            reason = (self.error or "not loaded yet").replace("\n", "\n  ")
            return f"{self.name}: absent: {reason}"
        cuda = f"+cuda{self.cuda_variant}" if self.cuda_variant else ""
        return f"{self.name} {self.version}{cuda} @ {self.path}"


class VersionInfo:
    """Versions (nccl4py's fields first): nccl4py (this package's version, under nccl4py's
    field name; also .ncclbind), nccl_bindings (the newest NCCL header version the bindings
    were generated from), libnccl (LibraryInfo, or None when libnccl cannot be loaded);
    then python, header_versions (library -> every version generated from), and nccl /
    nccl_ep (LibraryInfo of each, absent ones with their reason)."""

    __slots__ = ("nccl4py", "nccl_bindings", "libnccl", "python", "header_versions", "nccl", "nccl_ep")

    def __init__(self, nccl4py: str, nccl_bindings: Version, libnccl: LibraryInfo | None, *, python: str = "",
                 header_versions: dict | None = None, nccl: LibraryInfo | None = None,
                 nccl_ep: LibraryInfo | None = None):
        self.nccl4py, self.nccl_bindings, self.libnccl = nccl4py, nccl_bindings, libnccl
        self.python, self.header_versions = python, dict(header_versions or {})
        absent = LibraryInfo(None, loaded=False, error="not given")
        self.nccl: LibraryInfo = nccl if nccl is not None else absent
        self.nccl_ep: LibraryInfo = nccl_ep if nccl_ep is not None else absent

    @property
    def ncclbind(self) -> str:
        """This package's version."""
        return self.nccl4py

    def __repr__(self) -> str:
        return (f"VersionInfo(nccl4py={self.nccl4py!r}, nccl_bindings={self.nccl_bindings!r}, "
                f"libnccl={self.libnccl!r})")

    def __str__(self) -> str:
        lines = [f"ncclbind {self.ncclbind} (Python {self.python})"]
        for library, versions in self.header_versions.items():
            lines.append(f"  generated from {library} headers {', '.join(versions)}")
        lines += ["  " + str(library).replace("\n", "\n  ") for library in (self.nccl, self.nccl_ep)]
        return "\n".join(lines)


def library_info(library: str = "nccl") -> LibraryInfo:
    """Load `library` ("nccl" or "nccl_ep") if it can be, and describe it."""
    from ..errors import NcclError
    lib = LIBRARIES[library]
    try:
        raw = _nccl.library_info(lib)
    except NcclError as e:
        return LibraryInfo(None, name=_FILE_NAMES[library], loaded=False, error=str(e))
    cuda = CudaVersion(raw["cuda_major"], raw["cuda_minor"]) if raw["cuda_major"] else None
    return LibraryInfo(Version(raw["major"], raw["minor"], raw["patch"]), cuda, raw["path"],
                       name=_FILE_NAMES[library])


def loaded_version_code(library: str = "nccl") -> int:
    """The loaded library's version code (loading it); raises NcclError if it cannot load."""
    return _nccl.library_info(LIBRARIES[library])["version_code"]


def version_code() -> int:
    """ncclGetVersion(): the loaded libnccl's version code, e.g. 22809 (an int to compare)."""
    return _nccl.get_version()


def get_version() -> VersionInfo:
    """This package, its header sets and each library (loading it if it can): nccl4py's
    get_version(). version_code() is the loaded libnccl's code as an int."""
    from .. import __version__, nccl_enums, nccl_ep_enums
    python = ".".join(str(x) for x in sys.version_info[:3])
    nccl, nccl_ep = library_info("nccl"), library_info("nccl_ep")
    headers = {"nccl": list(nccl_enums.HEADER_VERSIONS), "nccl_ep": list(nccl_ep_enums.HEADER_VERSIONS)}
    newest = max((Version.parse(v) for v in headers["nccl"]), default=None)
    return VersionInfo(__version__, newest, nccl if nccl.loaded else None, python=python,
                       header_versions=headers, nccl=nccl, nccl_ep=nccl_ep)


version_info = get_version


def show_versions(file: TextIO | None = None) -> None:
    """Print get_version(): this binding, its header sets, and each library (or why it is absent)."""
    print(get_version(), file=file if file is not None else sys.stdout)


def get_error_string(nccl_result: int) -> str:
    """NCCL's text for a result code (ncclGetErrorString), e.g. get_error_string(NcclResult.INVALID_USAGE)."""
    if isinstance(nccl_result, bool) or not isinstance(nccl_result, int):
        from ..errors import NcclInvalid
        raise NcclInvalid(f"nccl_result: an NcclResult or int, not {type(nccl_result).__name__}", "nccl_result")
    return _nccl.get_error_string(int(nccl_result)) or ""
