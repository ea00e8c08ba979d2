"""CPU stand-ins for device buffers: objects that speak the CUDA array
interface or DLPack like a GPU array would, over host memory (NumPy) or a
made-up device address. The resolver cannot tell them from device memory
when there is no CUDA driver to ask, which is exactly what the CPU tests need."""
from __future__ import annotations

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


class DLPackArray:
    """A DLPack producer that claims CUDA device `device` but exports a NumPy
    array's capsule (so dlpack_info reads a real DLPack struct)."""

    def __init__(self, array, device=0, device_type=2):
        self.array = array
        self.device = (device_type, device)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None, **kwargs):
        return self.array.__dlpack__()


def device_array(values, dtype="float32") -> DeviceArray:
    return DeviceArray(np.ascontiguousarray(np.asarray(values, dtype=dtype)))
