"""Errors: NCCL's real result codes through the real libnccl (2.28.9 from
CUDA_HOME here), the runtime's own failures, NcclInvalid for arguments
rejected before NCCL is called, and pickling of all of them."""
import pickle

import pytest

import ncclbind
import ncclbind._nccl as nccl
from ncclbind import errors
from ncclbind.errors import NcclError, NcclInvalid
from conftest import c_param


def test_a_real_nccl_error_carries_code_name_and_last_error():
    with pytest.raises(errors.NcclInvalidArgumentError) as info:
        nccl.comm_count(None)  # NCCL checks the NULL communicator itself
    e = info.value
    assert isinstance(e, NcclError)
    assert (e.code, e.name, e.function) == (4, "ncclInvalidArgument", "ncclCommCount")
    assert "comm argument is NULL" in e.last_error
    assert "ncclCommCount failed: ncclInvalidArgument" in str(e)
    assert e.description.startswith("invalid argument")


def test_communicator_init_without_a_gpu_fails_with_nccls_error(has_gpu):
    if has_gpu:
        pytest.skip("a GPU is visible: init would succeed")
    with pytest.raises(NcclError) as info:
        ncclbind.Communicator.init(1, 0, ncclbind.get_unique_id())
    e = info.value
    assert type(e) is errors.NcclUnhandledCudaError and e.code == 1
    assert e.function == "ncclCommInitRank"
    assert "CUDA driver" in e.last_error or "cuda" in e.last_error.lower()


def test_a_subclass_per_result_code():
    for member in ncclbind.NcclResult:
        if member == 0 or member.name.startswith("NUM"):
            continue
        cls = type(errors.error_for_result(int(member), "ncclX", "", "", ""))
        assert cls is not NcclError and cls.code == member, member


def test_unknown_and_runtime_codes():
    e = errors.error_for_result(77, "ncclX", "unknown result code 77", "unknown result code 77", "")
    assert type(e) is NcclError and e.code == 77
    e = errors.error_for_result(errors.SYMBOL_NOT_FOUND, "ncclX", "", "", "ncclX is not in the loaded libnccl")
    assert isinstance(e, errors.NcclSymbolNotFoundError) and isinstance(e, NotImplementedError)
    assert str(e) == "ncclX is not in the loaded libnccl"
    assert nccl.result_name(nccl.ERROR_LIBRARY_NOT_FOUND) == "NCCLBIND_ERROR_LIBRARY_NOT_FOUND"
    assert nccl.result_name(5) == "ncclInvalidUsage"


@pytest.mark.parametrize("call, argument", [
    (lambda: nccl.all_reduce(0, 0, -1, 7, 0, 0, 0), c_param("ncclAllReduce", 2)),
    (lambda: nccl.all_reduce("0", 0, 1, 7, 0, 0, 0), c_param("ncclAllReduce", 0)),
    (lambda: nccl.all_reduce(0, 0, 1, 2 ** 40, 0, 0, 0), c_param("ncclAllReduce", 3)),
    (lambda: nccl.all_reduce(0, 0, 1, 7, 0, 0, 1.5), c_param("ncclAllReduce", 6)),
    (lambda: nccl.comm_init_rank(1, b"too short", 0), c_param("ncclCommInitRank", 2)),
    (lambda: nccl.comm_init_all([0, "x"]), c_param("ncclCommInitAll", 2)),
])
def test_arguments_are_checked_before_nccl_is_called(call, argument):
    with pytest.raises(NcclInvalid) as info:
        call()
    assert info.value.argument == argument
    assert argument in str(info.value)
    assert isinstance(info.value, ValueError)


def test_wrong_argument_count_is_a_type_error():
    with pytest.raises(TypeError):
        nccl.all_reduce(0, 0)


@pytest.mark.parametrize("exc", [
    NcclInvalid("sendbuf: host memory", "sendbuf", "ncclAllReduce"),
    errors.error_for_result(4, "ncclCommCount", "ncclInvalidArgument", "invalid argument", "comm is NULL"),
    errors.error_for_result(errors.LIBRARY_NOT_FOUND, "ncclGetVersion", "", "", "libnccl could not be loaded"),
])
def test_errors_pickle_with_their_attributes(exc):
    copy = pickle.loads(pickle.dumps(exc))
    assert type(copy) is type(exc)
    assert str(copy) == str(exc)
    for attribute in ("code", "name", "function", "description", "last_error"):
        assert getattr(copy, attribute) == getattr(exc, attribute)
    if isinstance(exc, NcclInvalid):
        assert copy.argument == exc.argument


def test_last_error_texts():
    with pytest.raises(NcclError):
        nccl.comm_count(None)
    assert "NULL" in nccl.nccl_last_error()


def test_the_runtime_names_a_missing_function_the_loaded_release_and_the_first_that_has_it(ir):
    """For every function the IR says the loaded libnccl lacks (and whose zero arguments pass
    the argument checks): the call raises, and nccl.last_error() says the same - also for the
    functions that return no ncclResult_t (void, a value, a team record), which the runtime's
    error reports instead."""
    loaded = ncclbind.version_code()
    sets = sorted((s for s in ir.values() if s["library"] == "nccl"), key=lambda s: s["version_code"])
    loaded_set = next((s for s in sets if s["version_code"] == loaded), None)
    if loaded_set is None:
        pytest.skip(f"the loaded libnccl ({loaded}) is not one of the header sets")
    present = {f["name"] for f in loaded_set["functions"]}
    first_release = {}
    for s in sets:
        for f in s["functions"]:
            first_release.setdefault(f["name"], (s["version"], f))
    reached = []
    for c_name, (release, function) in first_release.items():
        call = getattr(nccl, function["snake_name"], None)
        if c_name in present or call is None:
            continue
        inputs = [p for p in function.get("params", []) if p["direction"] == "in"]
        try:
            call(*[0] * len(inputs))
        except (NcclInvalid, TypeError):
            continue  # the zeros were refused before the loader was asked: not this test's subject
        except errors.NcclSymbolNotFoundError as e:
            assert str(e) == nccl.last_error()
            assert nccl.last_error_code() == nccl.ERROR_SYMBOL_NOT_FOUND
            assert nccl.last_error().startswith(f"{c_name} is not in the loaded libnccl {loaded_set['version']}")
            assert nccl.last_error().endswith(f"it first appears in NCCL {release}")
            reached.append(c_name)
            continue
        pytest.fail(f"{c_name} ({release}) was called on libnccl {loaded} without NcclSymbolNotFoundError")
    assert reached, "no function that the loaded libnccl lacks reached the loader"
    without_result = [n for n in reached if first_release[n][1]["result"].get("name") != "ncclResult_t"]
    if loaded_set is not sets[-1]:
        assert without_result, "no function without an ncclResult_t was among them"
