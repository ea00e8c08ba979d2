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


def build_stand_in(directory: pathlib.Path) -> str:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not compiler:
        pytest.skip("no C compiler to build the stand-in libnccl (set NCCLBIND_FAKE_NCCL to a built one)")
    out = directory / "libnccl.so.2"
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-fvisibility=hidden", "-o", str(out),
                    str(HERE / "fake_nccl.c")], check=True)
    return str(out)


def run_over_stand_in(test_file: str, tmp_path: pathlib.Path) -> None:
    library = os.path.abspath(os.environ.get("NCCLBIND_FAKE_NCCL") or build_stand_in(tmp_path))
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
