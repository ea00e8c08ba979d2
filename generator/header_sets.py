"""The generator's inputs: header_sets.toml resolved to paths on this machine."""
from __future__ import annotations

import os
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


def load_header_sets(path: Path | None = None) -> list[HeaderSet]:
    path = path or REPO / "generator" / "header_sets.toml"
    with open(path, "rb") as f:
        raw = tomllib.load(f)["header_set"]
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
        elif hs["source"] == "directory":
            base = directory_path(hs)
            include, lib, source = base / "include", base / "lib", describe_source(hs)
        else:
            raise SystemExit(f"header set {hs['name']}: unknown source {hs['source']!r} in {path}")
        sets.append(HeaderSet(hs["name"], hs["library"], hs["version"], tuple(hs["headers"]),
                              include, lib, hs["soname"], hs.get("depends_on"),
                              hs.get("default", False), source,
                              tuple(hs["device_headers"]) if "device_headers" in hs else None))
    return sets


def check_present(hs: HeaderSet) -> None:
    for h in hs.headers:
        if not (hs.include_root / h).is_file():
            raise SystemExit(f"header set {hs.name}: {hs.include_root / h} is missing "
                             f"(run tools/setup.sh, which fetches the pinned wheels)")
