"""The CPU tests' stand-ins, in one module (tests/python/ and tests/fuzz/ import it):

- the stand-in libnccl (fake_nccl.c): a test module that needs it calls
  `run_over_stand_in(__file__, tmp_path)` from its one outer test, since the library is chosen once
  per process: the module runs again in a subprocess with NCCLBIND_NCCL_PATH set to the stand-in
  (NCCLBIND_FAKE_NCCL when given, else built here with the C compiler), where INSIDE is True and its
  real tests are defined; build_stand_in, given_or_built and build_shared build it and its kin,
  CallLog reads what it was called with;
- device buffers over host memory (DeviceArray speaks the CUDA array interface, DLPackArray
  DLPack), which the resolver cannot tell from device memory when there is no CUDA driver to ask;
- torch and CuPy stand-ins (install_torch, install_cupy) for the stand-in tests, which run in a
  subprocess where no real torch or CuPy is imported: just the attributes NcclBuffer reads, over
  NumPy memory.
"""
from __future__ import annotations

import ctypes
import os
import pathlib
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest


# ---- the stand-in libnccl ---------------------------------------------------------------------

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


# ---- device buffers over host memory --------------------------------------------------------------

class DeviceArray:
    """__cuda_array_interface__ over a NumPy array (or a fake address)."""

    def __init__(self, array=None, *, address=None, shape=None, typestr=None, strides=None, readonly=False,
                 stream=None):
        self.array = array
        if array is not None:
            address = array.__array_interface__["data"][0]
            shape = array.shape
            typestr = array.dtype.str
            strides = None if array.flags.c_contiguous else array.strides
        self._interface = {"shape": tuple(shape), "typestr": typestr, "data": (address, readonly), "version": 3,
                           "strides": strides, "stream": stream}

    @property
    def __cuda_array_interface__(self):
        return dict(self._interface)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):  # capsule "dltensor" (DLPack's ABI, dlpack.h)
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_DL_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}


class DLPackArray:
    """A DLPack producer over a NumPy array's memory that says it is on CUDA device `device`:
    its capsule (built here with ctypes, DLPack's ABI) says the same device, or
    `capsule_device` (device_type, device_id) where a test wants the two to disagree."""

    def __init__(self, array, device=0, device_type=2, capsule_device=None):
        self.array = array
        self.device = (device_type, device)
        self.capsule_device = self.device if capsule_device is None else capsule_device
        self._keep = []  # the structs a capsule points at live as long as this producer

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None, **kwargs):
        a = self.array
        shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
        strides = (ctypes.c_int64 * max(a.ndim, 1))(*(s // a.itemsize for s in a.strides))
        tensor = _DLManagedTensor()
        tensor.dl_tensor.data = a.__array_interface__["data"][0]
        tensor.dl_tensor.device = _DLDevice(*self.capsule_device)
        tensor.dl_tensor.ndim = a.ndim
        tensor.dl_tensor.dtype = _DLDataType(_DL_CODES[a.dtype.kind], a.itemsize * 8, 1)
        tensor.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        tensor.dl_tensor.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
        self._keep.append((tensor, shape, strides))
        return _capsule_new(ctypes.addressof(tensor), b"dltensor", None)


def device_array(values, dtype="float32") -> DeviceArray:
    return DeviceArray(np.ascontiguousarray(np.asarray(values, dtype=dtype)))


# ---- torch and CuPy -------------------------------------------------------------------------------

def install_torch() -> types.ModuleType:
    torch = types.ModuleType("torch")

    class dtype:
        def __init__(self, name):
            self.name = name

        def __str__(self):
            return f"torch.{self.name}"

        __repr__ = __str__

    dtype.__module__ = "torch"

    class device:
        def __init__(self, kind, index):
            self.type, self.index = kind, index

    class Tensor:
        def __init__(self, values, dtype_name="float32", cuda=True, index=0):
            self._point(np.ascontiguousarray(np.asarray(values, dtype=dtype_name)))
            self.dtype = getattr(torch, dtype_name)
            self.is_cuda = cuda
            self.device = device("cuda" if cuda else "cpu", index if cuda else None)
            self.index = index

        def _point(self, array):
            self.array, self._ptr, self._numel = array, array.__array_interface__["data"][0], array.size

        def data_ptr(self):
            return self._ptr

        def numel(self):
            return self._numel

        def is_contiguous(self):
            return self.array.flags.c_contiguous

        def get_device(self):
            return self.index if self.is_cuda else -1

        def stride(self):
            return tuple(s // self.array.itemsize for s in self.array.strides)

        @property
        def shape(self):
            return self.array.shape

        def set_(self, values):  # re-point the tensor at new memory, as torch's set_ does
            self._point(np.ascontiguousarray(np.asarray(values, dtype=self.array.dtype)))
            return self

    for name in ("float32", "float16", "bfloat16", "int32", "int64", "uint8", "bool"):
        setattr(torch, name, dtype(name))
    torch.Tensor = Tensor
    sys.modules["torch"] = torch
    return torch


def install_cupy() -> types.ModuleType:
    cupy = types.ModuleType("cupy")

    class MemoryPointer:
        def __init__(self, ptr, device_id):
            self.ptr, self.device_id = ptr, device_id

    class ndarray:
        def __init__(self, values, dtype="float32", device_id=0):
            self.array = np.asarray(values, dtype=dtype)
            self.data = MemoryPointer(self.array.ctypes.data, device_id)
            self.size = self.array.size
            self.dtype = self.array.dtype
            self._c_contiguous = self.array.flags.c_contiguous
            self.shape, self.strides = self.array.shape, self.array.strides

    class Stream:
        def __init__(self, ptr):
            self.ptr = ptr

    cupy.ndarray = ndarray
    cupy.Stream = Stream
    sys.modules["cupy"] = cupy
    return cupy
