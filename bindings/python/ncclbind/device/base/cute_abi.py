"""The floor of the generated CuTe DSL declarations (ncclbind/device/_generated/cute.py): the
types their prototypes use, the decorator that makes each stub a DeviceFunction, and the MLIR
helpers the views of ncclbind.device.cute share. Which bitcode defines a function (and whether
the loaded release has it) is the linker's, which ncclbind.device.cute_ffi registers
(set_linker) when ncclbind.device.cute is imported; this layer knows no release.

Records passed by value go as a pointer to a copy (`ByVal`): that is the prototype clang gives
them on NVPTX (a byval pointer), so LLVM inlines the call."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import cutlass
import cutlass.cute as cute
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import dsl_user_op, ir

from ...errors import NcclInvalid

__all__ = ["Ptr", "ByVal", "Bytes", "DeviceFunction", "PtrView", "device_function", "set_linker", "to_ptr", "by_value",
           "entry_alloca", "entry_block", "store", "load"]

_PTR = "!llvm.ptr"


class Ptr:
    """A C pointer (and a C++ reference): `!llvm.ptr`."""

    @staticmethod
    def mlir_type() -> ir.Type:
        return ir.Type.parse(_PTR)

    @staticmethod
    def __get_mlir_types__() -> list[ir.Type]:
        return [ir.Type.parse(_PTR)]

    @classmethod
    def isinstance(cls, value: Any) -> bool:
        return isinstance(value, ir.Value) and value.type == cls.mlir_type()


class ByVal(Ptr):
    """A record passed by value: the address of a copy (clang's byval pointer on NVPTX)."""


@functools.lru_cache(maxsize=None)
def Bytes(n: int) -> type:
    """`!llvm.array<n x i8>`: padding and opaque storage in a record."""
    return type(f"Bytes{n}", (), {"mlir_type": staticmethod(lambda: ir.Type.parse(f"!llvm.array<{n} x i8>"))})


# ---- the release and its bitcode ------------------------------------------------------------

_linker: Callable[[str, str | None], tuple[Any, str]] | None = None


def set_linker(linker: Callable[[str, str | None], tuple[Any, str]]) -> None:
    """linker(name, coop_kind) -> (the bitcode file defining C-ABI function `name` (for a
    stateless coop kind, its twin for that coop where there is one) for the release kernels are
    compiled for, the symbol it has there); it raises NcclSymbolNotFoundError when the release
    lacks the function."""
    global _linker
    _linker = linker


class DeviceFunction:
    """One C-ABI function as CuTe kernels call it (the generated stub gives its prototype)."""

    def __init__(self, stub, since: str):
        self.stub = stub
        self.name = stub.__name__
        self.since = since
        self.parameters = list(inspect.signature(stub).parameters.values())
        self._externs: dict[tuple[str, str], Any] = {}
        functools.update_wrapper(self, stub)

    def __call__(self, *args: Any, coop_kind: str | None = None) -> Any:
        """The call, linked for the coop kind of its coop argument (a PtrView's `kind`: a stateless
        coop, Cta, Warp or Thread), or `coop_kind` (a session's, for calls that take none)."""
        if len(args) != len(self.parameters):
            raise NcclInvalid(f"{self.name} takes {len(self.parameters)} arguments "
                              f"({', '.join(p.name for p in self.parameters)}), not {len(args)}", "args")
        if _linker is None:
            raise NcclInvalid(f"{self.name}: import ncclbind.device.cute first (it says which bitcode links)",
                              "ncclbind.device.cute")
        kinds = {a.coop_kind for a in args if isinstance(a, PtrView) and a.coop_kind}
        if coop_kind:
            kinds.add(coop_kind)
        if len(kinds) > 1:
            raise NcclInvalid(f"{self.name}: its coop and session were made for different coops "
                              f"({', '.join(sorted(kinds))})", "coop")
        path, symbol = _linker(self.name, next(iter(kinds), None))
        extern = self._externs.get((str(path), symbol))
        if extern is None:
            extern = cute.extern(name=symbol, source=cute.BitCode(str(path)))(self.stub)
            self._externs[(str(path), symbol)] = extern
        return extern(*(_coerce(self.name, p, a) for p, a in zip(self.parameters, args)))

    def __repr__(self) -> str:
        return f"<CuTe device function {self.name} (NCCL >= {self.since})>"


class PtrView:
    """A device record a kernel holds by its address on the stack (a Coop, a session), and, for a
    stateless coop, its kind ("Cta", "Warp", "Thread"; None for the others): calls made with it
    link the wrapper's twin for that coop. A kernel argument or a value a loop carries keeps both."""

    def __init__(self, ptr: Any = None, coop_kind: str | None = None):
        self.ptr = ptr
        self.coop_kind = coop_kind

    def __get_mlir_types__(self) -> list[ir.Type]:
        return [ir.Type.parse(_PTR)]

    def __extract_mlir_values__(self) -> list[Any]:
        return [self.ptr]

    def __new_from_mlir_values__(self, values: list[Any]) -> Any:
        view = object.__new__(type(self))
        PtrView.__init__(view, values[0], self.coop_kind)
        return view


def device_function(*, since: str):
    """Declares a generated stub a device function of the C ABI, first in release `since`."""
    return lambda stub: DeviceFunction(stub, since)


def _coerce(function: str, parameter: inspect.Parameter, value: Any) -> Any:
    kind = parameter.annotation
    if kind is ByVal:
        return by_value(value, f"{function}({parameter.name})")
    if kind is Ptr:
        return to_ptr(value, f"{function}({parameter.name})")
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except Exception as e:  # noqa: BLE001 - say which argument
        raise NcclInvalid(f"{function}({parameter.name}): a {kind.__name__} (C: its prototype's type), "
                          f"not {value!r}: {e}", parameter.name) from None


# ---- MLIR helpers ---------------------------------------------------------------------------

def entry_block() -> ir.Block:
    """The entry block of the device function being traced (where allocas belong: LLVM promotes
    only those, and one outside it grows the stack at every pass of a loop)."""
    op = ir.InsertionPoint.current.block.owner
    while op is not None:
        parent = op.parent
        if parent is not None and parent.name == "gpu.module" and op.regions and op.regions[0].blocks:
            return op.regions[0].blocks[0]
        op = parent
    raise NcclInvalid("ncclbind.device.cute: called outside a CuTe kernel being traced", "kernel")


@dsl_user_op
def entry_alloca(size: int, align: int, *, loc=None, ip=None) -> ir.Value:
    """`size` bytes aligned to `align` on the kernel's stack, allocated in its entry block."""
    words = max(1, -(-size // 8)) if align >= 8 else size
    element = ir.IntegerType.get_signless(64 if align >= 8 else 8)
    with ir.InsertionPoint.at_block_begin(entry_block()):
        return llvm.alloca(res=ir.Type.parse(_PTR), array_size=cutlass.Int32(1).ir_value(),
                           elem_type=llvm.ArrayType.get(element, words), alignment=align, loc=loc)


@dsl_user_op
def store(value: ir.Value, ptr: ir.Value, *, loc=None, ip=None) -> None:
    llvm.store(value, ptr, loc=loc, ip=ip)


@dsl_user_op
def load(element: ir.Type, ptr: ir.Value, offset: int = 0, *, loc=None, ip=None) -> ir.Value:
    """The `element` at byte `offset` of `ptr`."""
    if offset:
        ptr = llvm.getelementptr(ir.Type.parse(_PTR), ptr, [], [offset], ir.IntegerType.get_signless(8),
                                 no_wrap_flags="None", loc=loc, ip=ip)
    return llvm.load(element, ptr, loc=loc, ip=ip)


@dsl_user_op
def to_ptr(value: Any, what: str = "pointer", *, loc=None, ip=None) -> ir.Value:
    """An address as `!llvm.ptr`: an `!llvm.ptr` value, a view with `.ptr`, a cute pointer
    (`.toint()`), an integer value or a Python int (0: null)."""
    if Ptr.isinstance(value):
        return value
    if hasattr(value, "ptr") and Ptr.isinstance(getattr(value, "ptr")):
        return value.ptr
    if hasattr(value, "toint"):
        value = value.toint()
    if isinstance(value, bool):
        raise NcclInvalid(f"{what}: an address, not {value!r}", what)
    if isinstance(value, int):
        value = cutlass.Int64(value)
    if hasattr(value, "ir_value"):
        value = value.ir_value()
    if isinstance(value, ir.Value) and isinstance(value.type, ir.IntegerType):
        return llvm.inttoptr(res=ir.Type.parse(_PTR), arg=value, loc=loc, ip=ip)
    raise NcclInvalid(f"{what}: an address (a pointer value, a cute pointer or an int), not {value!r}", what)


def by_value(value: Any, what: str) -> ir.Value:
    """The address of a copy of a record value (a generated native struct, a view over one such
    as Team or a barrier handle, or its `!llvm.struct` value); a view that already holds its
    record in memory (Coop) passes its address."""
    if Ptr.isinstance(value):
        return value
    if hasattr(value, "ptr") and Ptr.isinstance(getattr(value, "ptr")):
        return value.ptr
    if hasattr(value, "value") and hasattr(value.value, "__extract_mlir_values__"):
        value = value.value
    if hasattr(value, "__extract_mlir_values__"):
        values = value.__extract_mlir_values__()
        if len(values) != 1:
            raise NcclInvalid(f"{what}: a record value, not {value!r}", what)
        value = values[0]
    if not isinstance(value, ir.Value) or not isinstance(value.type, llvm.StructType):
        raise NcclInvalid(f"{what}: a record (a Team, a barrier or multimem handle), not {value!r}", what)
    size, align = _struct_size(value.type)
    ptr = entry_alloca(size, align)
    store(value, ptr)
    return ptr


def _struct_size(struct: Any) -> tuple[int, int]:
    """(size, alignment) of a literal LLVM struct of integers, pointers, byte arrays and such
    structs, as NVPTX lays it out (natural alignment)."""
    size, align = 0, 1
    for t in struct.body:
        if isinstance(t, llvm.StructType):
            s, a = _struct_size(t)
        elif isinstance(t, ir.IntegerType):
            s = a = max(1, t.width // 8)
        elif str(t) == _PTR:
            s = a = 8
        elif str(t).startswith("!llvm.array<"):
            n, element = str(t)[len("!llvm.array<"):-1].split(" x ")
            if element != "i8":
                raise NcclInvalid(f"record field {t}: only byte arrays are laid out here", "record")
            s, a = int(n), 1
        else:
            raise NcclInvalid(f"record field {t}: not laid out here", "record")
        size = -(-size // a) * a + s
        align = max(align, a)
    return -(-size // align) * align, align
