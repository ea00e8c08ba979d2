"""Which shim to preload: the variant of the NCCL release the program will load, built once
from the sources with the system C compiler (shim/build_shim.sh) into a cache directory.

One variant per release because an exported wrapper is always visible to
dlsym(RTLD_DEFAULT, name): a program that probes for a function its libnccl lacks must not
find the shim's. The variant is the loaded release's own, or else the newest older one.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

SHIM_NAME = re.compile(r"^libncclbind_shim-nccl-(\d+)\.(\d+)\.(\d+)\.so$")


class ShimBuildError(RuntimeError):
    """No shim can be found or built; the message says what to set."""


def source_root() -> pathlib.Path | None:
    """The ncclbind checkout holding shim/build_shim.sh: NCCLBIND_SOURCE_DIR, or the one this
    package is in (bindings/python/ncclbind/trace/)."""
    explicit = os.environ.get("NCCLBIND_SOURCE_DIR")
    candidates = [pathlib.Path(explicit)] if explicit else []
    candidates += list(pathlib.Path(__file__).resolve().parents)
    for c in candidates:
        if (c / "shim" / "build_shim.sh").is_file() and (c / "bindings" / "shim" / "src").is_dir():
            return c
    return None


def code_of(release: str) -> int:
    major, minor, patch = (int(x) for x in release.split("."))
    return major * 10000 + minor * 100 + patch


def available(directory: pathlib.Path) -> dict[str, pathlib.Path]:
    """{release: library} of the shim variants in a directory."""
    out = {}
    if directory.is_dir():
        for f in directory.iterdir():
            m = SHIM_NAME.match(f.name)
            if m:
                out[".".join(m.groups())] = f
    return out


RELEASE_TABLES = re.compile(r"^#elif NB_SHIM_RELEASE_CODE == \d+ /\* NCCL (\d+\.\d+\.\d+) \*/$", re.M)


def source_releases(root: pathlib.Path) -> list[str]:
    """The releases the one generated source (bindings/shim/src/nccl_shim.c) has tables for."""
    source = root / "bindings" / "shim" / "src" / "nccl_shim.c"
    text = source.read_text() if source.is_file() else ""
    return sorted(RELEASE_TABLES.findall(text),
                  key=code_of)


def choose_release(code: int, releases) -> str:
    """The release whose wrappers fit a libnccl of version `code`: its own, else the newest
    older one (its functions are all in the newer library), else the oldest."""
    ordered = sorted(releases, key=code_of)
    if not ordered:
        raise ShimBuildError("no shim variant to choose from")
    older = [r for r in ordered if code_of(r) <= code]
    return older[-1] if older else ordered[0]


def wheel_nccl() -> str | None:
    """The nvidia-nccl-cu* wheel's libnccl.so.2 in this Python's path (torch loads that one)."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    for base in (spec.submodule_search_locations or []) if spec else []:
        candidate = pathlib.Path(base) / "nccl" / "lib" / "libnccl.so.2"
        if candidate.is_file():
            return str(candidate)
    return None


def find_nccl(explicit: str | None = None) -> str:
    """The libnccl the program will load: explicit, NCCLBIND_SHIM_NCCL_PATH, NCCLBIND_NCCL_PATH
    (unless it is a shim), the nvidia-nccl wheel's, else the system loader's libnccl.so.2."""
    for candidate in (explicit, os.environ.get("NCCLBIND_SHIM_NCCL_PATH"), os.environ.get("NCCLBIND_NCCL_PATH")):
        if candidate and not SHIM_NAME.match(os.path.basename(candidate)):
            return candidate
    return wheel_nccl() or "libnccl.so.2"


def nccl_release_of(path: str) -> int:
    """ncclGetVersion of the library at path (loaded in a child process, so the launcher's
    own process loads no NCCL)."""
    probe = ("import ctypes,sys; l=ctypes.CDLL(sys.argv[1]); v=ctypes.c_int(); "
             "r=l.ncclGetVersion(ctypes.byref(v)); print(v.value if r == 0 else -r)")
    proc = subprocess.run([sys.executable, "-c", probe, path], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 or not proc.stdout.strip().lstrip("-").isdigit():
        raise ShimBuildError(f"cannot load {path} to read its NCCL version: {proc.stderr.strip()[-400:]} "
                             "(name the library with --nccl PATH or NCCLBIND_SHIM_NCCL_PATH)")
    code = int(proc.stdout.strip())
    if code <= 0:
        raise ShimBuildError(f"ncclGetVersion of {path} failed with ncclResult_t {-code}")
    return code


def cache_dir(root: pathlib.Path) -> pathlib.Path:
    """Where the variants built from these sources go: keyed by the sources' contents."""
    h = hashlib.sha256()
    files = sorted([*(root / "shim").rglob("*.[ch]"), root / "shim" / "build_shim.sh",
                    *(root / "bindings" / "shim" / "src").glob("*.c"),
                    *(root / "bindings" / "c" / "include" / "ncclbind").glob("*.h"),
                    *(root / "runtime" / "include" / "ncclbind").glob("*.h")])
    for f in files:
        h.update(f.relative_to(root).as_posix().encode())
        h.update(f.read_bytes())
    base = os.environ.get("NCCLBIND_SHIM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ncclbind", "shim")
    return pathlib.Path(base) / h.hexdigest()[:16]


def find_library(release: str) -> pathlib.Path:
    """The shim for a release: from NCCLBIND_SHIM_LIBDIR (prebuilt), else built once from the
    source checkout into the cache."""
    prebuilt = os.environ.get("NCCLBIND_SHIM_LIBDIR")
    if prebuilt:
        found = available(pathlib.Path(prebuilt))
        if not found:
            raise ShimBuildError(f"NCCLBIND_SHIM_LIBDIR={prebuilt} holds no libncclbind_shim-nccl-<release>.so")
        return found[choose_release(code_of(release), found)]
    root = source_root()
    if root is None:
        raise ShimBuildError("the shim's sources are not here (an installed package has none): set "
                             "NCCLBIND_SOURCE_DIR to an ncclbind checkout, or build the shims with "
                             "`bash shim/build_shim.sh DIR` there and set NCCLBIND_SHIM_LIBDIR=DIR")
    chosen = choose_release(code_of(release), source_releases(root))
    directory = cache_dir(root)
    library = directory / f"libncclbind_shim-nccl-{chosen}.so"
    if not library.is_file():
        if not (os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")):
            raise ShimBuildError("no C compiler (cc, gcc or $CC) to build the shim with")
        proc = subprocess.run(["bash", str(root / "shim" / "build_shim.sh"), str(directory), chosen],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise ShimBuildError(f"building the shim for NCCL {chosen} failed:\n{proc.stderr[-4000:]}")
    return library


def shim_library(nccl: str | None = None) -> tuple[pathlib.Path, str, int]:
    """(the shim to preload, the libnccl it forwards to, that library's version code)."""
    path = find_nccl(nccl)
    code = nccl_release_of(path)
    release = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return find_library(release), path, code


def loaded_release_of(library: pathlib.Path) -> str:
    m = SHIM_NAME.match(library.name)
    return ".".join(m.groups()) if m else ""
