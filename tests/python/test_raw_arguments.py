"""The raw calls' argument conversions (bindings/python/src/arguments.c) refuse what
is not the parameter's kind with NcclInvalid naming the function and the argument,
before NCCL sees it: bools are not integers or addresses, an address to free is never
a buffer or a record, a record is accepted only where the IR says that record, and the
parameters conventions.toml lists as non_null refuse None and 0. Over the real libnccl:
an input that got through would reach it (and several would crash this process)."""
import inspect
import tomllib

import pytest

import ncclbind._nccl as nccl
from ncclbind.errors import NcclError, NcclInvalid
from conftest import ROOT, c_param

# policy/conventions.toml's addresses and non_null, as "function.parameter" (C names).
CONVENTIONS = tomllib.loads((ROOT / "policy" / "conventions.toml").read_text())
ADDRESSES = CONVENTIONS["addresses"]
NON_NULL = CONVENTIONS["non_null"]


def raw_call(api, where: str):
    """(the raw call, the parameter) of a conventions.toml entry "ncclFunction.param": the call's
    name is the function's snake_name in the merged IR."""
    c_name, param = where.split(".")
    fn = next(f for f in api["nccl"]["functions"] if f["name"] == c_name)
    assert param in [p["name"] for p in fn["params"]], f"{where}: {c_name} has no parameter {param}"
    return getattr(nccl, fn["snake_name"]), param


def _refused(call, argument: str, *words: str) -> str:
    with pytest.raises(NcclInvalid) as info:
        call()
    text = str(info.value)
    assert argument in text, text
    for word in words:
        assert word in text, text
    return text


@pytest.mark.parametrize("value", [True, False])
def test_a_bool_is_not_an_integer(value):
    _refused(lambda: nccl.get_error_string(value), c_param("ncclGetErrorString", 0), "bool")
    _refused(lambda: nccl.all_reduce(0, 0, value, 0, 0, 1, None), c_param("ncclAllReduce", 2), "bool")
    _refused(lambda: nccl.comm_init_rank(value, bytes(128), 0), c_param("ncclCommInitRank", 1), "bool")


@pytest.mark.parametrize("value", [True, False])
def test_a_bool_is_not_an_address(value):
    _refused(lambda: nccl.comm_count(value), "ncclCommCount: comm", "bool")
    _refused(lambda: nccl.comm_abort(value), "ncclCommAbort: comm", "bool")
    _refused(lambda: nccl.group_simulate_end(value), "simInfo", "bool")  # a record pointer
    _refused(lambda: nccl.all_reduce(value, 0, 1, 0, 0, 1, None), "sendbuff", "bool")  # memory


def test_integers_and_int_enums_still_convert():
    assert isinstance(nccl.get_error_string(0), str)
    assert isinstance(nccl.get_error_string(ncclbind_result_success()), str)
    with pytest.raises(NcclError) as info:  # converted, then refused by NCCL itself
        nccl.comm_count(None)
    assert not isinstance(info.value, NcclInvalid)


def ncclbind_result_success():
    from ncclbind.nccl_enums import NcclResult
    return NcclResult(0)


def test_a_record_is_not_an_address():
    record = nccl.nccl_config_initializer()
    _refused(lambda: nccl.comm_count(record), "ncclCommCount: comm", "ncclConfig_t")
    _refused(lambda: nccl.all_reduce(record, 0, 1, 0, 0, 1, None), "sendbuff", "record")


def test_a_record_pointer_takes_only_its_own_record():
    _refused(lambda: nccl.group_simulate_end(nccl.nccl_config_initializer()), "simInfo", "ncclSimInfo_t")
    with pytest.raises(NcclError) as info:  # the right record converts; NCCL refuses the call
        nccl.group_simulate_end(nccl.nccl_sim_info_initializer())
    assert not isinstance(info.value, NcclInvalid)


def test_the_conventions_name_parameters():
    """The lists the cases below run over hold entries: an empty one would make no case."""
    assert ADDRESSES and NON_NULL


@pytest.mark.parametrize("where", ADDRESSES)
def test_an_address_to_free_is_never_a_buffer_or_a_record(api, where):
    py, param = raw_call(api, where)
    names = list(inspect.signature(py).parameters)
    index, count = names.index(param), len(names)
    for bad in (bytearray(7), b"12345678", memoryview(bytearray(8)), nccl.nccl_config_initializer(), True, 1.0):
        args = [None] * count
        args[index] = bad
        _refused(lambda: py(*args), f": {param} must be an address")


@pytest.mark.parametrize("where", NON_NULL)
def test_a_non_null_parameter_refuses_none_and_zero(api, where):
    py, param = raw_call(api, where)
    names = list(inspect.signature(py).parameters)
    assert names.index(param) == 0, "the checks before it would need real arguments"
    for null in (None, 0):
        args = [None] * len(names)
        args[0] = null
        _refused(lambda: py(*args), f": {param} must not be None or 0")


def test_comm_shrink_of_none_is_refused_before_nccl():
    # libnccl 2.28.9 dereferences it: without the check this process dies
    _refused(lambda: nccl.comm_shrink(None, [], None, 0), "ncclCommShrink: comm", "None or 0")


# The same rules one layer up, where core/ took what it should not (issue 14).

@pytest.mark.parametrize("data", [128, True, "x" * 128, None.__class__])
def test_a_unique_id_is_made_from_bytes_only(data):
    from ncclbind import UniqueId
    with pytest.raises(NcclInvalid, match="unique id is 128 bytes"):
        UniqueId(data)
    assert UniqueId(bytearray(128)).to_bytes() == bytes(128)


@pytest.mark.parametrize("count", [1.5, True, "2"])
def test_a_memory_block_view_counts_in_ints(count):
    from ncclbind.core.memory import NcclMemoryBlock
    block = NcclMemoryBlock(4096, 64, 0)  # never freed: ptr is cleared below
    try:
        with pytest.raises(NcclInvalid, match="count"):
            block.as_buffer("float32", count)
        assert block.as_buffer("float32", 3).count == 3
    finally:
        block.ptr = 0


@pytest.mark.parametrize("device", ["x", True, -1, 1.0])
def test_communicator_init_refuses_a_device_that_is_no_ordinal(device):
    from ncclbind import Communicator, UniqueId
    with pytest.raises(NcclInvalid, match="device"):
        Communicator.init(1, 0, UniqueId(bytes(128)), device=device)


def test_text_that_is_not_unicode_is_refused_naming_the_argument():
    """A lone surrogate has no UTF-8 to pass as a const char *: NcclInvalid naming the argument,
    raised while the arguments are read (before any library is asked for the function)."""
    _refused(lambda: nccl.param_bind("\ud800"), c_param("ncclParamBind", 1), "not valid Unicode")
