"""Stand-ins for torch and CuPy, for the fake-NCCL tests only (they run in a
subprocess, where no real torch or CuPy is imported): just the attributes
NcclBuffer reads, over NumPy memory."""
from __future__ import annotations

import sys
import types

import numpy as np


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
