"""NcclDataType to and from NumPy, torch, CuPy and DLPack dtypes, array-interface
type strings and names, by the table policy/vocabulary.toml states once
(rendered into ncclbind/_generated/vocabulary.py).

NcclDataType (generated in ncclbind.nccl_enums) takes DataTypeConversions as
a mixin, so the conversions read NcclDataType.from_dtype(x), dt.to_torch().
Nothing here imports numpy, torch or cupy; each is used only if the caller
already handed us one of its objects (or asks for one of its dtypes).
"""
from __future__ import annotations

import sys

from .._generated.vocabulary import DATA_TYPES

# From policy/vocabulary.toml (the one statement of NCCL's data types, rendered into
# _generated/vocabulary.py): ncclDataType_t value -> (canonical name, itemsize). The canonical
# name is NumPy's dtype name (ml_dtypes' for bfloat16 and the fp8 types) and torch's dtype name.
_BY_VALUE = {value: (name, size) for value, name, size, *_ in DATA_TYPES}
_VALUE_OF_NAME = {name: value for value, name, *_ in DATA_TYPES}
# Other spellings of the same types (C's, nccl-tests', short forms) -> the canonical name.
_ALIASES = {alias: name for _, name, _, aliases, nccl_tests, _, _ in DATA_TYPES
            for alias in (*aliases, *((nccl_tests,) if nccl_tests and nccl_tests != name else ()))}
# DLPack (type code, bits) -> canonical name (lanes must be 1).
_DLPACK = {dlpack: name for _, name, _, _, _, dlpack, _ in DATA_TYPES}
# Array-interface typestr without the byte order -> canonical name (NumPy's own types).
_TYPESTR = {typestr: name for _, name, _, _, _, _, typestr in DATA_TYPES if typestr}

# Complex types NCCL has no data type for: each is carried as pairs of its real
# part's type (interleaved real and imaginary), which sum and avg reduce exactly.
_COMPLEX = {"complex64": "float32", "complex128": "float64"}
_COMPLEX_ALIASES = {"cfloat": "complex64", "cdouble": "complex128"}
_COMPLEX_DLPACK = {(5, 64): "complex64", (5, 128): "complex128"}
_COMPLEX_TYPESTR = {"c8": "complex64", "c16": "complex128"}
# The ops whose result on the (real, imaginary) pairs is the complex result.
_COMPLEX_OPS = ("SUM", "AVG")

_cache: dict = {}  # dtype object -> NcclDataType, filled as dtypes are seen


def _unsupported(dtype, argument: str | None):
    from ..errors import NcclInvalid
    where = f"{argument}: " if argument else ""
    supported = ", ".join(name for name, _ in _BY_VALUE.values())
    if complex_part_type(dtype) is not None:
        return NcclInvalid(f"{where}dtype {dtype!s} has no NCCL data type; complex buffers are passed to "
                           f"collectives as they are (NCCL has {supported})", argument)
    return NcclInvalid(f"{where}dtype {dtype!s} has no NCCL data type (NCCL has {supported})", argument)


def complex_part_type(dtype):
    """The NcclDataType of a complex dtype's real and imaginary parts (FLOAT32
    for complex64, FLOAT64 for complex128), or None when `dtype` is not complex.
    Takes what NcclDataType.from_dtype takes, and array-interface typestrs ("<c8")."""
    if isinstance(dtype, str) and len(dtype) >= 3 and dtype[0] in "<|=" and dtype[1:] in _COMPLEX_TYPESTR:
        name = _COMPLEX_TYPESTR[dtype[1:]]
    else:
        try:
            name = _name_of(dtype)
        except TypeError:
            return None
    part = _COMPLEX.get(name) if name else None
    if part is None:
        return None
    from ..nccl_enums import NcclDataType
    return NcclDataType(_VALUE_OF_NAME[part])


def check_op_for_complex(buffer, op, argument: str = "op") -> None:
    """Raise NcclInvalid naming `argument` when `buffer` (an NcclBuffer) is
    complex and `op` is not sum or avg: NCCL reduces a complex buffer as pairs of
    reals, which is the complex result only for those two. `op` is what the
    caller was given (an NcclRedOp, its int, a name such as "max", a CustomRedOp)
    or its resolved int value; call it before NCCL is called."""
    if not buffer.complex:
        return
    from ..errors import NcclInvalid
    from ..nccl_enums import NcclRedOp
    if isinstance(op, str):
        name = op.upper()
    elif isinstance(op, int) and not isinstance(op, bool):
        name = next((member.name for member in NcclRedOp if member.value == op), f"{op}")
    else:
        name = type(op).__name__
    if name in _COMPLEX_OPS:
        return
    raise NcclInvalid(f"{argument}: {name.lower()} on {buffer.complex_dtype_name} data; NCCL reduces complex "
                      "numbers as pairs of reals, which is exact for only sum and avg", argument)


def _name_of(dtype) -> str | None:
    """The canonical name of a dtype-like object, or None."""
    if isinstance(dtype, str):
        name = dtype.lower().removeprefix("torch.").removeprefix("numpy.")
        return _ALIASES.get(name) or _COMPLEX_ALIASES.get(name, name)
    module = type(dtype).__module__
    if module.startswith("torch"):  # torch.dtype: str() is "torch.float32"
        return str(dtype).removeprefix("torch.")
    if isinstance(dtype, tuple) and len(dtype) == 3:  # DLPack (code, bits, lanes)
        code, bits, lanes = dtype
        return (_DLPACK.get((code, bits)) or _COMPLEX_DLPACK.get((code, bits))) if lanes == 1 else None
    if isinstance(dtype, type):  # numpy.float32, ml_dtypes.bfloat16, cupy.float32 (numpy's)
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            try:
                dtype = numpy.dtype(dtype)
            except TypeError:
                return None
        else:
            return None
    name = getattr(dtype, "name", None)  # numpy.dtype (CuPy uses numpy dtypes)
    byteorder = getattr(dtype, "byteorder", "=")
    if isinstance(name, str) and byteorder in ("=", "|", "<"):
        return name
    return None


class DataTypeConversions:
    """Conversions of NcclDataType (a mixin of the generated enum)."""

    __slots__ = ()

    @classmethod
    def _missing_(cls, value):
        """NcclDataType("float32"), NcclDataType(numpy.float32), NcclDataType(torch.bfloat16):
        any dtype-like from_dtype takes (nccl4py's constructor); an unknown int stays open."""
        if isinstance(value, int) and not isinstance(value, bool):
            return super()._missing_(value)
        return cls.from_dtype(value, "datatype")

    @classmethod
    def from_numpy_dtype(cls, dtype):
        """The NcclDataType of a numpy.dtype or scalar type (nccl4py's name for from_dtype)."""
        return cls.from_dtype(dtype, "dtype")

    @property
    def numpy_dtype(self):
        """The numpy.dtype of this type (nccl4py's name for to_numpy())."""
        return self.to_numpy()

    @classmethod
    def from_dtype(cls, dtype, argument: str | None = None):
        """The NcclDataType of a NumPy/CuPy dtype, a torch dtype, a scalar type
        (numpy.float32), a name ("bfloat16"), a DLPack (code, bits, lanes) or an
        NcclDataType/int. Raises NcclInvalid naming `argument` if NCCL lacks it."""
        if isinstance(dtype, cls):
            return dtype
        try:
            return _cache[dtype]
        except (KeyError, TypeError):
            pass
        if isinstance(dtype, int) and not isinstance(dtype, bool):
            return cls(dtype)
        name = _name_of(dtype)
        value = _VALUE_OF_NAME.get(name) if name else None
        if value is None:
            raise _unsupported(dtype, argument)
        result = cls(value)
        try:
            _cache[dtype] = result
        except TypeError:
            pass
        return result

    @classmethod
    def from_typestr(cls, typestr: str, argument: str | None = None):
        """The NcclDataType of an __array_interface__ / __cuda_array_interface__ typestr ("<f4")."""
        if len(typestr) >= 3 and typestr[0] in "<|=" and typestr[1:] in _TYPESTR:
            return cls(_VALUE_OF_NAME[_TYPESTR[typestr[1:]]])
        raise _unsupported(typestr, argument)

    def _mapping(self) -> tuple[str, int]:
        mapping = _BY_VALUE.get(int(self))
        if mapping is None:  # a value newer than this binding's table (or a count)
            raise _unsupported(f"{type(self).__name__}.{self.name}", None)
        return mapping

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self._mapping()[1]

    @property
    def dtype_name(self) -> str:
        """NumPy's / torch's name of the type ("float32", "bfloat16", "float8_e4m3fn")."""
        return self._mapping()[0]

    def to_numpy(self):
        """The numpy.dtype (bfloat16 and fp8 through ml_dtypes, which must be installed)."""
        import numpy
        name = self.dtype_name
        try:
            return numpy.dtype(name)
        except TypeError:
            import ml_dtypes  # registers bfloat16 and the fp8 types with NumPy
            return numpy.dtype(getattr(ml_dtypes, name))

    def to_cupy(self):
        """The dtype CuPy uses: a numpy.dtype."""
        return self.to_numpy()

    def to_torch(self):
        """The torch.dtype."""
        import torch
        dtype = getattr(torch, self.dtype_name, None)
        if dtype is None:
            raise _unsupported(self.dtype_name, None)
        return dtype

    def to_dlpack(self) -> tuple[int, int, int]:
        """DLPack's (type code, bits, lanes)."""
        name = self.dtype_name
        return next(key for key, value in _DLPACK.items() if value == name) + (1,)
