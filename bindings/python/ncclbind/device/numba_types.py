"""The Numba types of ncclbind.device's kernel-side values.

DeviceStruct: a device API record held by value (ncclTeam, ncclLsaBarrierHandle,
ncclGinBarrierHandle, ncclMultimemHandle, ncclCoopAny, ncclGin_C), its size and alignment read
from the IR of the release a kernel is compiled for (layouts.record_layout). Its LLVM value is
an array of integers as wide as its alignment, so the C ABI passes it as NCCL's C++ does: one
`.param .align A .b8 p[size]`. Fields that are integers, bools or pointers read as attributes
(team.nRanks), at the IR's offsets.

DevCommRef, WindowRef, GinRef, SessionRef: pointers (to the kernel argument holding the
ncclDevComm, a registered window, an ncclGin_C or a session's storage in the thread's stack)."""
from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any, Iterator

from ..errors import NcclInvalid
from . import ir_tables, layouts
from .numba_compat import cgutils, intrinsic, ir, models, overload_attribute, register_model, types

__all__ = ["DeviceStruct", "DevCommRef", "WindowRef", "GinRef", "SessionRef", "device_struct", "target_version_code",
           "use_nccl_version", "dev_comm_ref", "window_ref"]

_target = threading.local()


def target_version_code() -> int:
    """The NCCL release kernels are compiled for: use_nccl_version's, else the loaded libnccl's."""
    code = getattr(_target, "code", None)
    if code is None:
        from .cuda_source import nccl_version_code
        code = nccl_version_code(None)
    return code


@contextlib.contextmanager
def use_nccl_version(nccl_version: int | str) -> Iterator[int]:
    """Compile kernels in this block for another release's layouts and C-ABI functions (a
    kernel compiled to PTX here, to run with that release elsewhere). One release per process:
    Numba keeps what it typed, so c_abi refuses a second one."""
    from .cuda_source import nccl_version_code
    code = nccl_version_code(nccl_version)
    ir_tables.header_set_for(code)  # a release without a device API is refused here
    before = getattr(_target, "code", None)
    _target.code = code
    try:
        yield code
    finally:
        _target.code = before


class DeviceStruct(types.Type):
    """A device API record by value, in one header set's layout. An ncclCoopAny made by
    coop_cta(), coop_warp() or coop_thread() also names that coop (`coop`: "Cta", "Warp",
    "Thread"), which holds no state: the kernel knows it when compiled, and calls the wrapper's
    functions instantiated for it (c_abi)."""

    def __init__(self, layout: layouts.RecordLayout, coop: str | None = None):
        self.layout = layout
        self.coop = coop
        super().__init__(name=f"{layout.name}[{layout.header_set}]" + (f"<{coop}>" if coop else ""))

    def same_record(self, other: Any) -> bool:
        """Whether `other` is this record in this layout (whatever coop it names)."""
        return isinstance(other, DeviceStruct) and (other.layout.name, other.layout.header_set) == (
            self.layout.name, self.layout.header_set)

    def llvm_type(self) -> Any:
        unit = self.layout.align
        return ir.ArrayType(ir.IntType(8 * unit), self.layout.size // unit)


@functools.lru_cache(maxsize=None)
def _device_struct(name: str, code: int, coop: str | None) -> DeviceStruct:
    return DeviceStruct(layouts.record_layout(name, code), coop)


def device_struct(name: str, code: int | None = None, coop: str | None = None) -> DeviceStruct:
    """The DeviceStruct of record `name` (ncclTeam or ncclTeam_t) for a release (default: the
    target); `coop` names the stateless coop an ncclCoopAny holds (DeviceStruct.coop)."""
    return _device_struct(name, target_version_code() if code is None else code, coop)


@register_model(DeviceStruct)
class _DeviceStructModel(models.PrimitiveModel):
    def __init__(self, dmm: Any, fe_type: DeviceStruct):
        super().__init__(dmm, fe_type, fe_type.llvm_type())


class DevCommRef(types.Type):
    """A pointer to an ncclDevComm in device memory (the kernel argument of ncclbind.device.kernel_arg)."""

    def __init__(self) -> None:
        super().__init__(name="ncclDevCommRef")


class WindowRef(types.Type):
    """An ncclWindow_t: the device handle of a registered window."""

    def __init__(self) -> None:
        super().__init__(name="ncclWindowRef")


class GinRef(types.Type):
    """A pointer to an ncclGin_C (a GIN context of a DevComm) in the thread's stack."""

    def __init__(self) -> None:
        super().__init__(name="ncclGinRef")


class SessionRef(types.Type):
    """A pointer to a C-ABI session's storage (ncclLsaBarrierSession_C & co.) and which one it
    is; `coop` names the stateless coop it was made with (DeviceStruct.coop), whose session class
    it then holds: every call on it takes a coop of that kind."""

    def __init__(self, storage: str, coop: str | None = None):
        self.storage = storage
        self.coop = coop
        super().__init__(name=f"{storage}Ref" + (f"<{coop}>" if coop else ""))


for _cls in (DevCommRef, WindowRef, GinRef, SessionRef):
    register_model(_cls)(models.OpaqueModel)  # an i8*
del _cls

dev_comm_type = DevCommRef()
window_type = WindowRef()
gin_type = GinRef()


def _field_types(f: layouts.FieldLayout) -> tuple[Any, Any] | None:
    if f.kind in ("int", "enum", "typedef") and f.size in (1, 2, 4, 8):
        return getattr(types, ("int" if f.signed else "uint") + str(8 * f.size)), ir.IntType(8 * f.size)
    if f.kind == "bool":
        return types.boolean, ir.IntType(8)
    if f.kind == "pointer" and f.size == 8:
        return types.uint64, ir.IntType(64)
    return None


def _reader(struct: DeviceStruct, f: layouts.FieldLayout) -> Any:
    numba_type, llvm_type = _field_types(f)

    @intrinsic
    def read(typingctx: Any, value: Any) -> Any:
        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            slot = cgutils.alloca_once(builder, struct.llvm_type())
            builder.store(args[0], slot)
            raw = builder.gep(builder.bitcast(slot, ir.IntType(8).as_pointer()), [ir.Constant(ir.IntType(64), f.offset)])
            out = builder.load(builder.bitcast(raw, llvm_type.as_pointer()))
            return builder.icmp_unsigned("!=", out, ir.Constant(llvm_type, 0)) if numba_type == types.boolean else out
        return numba_type(value), codegen

    return read


def _register_field(attr: str) -> None:
    @overload_attribute(DeviceStruct, attr, target="cuda", inline="always")
    def _get(value):
        if not isinstance(value, DeviceStruct):
            return None
        fields = [f for f in value.layout.fields if f.name == attr and _field_types(f) is not None]
        if not fields:
            return None
        read = _reader(value, fields[0])
        return lambda value: read(value)


# Every scalar field name of the records a kernel holds, in any header set (an attribute a
# release's layout lacks is a typing error for that release).
for _version in ir_tables.header_set_versions():
    for _record in ir_tables.header_set(_version)["records"]:
        if any(_record["name"] in (n, n + "_t") or _record.get("tag") == n for n in layouts.MIRRORED_RECORDS):
            for _f in _record["fields"]:
                if _f["type"]["kind"] in ("int", "enum", "typedef", "bool", "pointer"):
                    _register_field(_f["name"])
del _version, _record, _f


@intrinsic
def dev_comm_ref(typingctx: Any, array: Any) -> Any:
    """The DevCommRef of a kernel argument made by ncclbind.device.kernel_arg(dev_comm)."""
    if not isinstance(array, types.Array) or array.dtype != types.uint8:
        raise NcclInvalid(f"dev_comm must be the uint8 device array of ncclbind.device.kernel_arg(dev_comm), "
                          f"not {array}", "dev_comm")

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        return builder.bitcast(data, ir.IntType(8).as_pointer())
    return dev_comm_type(array), codegen


@intrinsic
def window_ref(typingctx: Any, handle: Any) -> Any:
    """The WindowRef of an ncclWindow_t passed as an integer (ncclbind.device.kernel_arg(window))."""
    if not isinstance(handle, types.Integer):
        raise NcclInvalid(f"window must be the integer of ncclbind.device.kernel_arg(window), not {handle}", "window")

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], ir.IntType(8).as_pointer())
    return window_type(handle), codegen
