"""NcclBuffer, the one resolver of buffer specs, with CPU stand-ins for device
arrays (CUDA array interface and DLPack objects over host memory or made-up
addresses; without a CUDA driver the resolver cannot tell) and real bad inputs."""
import array

import numpy as np
import pytest

from ncclbind import NcclBuffer, NcclDataType
from ncclbind.errors import NcclInvalid
from stand_ins import DeviceArray, DLPackArray, device_array

FAKE_ADDRESS = 0x7F00_0000_1000


def resolve(obj, **kwargs):
    return NcclBuffer.resolve(obj, "sendbuf", **kwargs)


class Interface:
    """An object whose __cuda_array_interface__ is whatever it is given."""

    def __init__(self, interface):
        self.__cuda_array_interface__ = interface


def test_cuda_array_interface():
    a = device_array([[1, 2], [3, 4]], "float16")
    buf = resolve(a)
    assert (buf.ptr, buf.count, buf.dtype) == (a.array.ctypes.data, 4, NcclDataType.FLOAT16)
    assert buf.nbytes == 8 and buf.owner is a and not buf.readonly


def test_cuda_array_interface_with_a_fake_device_address():
    buf = resolve(DeviceArray(address=FAKE_ADDRESS, shape=(3, 5), typestr="<i8"))
    assert (buf.ptr, buf.count, buf.dtype) == (FAKE_ADDRESS, 15, NcclDataType.INT64)


def test_dlpack_producer():
    host = np.arange(6, dtype=np.int32)
    buf = resolve(DLPackArray(host, device=0))
    assert (buf.ptr, buf.count, buf.dtype, buf.device) == (host.ctypes.data, 6, NcclDataType.INT32, 0)


def test_explicit_specs():
    buf = resolve((FAKE_ADDRESS, 8, "bfloat16"))
    assert (buf.ptr, buf.count, buf.dtype, buf.device) == (FAKE_ADDRESS, 8, NcclDataType.BFLOAT16, None)
    buf = resolve((FAKE_ADDRESS, 8, np.float32, 1))
    assert buf.device == 1
    same = NcclBuffer(FAKE_ADDRESS, 2, NcclDataType.UINT8, 0)
    assert resolve(same) is same


@pytest.mark.parametrize("obj, words", [
    (np.zeros(4, np.float32), "host memory"),
    (bytearray(16), "host memory"),
    (array.array("f", [1.0]), "host memory"),
    (DLPackArray(np.zeros(2, np.float32), device_type=1), "host memory"),
    (DLPackArray(np.zeros(2, np.float32), device_type=4), "not CUDA"),
    # the capsule's own device is what NCCL would read: a CPU or another GPU's capsule is refused
    (DLPackArray(np.zeros(2, np.float32), capsule_device=(1, 0)), "capsule is on device (type 1, id 0)"),
    (DLPackArray(np.zeros(2, np.float32), capsule_device=(2, 5)), "but its __dlpack_device__ says (type 2, id 0)"),
    (object(), "is not a buffer"),
    (DeviceArray(np.zeros((4, 4), np.float32)[:, ::2]), "strided"),
    (DeviceArray(address=FAKE_ADDRESS, shape=(4,), typestr="|b1"), "has no NCCL data type"),
    ((FAKE_ADDRESS, 4), "explicit buffer spec"),
    ((0, 4, "float32"), "NULL"),
    ((FAKE_ADDRESS, -1, "float32"), "count"),
    # extents that are negative, or bytes past the address space, are refused, not wrapped
    (DeviceArray(address=FAKE_ADDRESS, shape=(-2, -2), typestr="<f4"), "int >= 0"),
    (DeviceArray(address=FAKE_ADDRESS, shape=(2 ** 62,), typestr="<f4"), "past the end of the address space"),
    (DeviceArray(address=2 ** 64 - 8, shape=(4,), typestr="<f4"), "past the end of the address space"),
    ((2 ** 64 - 8, 4, "float32"), "past the end of the address space"),
    # a malformed __cuda_array_interface__ is named, not a KeyError or TypeError from inside
    (Interface({"shape": (2,), "typestr": "<f4", "version": 3}), "lacks 'data'"),
    (Interface({"shape": (2,), "typestr": 5, "data": (FAKE_ADDRESS, False)}), "['typestr'] is 5"),
    (Interface({"shape": "ab", "typestr": "<f4", "data": (FAKE_ADDRESS, False)}), "['shape'] is 'ab'"),
    (Interface({"shape": (2,), "typestr": "<f4", "data": FAKE_ADDRESS}), "['data'] is"),
    (Interface([1, 2]), "is a list, not a dict"),
])
def test_bad_buffers_are_rejected_naming_the_argument(obj, words):
    with pytest.raises(NcclInvalid) as info:
        resolve(obj)
    assert info.value.argument == "sendbuf"
    assert str(info.value).startswith("sendbuf") and words in str(info.value)


def test_a_buffer_with_a_negative_extent_is_refused_where_it_is_made():
    """The resolvers' last check (NcclBuffer itself): a DLPack capsule's shape (-2, -2) would
    otherwise count 4 elements."""
    with pytest.raises(NcclInvalid, match="every extent is an int >= 0") as info:
        NcclBuffer(FAKE_ADDRESS, 4, "float32", shape=(-2, -2))
    assert info.value.argument == "shape"


def test_strided_dlpack_is_rejected():
    host = np.arange(8, dtype=np.float32).reshape(2, 4)[:, ::2]
    with pytest.raises(NcclInvalid) as info:
        resolve(DLPackArray(host))
    assert "strided" in str(info.value)


@pytest.mark.parametrize("strides, why", [((4, 4), r"give 2 extents, but shape \(4,\) has 1"),
                                          ("x", "not a tuple of ints"), ((4.0,), "not a tuple of ints")])
def test_strides_that_do_not_describe_the_shape_are_refused(strides, why):
    """Strides of another length than the shape were read pairwise and the rest ignored: a
    (4,) array with strides (4, 4) passed as contiguous (issue 24's fuzz)."""
    a = DeviceArray(address=FAKE_ADDRESS, shape=(4,), typestr="<f4", strides=strides)
    with pytest.raises(NcclInvalid, match=why) as info:
        NcclBuffer.resolve(a, "sendbuf")
    assert info.value.argument == "sendbuf"


@pytest.mark.parametrize("device", [None, (2,), ("2", 0), (2, 0.0), (True, 0)])
def test_a_dlpack_device_that_is_no_pair_of_ints_is_refused(device):
    """__dlpack_device__() returning None was unpacked and raised a TypeError from inside."""
    class Producer(DLPackArray):
        def __dlpack_device__(self):
            return device
    with pytest.raises(NcclInvalid, match="not \\(device_type, device_id\\)") as info:
        NcclBuffer.resolve(Producer(np.zeros(4, np.float32)), "recvbuf")
    assert info.value.argument == "recvbuf"


def test_size_one_dimensions_do_not_make_an_array_strided():
    a = DeviceArray(address=FAKE_ADDRESS, shape=(4, 1), typestr="<f4", strides=(4, 1234))
    assert resolve(a).count == 4


def test_read_only_output_is_rejected():
    ro = DeviceArray(address=FAKE_ADDRESS, shape=(4,), typestr="<f4", readonly=True)
    assert resolve(ro).readonly
    with pytest.raises(NcclInvalid) as info:
        NcclBuffer.resolve(ro, "recvbuf", writable=True)
    assert info.value.argument == "recvbuf" and "read-only" in str(info.value)


def test_buffer_on_another_device_is_rejected():
    with pytest.raises(NcclInvalid) as info:
        NcclBuffer.resolve((FAKE_ADDRESS, 4, "float32", 1), "recvbuf", device=0)
    assert "device 1" in str(info.value) and "device 0" in str(info.value)
    NcclBuffer.resolve((FAKE_ADDRESS, 4, "float32", 0), "recvbuf", device=0)


def test_an_nccl_buffer_reads_back_as_a_cuda_array():
    buf = NcclBuffer(FAKE_ADDRESS, 3, "int32", 0)
    interface = buf.__cuda_array_interface__
    assert interface["shape"] == (3,) and interface["typestr"] == "<i4" and interface["data"] == (FAKE_ADDRESS, False)
    assert resolve(DeviceArray(address=FAKE_ADDRESS, shape=(3,), typestr=interface["typestr"])).count == 3


def test_arrays_that_cannot_be_weakly_referenced_are_resolved_each_time(monkeypatch):
    """A CuPy-like type without weak-reference support is not cached (an id could be
    reused by another array) and its failing weakref.ref is not retried per call."""
    import sys
    import types

    from ncclbind.base import buffer as buffer_module

    class Memory:
        def __init__(self, ptr):
            self.ptr, self.device_id = ptr, 0

    class ndarray:  # noqa: N801 - the name the resolver looks for
        __slots__ = ("data", "size", "dtype", "shape", "strides", "_c_contiguous")

        def __init__(self, ptr, size):
            self.data, self.size, self.dtype = Memory(ptr), size, np.dtype("float32")
            self.shape, self.strides, self._c_contiguous = (size,), (4,), True

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(ndarray=ndarray))
    monkeypatch.setattr(buffer_module, "_not_weakrefable", set())
    first, second = ndarray(FAKE_ADDRESS, 3), ndarray(FAKE_ADDRESS + 64, 5)
    assert (resolve(first).ptr, resolve(first).count) == (FAKE_ADDRESS, 3)
    assert ndarray in buffer_module._not_weakrefable
    assert (resolve(second).ptr, resolve(second).count) == (FAKE_ADDRESS + 64, 5)
    assert id(first) not in buffer_module._entries and id(second) not in buffer_module._entries
