"""The device API's C-ABI surface as Numba intrinsics, one per function of the IR's
device_functions (bindings/ir/api/nccl.json), named as in NCCL's nccl_device_wrapper.h:

    from ncclbind.device import c_abi
    c_abi.ncclCoopAnyInitWarp((coop_ptr,))      # arguments as one tuple

The signatures are the IR's: records by value (ncclCoopAny, ncclTeam, the handles) are
DeviceStruct values passed as the C ABI passes them (an aggregate .param), pointers and
ncclWindow_t are void pointers, enums and cuda::memory_order int32. Each call links the
release's wrapper (linking.wrapper_cubin) into the kernel. A function the release's wrapper lacks
raises NcclSymbolNotFoundError when the kernel is compiled, naming the release that has it.

Why not numba.cuda.declare_device(abi="c"): numba-cuda 0.30.4 declares a void C function as
returning a 64-bit value, and nvlink then refuses the link ("Prototype doesn't match"); an
intrinsic emits the exact prototype."""
from __future__ import annotations

import threading
from typing import Any

from ..errors import NcclInvalid, NcclSymbolNotFoundError
from . import ir_tables, linking
from .numba_compat import Cubin, ExternalCodeLibrary, cgutils, cuda, intrinsic, ir, types
from .numba_types import SessionRef, dev_comm_type, device_struct, gin_type, target_version_code, window_type

__all__ = ["function_names", "symbol", "signature", "require", "typed", "emit"]


def _find(name: str) -> dict[str, Any]:
    for fn in ir_tables.api()["device_functions"]:
        if fn["name"] == name:
            return fn
    raise NcclInvalid(f"{name} is not a function of the device API's C ABI", "name")


def _numba_type(t: dict[str, Any], code: int) -> tuple[Any, Any]:
    """(Numba type, LLVM type) of one IR type at the C ABI."""
    kind, size = t["kind"], t.get("size", 0)
    if kind == "void":
        return types.void, ir.VoidType()
    if kind == "bool":
        return types.boolean, ir.IntType(8)
    if kind == "int":
        return getattr(types, ("int" if t.get("signed") else "uint") + str(8 * size)), ir.IntType(8 * size)
    if kind in ("enum", "external") and size == 4:  # ncclGinFenceLevel, cuda::memory_order
        return types.int32, ir.IntType(32)
    if kind == "typedef" and t.get("name") == "ncclWindow_t":
        return window_type, ir.IntType(8).as_pointer()
    if kind == "typedef" and size in (1, 2, 4, 8):  # ncclGinSignal_t, ncclGinCounter_t, ncclResult_t
        return getattr(types, f"uint{8 * size}"), ir.IntType(8 * size)
    if kind == "pointer":
        pointee = t.get("pointee", {}).get("name", "")
        if pointee == "ncclDevComm_t":
            return dev_comm_type, ir.IntType(8).as_pointer()
        if pointee == "ncclGin_C":
            return gin_type, ir.IntType(8).as_pointer()
        if pointee.endswith("Session_C"):
            return SessionRef(pointee), ir.IntType(8).as_pointer()
        return types.voidptr, ir.IntType(8).as_pointer()
    if kind == "record":
        struct = device_struct(t["name"], code)
        return struct, struct.llvm_type()
    raise NcclInvalid(f"the device C ABI has a type ncclbind.device cannot pass: {t}", "type")


def symbol(name: str) -> str:
    """The symbol the wrapper defines for C-ABI function `name`: the name itself, or for a function
    NCCL's headers define inline (header_inline: ncclGinPut_v2) the prefixed one (nb_ncclGinPut_v2)."""
    from .._generated.device_wrapper import FUNCTIONS
    _find(name)
    return FUNCTIONS[name]["symbol"]


def signature(name: str, nccl_version: int | None = None) -> tuple[Any, list[Any], Any, list[Any]]:
    """(result, [parameters]) of a C-ABI function as Numba types, then as LLVM types."""
    fn = _find(name)
    code = nccl_version if nccl_version is not None else target_version_code()
    result, result_ll = _numba_type(fn["result"], code)
    params = [_numba_type(p["type"], code) for p in fn.get("params", ())]
    return result, [p[0] for p in params], result_ll, [p[1] for p in params]


def require(name: str, code: int) -> None:
    """NcclSymbolNotFoundError unless the release's wrapper defines `name` (part C's table, from
    the IR), e.g. "ncclLsaReduceSum_F32 needs NCCL >= 2.29.7; loaded 2.28.9"."""
    from . import cuda_source
    try:
        cuda_source.require_function(name, code)
    except ImportError:
        # Without the generated wrapper table, the IR's own release list says where it is declared.
        fn = _find(name)
        version = ir_tables.header_set_for(code)
        if version not in fn.get("versions", ()):
            raise NcclSymbolNotFoundError(f"{name} needs NCCL >= {fn.get('since')}; loaded "
                                          f"{ir_tables.version_text(code)}", function=name) from None


class _WrapperUnit(Cubin):
    """One unit of the release's wrapper (linking.wrapper_cubin), compiled when a kernel is first
    linked (on the GPU machine), for that GPU's compute capability; compiling a kernel to PTX
    alone never builds it."""

    def __init__(self, code: int, unit: str):
        super().__init__(None, name=f"nccl_device_wrapper_{code}_{unit}")
        self._code, self._unit = code, unit
        self._cubin: bytes | None = None

    @property
    def data(self) -> Any:
        if self._cubin is None:
            cc = tuple(cuda.get_current_device().compute_capability)
            self._cubin = linking.wrapper_cubin(self._code, self._unit, cc)
        return self._cubin


_libraries: dict[tuple[int, int, str], Any] = {}
_lock = threading.Lock()


def _wrapper_library(context: Any, code: int, name: str) -> Any:
    unit = linking.unit_of(name)
    key = (id(context.codegen()), code, unit)
    with _lock:
        if key not in _libraries:
            library = ExternalCodeLibrary(f"nccl_device_wrapper_{code}_{unit}", context.codegen())
            library.add_linking_file(_WrapperUnit(code, unit))
            _libraries[key] = library
        return _libraries[key]


_compiled_for: list[int] = []


def typed(name: str) -> tuple[int, Any, list[Any]]:
    """At typing: the target release, and the function's result and parameter Numba types;
    NcclSymbolNotFoundError when that release's wrapper lacks it. Numba caches what it typed, so
    one process compiles kernels for one release only: another one is refused."""
    code = target_version_code()
    with _lock:
        if not _compiled_for:
            _compiled_for.append(code)
    if _compiled_for[0] != code:
        raise NcclInvalid(f"this process compiled device-API kernels for NCCL {ir_tables.version_text(_compiled_for[0])}; "
                          f"compiling for {ir_tables.version_text(code)} needs another process", "nccl_version")
    require(name, code)
    result, params, _, _ = signature(name, code)
    return code, result, params


def emit(context: Any, builder: Any, name: str, code: int, values: list[Any]) -> Any:
    """At lowering: a call of the C-ABI function (LLVM values already of its parameter types),
    linking the release's wrapper into the kernel."""
    result, params, result_ll, params_ll = signature(name, code)
    context.add_linking_libs([_wrapper_library(context, code, name)])
    values = [builder.zext(v, ll) if p == types.boolean and v.type != ll else v
              for v, p, ll in zip(values, params, params_ll)]
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(result_ll, params_ll), symbol(name))
    out = builder.call(fn, values)
    return context.get_dummy_value() if result == types.void else out


def _make(name: str) -> Any:
    @intrinsic
    def call(typingctx: Any, packed: Any) -> Any:
        code, result, params = typed(name)
        if not isinstance(packed, types.BaseTuple) or len(packed) != len(params):
            raise NcclInvalid(f"{name} takes its {len(params)} arguments as one tuple, not {packed}", name)
        sig = result(types.Tuple(params) if params else types.Tuple(()))

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            values = cgutils.unpack_tuple(builder, args[0]) if params else []
            return emit(context, builder, name, code, values)

        return sig, codegen

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"{_find(name).get('doc') or name} (C ABI: {name}, arguments as one tuple)"
    return call


def function_names() -> list[str]:
    """Every C-ABI function of the IR, sorted."""
    return sorted(fn["name"] for fn in ir_tables.api()["device_functions"])


for _name in function_names():
    globals()[_name] = _make(_name)
    __all__.append(_name)
del _name
