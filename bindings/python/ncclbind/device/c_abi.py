"""The device API's C-ABI surface as Numba intrinsics, one per function of the IR's
device_functions (bindings/ir/api/nccl.json), named as in NCCL's nccl_device_wrapper.h:

    from ncclbind.device import c_abi
    c_abi.ncclCoopAnyInitWarp((coop_ptr,))      # arguments as one tuple

The signatures are the IR's: records by value (ncclCoopAny, ncclTeam, the handles) are
DeviceStruct values passed as the C ABI passes them (an aggregate .param), pointers and
ncclWindow_t are void pointers, enums and cuda::memory_order int32. Each call links the
release's wrapper into the kernel (linking: LTO-IR where nvJitLink can read nvcc's, else a
cubin); a kernel compiled with link-time optimization calls the wrapper's twin of the function
(linking.twin: instantiated for the kernel's stateless coop, or taking records by address), which
nvJitLink inlines. A function the release's wrapper lacks raises NcclSymbolNotFoundError when the
kernel is compiled, naming the release that has it.

Why not numba.cuda.declare_device(abi="c"): numba-cuda 0.30.4 declares a void C function as
returning a 64-bit value, and nvlink then refuses the link ("Prototype doesn't match"); an
intrinsic emits the exact prototype."""
from __future__ import annotations

import threading
import warnings
from typing import Any

from ..errors import NcclInvalid, NcclSymbolNotFoundError
from . import ir_tables, linking
from .numba_compat import LTOIR, Cubin, ExternalCodeLibrary, cgutils, cuda, intrinsic, ir, types
from .numba_types import DeviceStruct, SessionRef, dev_comm_type, device_struct, gin_type, target_version_code, window_type

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
    if kind == "enum" and size in (1, 2, 8):  # ncclGinResourceSharingMode (one byte)
        return getattr(types, f"uint{8 * size}"), ir.IntType(8 * size)
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
    from .wrapper_table import FUNCTIONS
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


class _WrapperUnit:
    """One unit of the release's wrapper, compiled when a kernel is first linked (on the GPU
    machine) for that GPU's compute capability; compiling a kernel to PTX alone never builds it."""

    def __init__(self, code: int, unit: str, build: Any):
        super().__init__(None, name=f"nccl_device_wrapper_{code}_{unit}")
        self._code, self._unit, self._build = code, unit, build
        self._bytes: bytes | None = None

    @property
    def data(self) -> Any:
        if self._bytes is None:
            cc = tuple(cuda.get_current_device().compute_capability)
            self._bytes = self._build(self._code, self._unit, cc)
        return self._bytes


class _LtoUnit(_WrapperUnit, LTOIR):
    """The unit as LTO-IR (linking.wrapper_ltoir): nvJitLink optimizes it with the kernel."""


class _CubinUnit(_WrapperUnit, Cubin):
    """The unit as a relocatable cubin (linking.wrapper_cubin): its functions stay calls."""


class NcclDeviceLinkWarning(UserWarning):
    """The device API's wrapper cannot be linked with link-time optimization (see linking.lto_available)."""


def _lto_form() -> bool:
    """Whether kernels compiled with LTO get the wrapper as LTO-IR; else (warned once) as cubins."""
    lto, why = linking.lto_available()
    if not lto and not _warned:
        _warned.append(why)
        warnings.warn(f"ncclbind.device links NCCL's device API into kernels as cubins, so every call of it stays a "
                      f"call (slower than CUDA C++): {why}", NcclDeviceLinkWarning, stacklevel=3)
    return lto


_warned: list[str] = []
_libraries: dict[tuple[int, int, str, bool], Any] = {}
_lock = threading.Lock()


def _wrapper_library(context: Any, code: int, name: str, lto: bool) -> Any:
    """The unit defining `name` as the kernel links it (linking.link_unit): LTO-IR for a kernel
    compiled with LTO (nvJitLink inlines it), a cubin of that function alone for one without
    (nvJitLink would otherwise compile every function of the unit's LTO-IR at each kernel load)."""
    unit = linking.link_unit(name, lto)
    key = (id(context.codegen()), code, unit, lto)
    with _lock:
        if key not in _libraries:
            library = ExternalCodeLibrary(f"nccl_device_wrapper_{code}_{unit}", context.codegen())
            library.add_linking_file(_LtoUnit(code, unit, linking.wrapper_ltoir) if lto else
                                     _CubinUnit(code, unit, linking.wrapper_cubin))
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


def coop_kind(init: str) -> str | None:
    """"Cta" for ncclCoopAnyInitCta: the coop a coop constructor with no other parameter makes
    (one that holds no state); None for the others (ncclCoopAnyInitLanes)."""
    return linking.coop_kind(init)


def emit(context: Any, builder: Any, name: str, code: int, values: list[Any], coop: str | None = None) -> Any:
    """At lowering: a call of the C-ABI function (LLVM values already of its parameter types),
    linking the release's wrapper into the kernel. `coop`: the stateless coop ("Cta") the call's
    coop, or its session, was made with (DeviceStruct.coop, SessionRef.coop).

    In a kernel compiled with link-time optimization (Numba's default where nvJitLink is) that
    gets the wrapper as LTO-IR (linking.lto_available), the call goes to the wrapper's twin where
    it has one (linking.twin): the function instantiated for `coop`, else for a record by value
    the by-reference twin; nvJitLink inlines either. Otherwise (compile_ptx, lto=False, the
    wrapper as cubins) it is the C-ABI function itself, whose records go by value."""
    result, params, result_ll, params_ll = signature(name, code)
    lto = _compiled_with_lto(context) and _lto_form()
    context.add_linking_libs([_wrapper_library(context, code, name, lto)])
    values = [builder.zext(v, ll) if p == types.boolean and v.type != ll else v
              for v, p, ll in zip(values, params, params_ll)]
    twin = linking.twin(code, _find(name)["name"], coop) if lto else None
    if twin is not None:
        return _emit_by_reference(context, builder, twin, result, params, result_ll, params_ll, values)
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(result_ll, params_ll), symbol(name))
    out = builder.call(fn, values)
    return context.get_dummy_value() if result == types.void else out


def _compiled_with_lto(context: Any) -> bool:
    # numba-cuda keeps the flag on the code library being lowered (CUDACodeLibrary._lto): on by
    # default when nvJitLink is there, off for compile_ptx.
    return bool(getattr(context.active_code_library, "_lto", False))


def _emit_by_reference(context: Any, builder: Any, twin: str, result: Any, params: list[Any], result_ll: Any,
                       params_ll: list[Any], values: list[Any]) -> Any:
    """twin(&result?, ..., &record, ...): each record argument from a copy in the kernel's frame
    (the twins' prototypes hold only pointers and scalars)."""
    pointer = ir.IntType(8).as_pointer()
    out = cgutils.alloca_once(builder, result_ll) if isinstance(result, DeviceStruct) else None
    args = [builder.bitcast(out, pointer)] if out is not None else []
    for value, param in zip(values, params):
        if isinstance(param, DeviceStruct):
            slot = cgutils.alloca_once(builder, value.type)
            builder.store(value, slot)
            value = builder.bitcast(slot, pointer)
        args.append(value)
    returns = ir.VoidType() if out is not None else result_ll
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(returns, [a.type for a in args]), twin)
    called = builder.call(fn, args)
    if out is not None:
        return builder.load(out)
    return context.get_dummy_value() if result == types.void else called


def _as_given(param: Any, given: Any) -> Any:
    """The type a tuple element keeps: a record or session as given (whichever coop it names)."""
    if isinstance(param, DeviceStruct) and param.same_record(given):
        return given
    if isinstance(param, SessionRef) and isinstance(given, SessionRef) and given.storage == param.storage:
        return given
    return param


def _call_coop(name: str, given: list[Any]) -> str | None:
    """The stateless coop a call is made for: its session's (whose class that coop's session is),
    else its coop's. A session made with one coop takes no other: NcclInvalid."""
    sessions = [g for g in given if isinstance(g, SessionRef)]
    coops = [g for g in given if isinstance(g, DeviceStruct) and g.layout.name == "ncclCoopAny"]
    if sessions:
        kind = sessions[0].coop
        for coop in coops:
            if kind is not None and coop.coop != kind:
                raise NcclInvalid(f"{name}: this session was made with the coop ncclCoop{kind}; call it with that "
                                  f"coop, not {coop}", "coop")
        return kind
    return coops[0].coop if coops else None


def _make(name: str) -> Any:
    @intrinsic
    def call(typingctx: Any, packed: Any) -> Any:
        code, result, params = typed(name)
        if not isinstance(packed, types.BaseTuple) or len(packed) != len(params):
            raise NcclInvalid(f"{name} takes its {len(params)} arguments as one tuple, not {packed}", name)
        given = list(packed)
        coop = _call_coop(name, given)
        sig = result(types.Tuple(tuple(_as_given(p, g) for p, g in zip(params, given))))

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            values = cgutils.unpack_tuple(builder, args[0]) if params else []
            return emit(context, builder, name, code, values, coop=coop)

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
