"""Property-based tests (hypothesis) of the two layers every bad input meets first: the
buffer resolver (NcclBuffer.resolve) and the raw calls' argument conversions. Whatever
the input, the answer is a correct NcclBuffer / an accepted value, or NcclInvalid naming
the argument; never another exception, never a crash.

Seeded and bounded for CI: derandomize=True (the same examples every run), no example
database, at most MAX_EXAMPLES per property; the whole file runs in a few seconds. Over
the real libnccl: a value the conversions let through reaches it, so the address cases
give only values that must be refused (a wrong address would crash this process), and
counts reach a call NCCL refuses on its own (a null communicator).
"""
import enum

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ncclbind._nccl as nccl
from ncclbind import NcclBuffer
from ncclbind.errors import NcclError, NcclInvalid
from stand_ins import DeviceArray, DLPackArray
from conftest import c_param

MAX_EXAMPLES = 400
bounded = settings(max_examples=MAX_EXAMPLES, derandomize=True, database=None, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow])

ARGUMENT = "sendbuf"
# An enum parameter (ncclResult_t) takes a value of either signedness of its 32 bits.
ENUM32 = (-2 ** 31, 2 ** 32 - 1)
UINT64_MAX = 2 ** 64 - 1


class Color(enum.IntEnum):
    RED = 1


class Index:
    """Not an int, but has __index__ (NumPy integers are such objects)."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def refused(call, argument: str) -> NcclInvalid:
    with pytest.raises(NcclInvalid) as info:
        call()
    assert info.value.argument == argument and argument in str(info.value), str(info.value)
    return info.value


# ---- the buffer resolver ---------------------------------------------------------

GOOD_TYPESTRS = ["<f4", "<f8", "<f2", "|i1", "|u1", "<i4", "<u4", "<i8", "<u8", "<c8", "<c16"]
BAD_TYPESTRS = ["|b1", "<U4", "<f3", "", "f4", "<x8", "<f", "<c4", "|V8", "<m8", ">f4", "<i16"]
ITEMSIZE = {"<f4": 4, "<f8": 8, "<f2": 2, "|i1": 1, "|u1": 1, "<i4": 4, "<u4": 4, "<i8": 8, "<u8": 8,
            "<c8": 8, "<c16": 16}

addresses = st.one_of(st.integers(0, UINT64_MAX), st.integers(-2 ** 70, 2 ** 70),
                      st.sampled_from([0, 1, 0x7F00_0000_1000, UINT64_MAX, -1]))
shapes = st.lists(st.one_of(st.integers(0, 6), st.integers(-3, 2 ** 62)), max_size=4).map(tuple)
strides = st.one_of(st.none(), st.lists(st.integers(-64, 64), max_size=4).map(tuple))
devices = st.one_of(st.none(), st.integers(-2, 4))


@bounded
@given(address=addresses, shape=shapes, typestr=st.sampled_from(GOOD_TYPESTRS + BAD_TYPESTRS),
       stride=strides, readonly=st.booleans(), writable=st.booleans(), device=devices)
def test_a_cuda_array_interface_resolves_exactly_or_is_refused_by_name(address, shape, typestr, stride, readonly,
                                                                      writable, device):
    obj = DeviceArray(address=address, shape=shape, typestr=typestr, strides=stride, readonly=readonly)
    try:
        buf = NcclBuffer.resolve(obj, ARGUMENT, writable=writable, device=device)
    except NcclInvalid as e:
        assert e.argument == ARGUMENT and ARGUMENT in str(e), str(e)
        return
    elements = int(np.prod(shape, dtype=object)) if shape else 1
    assert typestr in GOOD_TYPESTRS and all(extent >= 0 for extent in shape)
    assert buf.ptr == address and 0 <= address <= UINT64_MAX and (address or not elements)
    assert buf.elements == elements and buf.count * buf.dtype.itemsize == elements * ITEMSIZE[typestr]
    assert buf.readonly == readonly and not (writable and readonly)
    assert buf.owner is obj


host_arrays = st.builds(lambda shape, dtype: np.zeros(shape, dtype),
                        st.lists(st.integers(0, 4), max_size=3).map(tuple),
                        st.sampled_from(["float32", "float64", "int8", "uint8", "int32", "int64", "float16", "bool",
                                         "complex64", "complex128"]))


@bounded
@given(array=host_arrays, step=st.sampled_from([1, 2]), device_type=st.sampled_from([1, 2, 3, 4, 13]),
       device_id=st.integers(0, 3), device=devices)
def test_a_dlpack_export_resolves_exactly_or_is_refused_by_name(array, step, device_type, device_id, device):
    view = array[..., ::step] if array.ndim else array
    obj = DLPackArray(view, device=device_id, device_type=device_type)
    try:
        buf = NcclBuffer.resolve(obj, ARGUMENT, device=device)
    except NcclInvalid as e:
        assert e.argument == ARGUMENT and ARGUMENT in str(e), str(e)
        return
    assert device_type in (2, 13) and view.dtype != np.bool_
    assert buf.ptr == view.__array_interface__["data"][0] and buf.elements == view.size
    assert buf.device == device_id and (device is None or device == device_id)


dtypes = st.one_of(st.sampled_from(["float32", "bfloat16", "int8", "uint64", "float8_e4m3fn", np.float32, 7]),
                   st.sampled_from(["float", "f4", "", "complex", None, -1, 99, 3.5, b"float32", True]))
anything = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=4), st.binary(max_size=4),
                     st.integers(-2 ** 70, 2 ** 70), st.just(Color.RED), st.builds(Index, st.integers(-5, 5)))


@bounded
@given(ptr=st.one_of(addresses, anything), count=st.one_of(st.integers(-3, 2 ** 66), anything), dtype=dtypes,
       device=st.one_of(devices, anything), length=st.sampled_from([2, 3, 4, 5]))
def test_an_explicit_spec_resolves_exactly_or_is_refused_by_name(ptr, count, dtype, device, length):
    spec = (ptr, count, dtype, device, None)[:length]
    try:
        buf = NcclBuffer.resolve(spec, ARGUMENT)
    except NcclInvalid as e:
        assert e.argument == ARGUMENT and ARGUMENT in str(e), str(e)
        return
    assert length in (3, 4)
    assert buf.ptr == ptr and buf.elements == count and count >= 0 and (ptr or not count)
    assert buf.device == (device if length == 4 else None)


# ---- the raw calls' argument conversions ------------------------------------------

def convertible(value, lo: int, hi: int) -> bool:
    """What the conversions accept for an integer parameter of range [lo, hi]."""
    if isinstance(value, (bool, float)) or not hasattr(type(value), "__index__"):
        return False
    return lo <= value.__index__() <= hi


@bounded
@given(value=anything)
def test_an_enum_parameter_takes_exactly_the_ints_of_its_range(value):
    if convertible(value, *ENUM32):
        assert isinstance(nccl.get_error_string(value), str)
    else:
        refused(lambda: nccl.get_error_string(value), "result")


@bounded
@given(value=st.one_of(anything, st.integers(-2, 2 ** 64 + 2), st.sampled_from([UINT64_MAX, UINT64_MAX + 1])))
def test_a_count_takes_exactly_the_values_of_size_t(value):
    call = lambda: nccl.all_reduce(0, 0, value, 0, 0, None, None)  # noqa: E731
    if convertible(value, 0, UINT64_MAX):
        with pytest.raises(NcclError) as info:  # converted; NCCL refuses the null communicator
            call()
        assert not isinstance(info.value, NcclInvalid)
    else:
        refused(call, c_param("ncclAllReduce", 2))


not_an_address = st.one_of(st.booleans(), st.floats(), st.text(max_size=4), st.binary(max_size=4),
                           st.integers(-2 ** 70, -1), st.integers(UINT64_MAX + 1, 2 ** 70),
                           st.builds(Index, st.integers(-5, -1)), st.just(object()), st.lists(st.integers(), max_size=2))


@bounded
@given(value=not_an_address)
def test_an_address_refuses_everything_but_an_int_of_64_bits_or_none(value):
    refused(lambda: nccl.comm_count(value), "comm")
    refused(lambda: nccl.mem_free(value), "ptr")


@bounded
@given(value=st.one_of(not_an_address.filter(lambda v: not convertible(v, -2 ** 31, 2 ** 31 - 1)),
                       st.integers(2 ** 31, 2 ** 70),
                       st.integers(-2 ** 70, -2 ** 31 - 1), st.builds(Index, st.integers(2 ** 31, 2 ** 40)),
                       st.builds(lambda: nccl.nccl_config_initializer())))
def test_a_rank_count_refuses_what_is_no_int32_before_nccl(value):
    refused(lambda: nccl.comm_init_rank(value, bytes(128), 0), "nranks")


@bounded
@given(value=st.one_of(not_an_address, st.builds(lambda: nccl.nccl_config_initializer()), st.just(0),
                       st.just(None)))
def test_a_record_pointer_refuses_other_records_and_non_addresses(value):
    if value is None or value == 0:
        return  # a null simInfo reaches NCCL, which refuses it (test_raw_arguments)
    refused(lambda: nccl.group_simulate_end(value), "simInfo")
