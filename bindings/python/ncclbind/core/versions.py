"""Versions: of NCCL and NCCL EP as loaded, and of this binding.

A library that cannot be loaded shows as absent (LibraryInfo.loaded False, the
reason in .error), never as an exception from version_info / show_versions.
"""
from __future__ import annotations

import sys

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


class LibraryInfo:
    """One library as the runtime found it: name ("libnccl", "libnccl_ep"),
    loaded, version (Version), cuda_variant (the CUDA build, e.g. "cu13"; ""
    if unknown), cuda_version ((major, minor) or None), path (the file loaded),
    error (why it is absent)."""

    __slots__ = ("name", "loaded", "version", "cuda_variant", "cuda_version", "path", "error")

    def __init__(self, name: str, loaded: bool, version: Version | None = None, cuda_variant: str = "",
                 cuda_version: tuple | None = None, path: str = "", error: str = ""):
        self.name, self.loaded, self.version = name, loaded, version
        self.cuda_variant, self.cuda_version, self.path, self.error = cuda_variant, cuda_version, path, error

    def __repr__(self) -> str:
        return (f"LibraryInfo(name={self.name!r}, loaded={self.loaded}, version={self.version!r}, "
                f"cuda_variant={self.cuda_variant!r}, path={self.path!r})")

    def __str__(self) -> str:
        if not self.loaded:
            # The whole reason: its first line ends in "tried, in order:", the places follow.
            reason = (self.error or "not loaded yet").replace("\n", "\n  ")
            return f"{self.name}: absent: {reason}"
        cuda = f", CUDA {self.cuda_version[0]}.{self.cuda_version[1]} ({self.cuda_variant})" if self.cuda_version else ""
        return f"{self.name} {self.version}{cuda} at {self.path}"


class VersionInfo:
    """This binding (ncclbind, its version), the Python it runs on, the header
    versions it was generated from (header_versions: library -> versions), and
    both libraries (nccl, nccl_ep: LibraryInfo)."""

    __slots__ = ("ncclbind", "python", "header_versions", "nccl", "nccl_ep")

    def __init__(self, ncclbind: str, python: str, header_versions: dict, nccl: LibraryInfo,
                 nccl_ep: LibraryInfo):
        self.ncclbind, self.python, self.header_versions = ncclbind, python, header_versions
        self.nccl, self.nccl_ep = nccl, nccl_ep

    def __repr__(self) -> str:
        return f"VersionInfo(ncclbind={self.ncclbind!r}, nccl={self.nccl!r}, nccl_ep={self.nccl_ep!r})"

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
        return LibraryInfo(_FILE_NAMES[library], False, error=str(e))
    cuda = (raw["cuda_major"], raw["cuda_minor"]) if raw["cuda_major"] else None
    return LibraryInfo(_FILE_NAMES[library], True, Version(raw["major"], raw["minor"], raw["patch"]),
                       raw["cuda_variant"], cuda, raw["path"])


def loaded_version_code(library: str = "nccl") -> int:
    """The loaded library's version code (loading it); raises NcclError if it cannot load."""
    return _nccl.library_info(LIBRARIES[library])["version_code"]


def get_version() -> int:
    """ncclGetVersion(): the loaded libnccl's version code, e.g. 22809."""
    return _nccl.get_version()


def version_info() -> VersionInfo:
    """This binding, the Python it runs on, its header sets, and each library (loading it if it can)."""
    from .. import __version__, nccl_enums, nccl_ep_enums
    python = ".".join(str(x) for x in sys.version_info[:3])
    return VersionInfo(__version__, python,
                       {"nccl": list(nccl_enums.HEADER_VERSIONS), "nccl_ep": list(nccl_ep_enums.HEADER_VERSIONS)},
                       library_info("nccl"), library_info("nccl_ep"))


def show_versions(file: TextIO | None = None) -> None:
    """Print version_info(): this binding, its header sets, and each library (or why it is absent)."""
    print(version_info(), file=file if file is not None else sys.stdout)


def get_error_string(nccl_result: int) -> str:
    """NCCL's text for a result code (ncclGetErrorString), e.g. get_error_string(NcclResult.INVALID_USAGE)."""
    if isinstance(nccl_result, bool) or not isinstance(nccl_result, int):
        from ..errors import NcclInvalid
        raise NcclInvalid(f"nccl_result: an NcclResult or int, not {type(nccl_result).__name__}", "nccl_result")
    return _nccl.get_error_string(int(nccl_result)) or ""
