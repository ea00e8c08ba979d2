"""Enums: every value of the headers, open to values they do not name, and
NcclDataType's conversions (the one place NCCL data types are mapped)."""
import pickle

import numpy as np
import pytest

from ncclbind import errors, nccl_enums, nccl_ep_enums
from ncclbind.nccl_enums import NcclDataType, NcclGinType, NcclRedOp, NcclResult


def enum_classes(module):
    return {cls.__doc__.split("Mirror of ")[1].split(" ")[0]: cls
            for cls in vars(module).values()
            # defined in the generated module that the public one re-exports (ncclbind._generated.nccl_enums)
            if isinstance(cls, type) and issubclass(cls, int)
            and cls.__module__.rsplit(".", 1)[-1] == module.__name__.rsplit(".", 1)[-1]
            and "Mirror of " in (cls.__doc__ or "")}  # not python_api.toml's flag groups


def test_every_header_enumerator_is_a_member(ir):
    for name, data in ir.items():
        module = nccl_ep_enums if data["library"] == "nccl_ep" else nccl_enums
        classes = enum_classes(module)
        for enum in data["enums"]:
            if enum["name"].startswith("anon_enum_") or enum.get("dummy"):
                continue
            cls = classes[enum["name"]]
            bits = (1 << (8 * enum["size"])) - 1  # an older signed enum's -2 is a newer unsigned one's 0xff..fe
            values = {int(m) & bits for m in cls}
            for v in enum["values"]:
                if not v.get("sentinel"):
                    assert v["value"] & bits in values, f"{name}: {enum['name']}.{v['name']}"


def test_member_names_drop_the_enum_name():
    assert NcclDataType.FLOAT32 == 7 and NcclDataType.BFLOAT16 == 9
    assert NcclDataType.CHAR is NcclDataType.INT8  # ncclChar is an alias of ncclInt8
    assert NcclRedOp.SUM == 0 and NcclRedOp.AVG == 4
    assert NcclResult.INVALID_USAGE == 5
    assert NcclGinType.PROXY == 2 and NcclGinType.GDAKI == 3


def test_unknown_values_become_pseudo_members():
    code = NcclResult(99)  # a newer library's result code
    assert isinstance(code, NcclResult) and code == 99 and not code.known
    assert code.name == "UNKNOWN_99"
    assert NcclResult(99) is code
    op = NcclRedOp(5)  # what ncclRedOpCreatePreMulSum returns first
    assert op == 5 and op is NcclRedOp(5)
    assert NcclRedOp.SUM.known
    assert list(NcclResult).count(code) == 0  # members stay as declared
    with pytest.raises(ValueError):
        NcclRedOp("sum")


@pytest.mark.parametrize("value", [2 ** 31, -2 ** 31 - 1, 2 ** 70])
def test_a_value_no_c_enum_can_hold_is_refused(value):
    """A C enum is an int: NcclDataType(2**70) became a pseudo-member that no call can pass."""
    from ncclbind.errors import NcclInvalid
    with pytest.raises(NcclInvalid, match="32-bit int"):
        NcclRedOp(value)
    assert NcclRedOp(2 ** 31 - 1).name == f"UNKNOWN_{2 ** 31 - 1}"


def test_enums_pickle():
    assert pickle.loads(pickle.dumps(NcclDataType.FLOAT16)) is NcclDataType.FLOAT16


def test_constants(api):
    import ncclbind._nccl as nccl
    assert nccl.NCCL_WIN_COLL_SYMMETRIC == nccl_enums.NCCL_WIN_COLL_SYMMETRIC == 1
    assert nccl.NCCL_UNDEF_FLOAT == -1.0 and nccl.NCCL_SUFFIX == ""
    assert nccl_ep_enums.NCCL_EP_MAGIC == 0xC00FFFEE
    assert nccl_enums.NCCL_SPLIT_NOCOLOR == -1
    assert nccl_enums.NCCL_UNIQUE_ID_BYTES == 128
    assert nccl_enums.NCCL_COMM_NULL is None
    assert nccl_enums.HEADER_VERSIONS == tuple(api["nccl"]["versions"])
    assert nccl_ep_enums.HEADER_VERSIONS == tuple(api["nccl_ep"]["versions"])


@pytest.mark.parametrize("dtype, member", [
    (np.float32, "FLOAT32"), (np.dtype("float16"), "FLOAT16"), (np.int8, "INT8"), (np.uint64, "UINT64"),
    ("bfloat16", "BFLOAT16"), ("float8_e4m3fn", "FLOAT8E4M3"), ("e5m2", "FLOAT8E5M2"), ("torch.float64", "FLOAT64"),
    ((2, 32, 1), "FLOAT32"), ((4, 16, 1), "BFLOAT16"), ((10, 8, 1), "FLOAT8E4M3"), ((12, 8, 1), "FLOAT8E5M2"),
    (NcclDataType.INT64, "INT64"), (3, "UINT32"),
])
def test_from_dtype(dtype, member):
    assert NcclDataType.from_dtype(dtype) is NcclDataType[member]


def test_nccl4py_spellings_of_the_conversions():
    """nccl4py: NcclDataType("float32") and NcclDataType(np.float32) construct, from_numpy_dtype
    and numpy_dtype convert; an int stays an (open) value, a type NCCL lacks is NcclInvalid."""
    assert NcclDataType("float32") is NcclDataType(np.float32) is NcclDataType.FLOAT32
    assert NcclDataType(np.dtype("int64")) is NcclDataType.from_numpy_dtype(np.int64) is NcclDataType.INT64
    assert NcclDataType(7) is NcclDataType.FLOAT32 and NcclDataType(99).name == "UNKNOWN_99"
    assert NcclDataType.FLOAT64.numpy_dtype == np.dtype("float64")
    with pytest.raises(errors.NcclInvalid, match="datatype"):
        NcclDataType("complex32")
    with pytest.raises(errors.NcclInvalid, match="dtype"):
        NcclDataType.from_numpy_dtype(np.complex64)


def test_nccl_invalid_takes_nccl4pys_msg():
    e = errors.NcclInvalid(msg="bad count")
    assert str(e) == "bad count" and e.argument is None and isinstance(e, ValueError)


def test_from_typestr_and_back():
    assert NcclDataType.from_typestr("<f4") is NcclDataType.FLOAT32
    assert NcclDataType.from_typestr("|u1") is NcclDataType.UINT8
    names = {"INT8", "UINT8", "INT32", "UINT32", "INT64", "UINT64", "FLOAT16", "FLOAT32", "FLOAT64", "BFLOAT16",
             "FLOAT8E4M3", "FLOAT8E5M2"}
    assert names <= set(NcclDataType.__members__)
    for member in (NcclDataType[name] for name in names):
        assert NcclDataType.from_dtype(member.to_dlpack()) is member
        assert NcclDataType.from_dtype(member.dtype_name) is member
        if member.dtype_name in ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
                                 "float64"):
            assert member.to_numpy() == np.dtype(member.dtype_name)
            assert member.itemsize == np.dtype(member.dtype_name).itemsize


@pytest.mark.parametrize("dtype", [np.complex64, np.bool_, "int16", (5, 64, 1), (2, 32, 4), np.dtype(">f4")])
def test_dtypes_nccl_lacks_are_rejected_with_the_argument(dtype):
    with pytest.raises(errors.NcclInvalid) as info:
        NcclDataType.from_dtype(dtype, "sendbuf")
    assert info.value.argument == "sendbuf"
    assert "sendbuf" in str(info.value) and "has no NCCL data type" in str(info.value)


def test_torch_dtypes():
    torch = pytest.importorskip("torch")
    pairs = {torch.float32: "FLOAT32", torch.bfloat16: "BFLOAT16", torch.float16: "FLOAT16", torch.int64: "INT64",
             torch.uint8: "UINT8", torch.float8_e4m3fn: "FLOAT8E4M3", torch.float8_e5m2: "FLOAT8E5M2"}
    for dtype, member in pairs.items():
        assert NcclDataType.from_dtype(dtype) is NcclDataType[member]
        assert NcclDataType[member].to_torch() is dtype
    with pytest.raises(errors.NcclInvalid):
        NcclDataType.from_dtype(torch.bool)


def test_cupy_dtypes():
    cupy = pytest.importorskip("cupy")
    assert NcclDataType.from_dtype(cupy.float32) is NcclDataType.FLOAT32
    assert NcclDataType.FLOAT64.to_cupy() == cupy.dtype("float64")


def test_ml_dtypes_bfloat16_and_fp8():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert NcclDataType.from_dtype(np.dtype(ml_dtypes.bfloat16)) is NcclDataType.BFLOAT16
    assert NcclDataType.from_dtype(ml_dtypes.float8_e4m3fn) is NcclDataType.FLOAT8E4M3
    assert NcclDataType.BFLOAT16.to_numpy() == np.dtype(ml_dtypes.bfloat16)
