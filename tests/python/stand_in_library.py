"""Running a test module over the stand-in libnccl (fake_nccl.c).

The library is chosen once per process, so a module that needs the stand-in
calls `run_over_stand_in(__file__, tmp_path)` from its one outer test: the
module runs again in a subprocess with NCCLBIND_NCCL_PATH set to the stand-in
(NCCLBIND_FAKE_NCCL when given, else built here with the C compiler), where
INSIDE is True and its real tests are defined.
"""
from __future__ import annotations

import ctypes
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
INSIDE = os.environ.get("NCCLBIND_FAKE_NCCL_ACTIVE") == "1"


def build_shared(out: pathlib.Path, arguments: list[str], *, cxx: bool = False, variable: str = "") -> str:
    """`out` built here with the C (or C++) compiler from `arguments` (sources and flags; -shared
    -fPIC added). Skips when there is no compiler, naming `variable` as the way to give a built one."""
    names = ("CXX", "c++", "g++", "clang++") if cxx else ("CC", "cc", "gcc", "clang")
    compiler = os.environ.get(names[0]) or next(filter(None, map(shutil.which, names[1:])), None)
    if not compiler:
        pytest.skip(f"no {'C++' if cxx else 'C'} compiler to build {out.name}"
                    + (f" (or set {variable} to a built one)" if variable else ""))
    subprocess.run([compiler, "-shared", "-fPIC", *arguments, "-o", str(out)], check=True)
    return str(out)


def given_or_built(variable: str, out: pathlib.Path, arguments: list[str], *, cxx: bool = False) -> str:
    """The shared library the environment variable names (Bazel's build), else build_shared's."""
    given = os.environ.get(variable)
    return os.path.abspath(given) if given else build_shared(out, arguments, cxx=cxx, variable=variable)


def build_stand_in(directory: pathlib.Path) -> str:
    """A fresh stand-in libnccl (fake_nccl.c) in directory."""
    return build_shared(directory / "libnccl.so.2", ["-O1", "-fvisibility=hidden", str(HERE / "fake_nccl.c")],
                        variable="NCCLBIND_FAKE_NCCL")


def run_over_stand_in(test_file: str, tmp_path: pathlib.Path, library: str | None = None) -> None:
    """library: another stand-in than fake_nccl.c's default build (such as its -DFAKE_NCCL_RMA variant)."""
    library = os.path.abspath(library or os.environ.get("NCCLBIND_FAKE_NCCL") or build_stand_in(tmp_path))
    env = dict(os.environ, NCCLBIND_NCCL_PATH=library, NCCLBIND_FAKE_NCCL_ACTIVE="1",
               # host memory stands in for device memory: no CUDA device may say otherwise
               CUDA_VISIBLE_DEVICES="", NCCLBIND_CUDA_BACKEND="helper",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run([sys.executable, "-m", "pytest", test_file, "-q", "-p", "no:cacheprovider",
                             "-W", "error::pytest.PytestUnraisableExceptionWarning"],
                            env=env, capture_output=True, text=True, timeout=300, cwd=str(HERE))
    print(result.stdout[-4000:])
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-4000:]


class CallLog:
    """The stand-in's record of grouped calls (fakeCallLog): one tuple per call,
    ("send", ptr, count, type, peer), ("recv", ...), ("reduce", send, recv,
    count, type, op, root), ("group_start",), ("group_end",)."""

    def __init__(self):
        self.library = ctypes.CDLL(os.environ["NCCLBIND_NCCL_PATH"])  # the same copy the runtime loaded
        self.library.fakeCallLog.restype = ctypes.c_char_p

    def clear(self) -> None:
        self.library.fakeClearCallLog()

    def calls(self) -> list[tuple]:
        def number(word: str) -> int:
            return int(word, 16) if word.startswith("0x") else 0 if word == "(nil)" else int(word)
        return [(words[0], *map(number, words[1:]))
                for words in (line.split() for line in self.library.fakeCallLog().decode().splitlines())]
