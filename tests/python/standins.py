"""CPU stand-ins for device buffers: objects that speak the CUDA array
interface or DLPack like a GPU array would, over host memory (NumPy) or a
made-up device address. The resolver cannot tell them from device memory
when there is no CUDA driver to ask, which is exactly what the CPU tests need."""
from __future__ import annotations

import ctypes

import numpy as np


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
