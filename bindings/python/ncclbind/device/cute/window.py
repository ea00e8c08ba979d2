"""Window: a registered window (ncclWindow_t) as a CuTe kernel argument, and its pointers."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

import cutlass
import cutlass.cute as cute
from cutlass.cutlass_dsl import ir

from .._generated import cute as _d
from ...core.resources import RegisteredWindowHandle
from ...errors import NcclInvalid
from ..cute_ffi import Ptr
from .handles import MultimemHandle

if TYPE_CHECKING:
    from .comm import DevComm, Team
    from .types import CftLeInfo

__all__ = ["Window"]


class Window:
    """A registered window in a CuTe kernel: Window(resource) on the host (or the
    RegisteredWindowHandle itself, through its JIT adapter), its ncclWindow_t while tracing.
    Offsets are in bytes from the window's start."""

    def __init__(self, resource: RegisteredWindowHandle):
        if not isinstance(resource, RegisteredWindowHandle):
            raise NcclInvalid(f"resource: Window views an ncclbind RegisteredWindowHandle "
                              f"(Communicator.register_window), not {type(resource).__name__}", "resource")
        self._resource = resource
        self._handle = None  # the ncclWindow_t the launch copies, kept alive with this view
        self._ptr = None
        self._offsets: dict[int, tuple[Any, Any]] = {}

    def __c_pointers__(self) -> list[int]:
        if self._resource is None:
            raise NcclInvalid("Window: only a host Window is a kernel argument", "window")
        if not self._resource.is_valid:
            raise NcclInvalid("window: the RegisteredWindowHandle is closed (or was never filled)", "window")
        self._handle = ctypes.c_void_p(self._resource.handle)
        return [ctypes.addressof(self._handle)]

    @staticmethod
    def __get_mlir_types__() -> list[ir.Type]:
        return Ptr.__get_mlir_types__()

    def __extract_mlir_values__(self) -> list[ir.Value]:
        return [self.ptr]

    def __new_from_mlir_values__(self, values: list[ir.Value]) -> "Window":
        view = object.__new__(type(self))
        view._resource = None
        view._handle = None
        view._ptr = values[0]
        view._offsets = {}
        return view

    @property
    def ptr(self) -> ir.Value:
        """The ncclWindow_t while tracing."""
        if self._ptr is None:
            raise NcclInvalid("Window: its handle is read in a kernel being traced", "window")
        return self._ptr

    def local_pointer(self, offset: int) -> ir.Value:
        """This rank's address of byte `offset` (ncclGetLocalPointer)."""
        return _d.ncclGetLocalPointer(self.ptr, cutlass.Uint64(offset))

    def lsa_pointer(self, offset: int, peer: int) -> ir.Value:
        """LSA peer `peer`'s address of byte `offset` (ncclGetLsaPointer)."""
        return _d.ncclGetLsaPointer(self.ptr, cutlass.Uint64(offset), cutlass.Int32(peer))

    def peer_pointer(self, offset: int, peer: int, team: Team | None = None) -> ir.Value:
        """World rank `peer`'s address of byte `offset` (ncclGetPeerPointer), or, with `team`,
        that team's rank `peer`'s (ncclGetPeerPointerTeam)."""
        if team is None:
            return _d.ncclGetPeerPointer(self.ptr, cutlass.Uint64(offset), cutlass.Int32(peer))
        return _d.ncclGetPeerPointerTeam(self.ptr, cutlass.Uint64(offset), team, cutlass.Int32(peer))

    def multimem_pointer(self, offset: int, mm_handle: MultimemHandle) -> ir.Value:
        """The multicast address of byte `offset` through `mm_handle` (ncclGetMultimemPointer)."""
        return _d.ncclGetMultimemPointer(self.ptr, cutlass.Uint64(offset), mm_handle)

    def lsa_multimem_pointer(self, offset: int, dev_comm: DevComm) -> ir.Value:
        """The LSA team's multicast address of byte `offset` (ncclGetLsaMultimemPointer)."""
        return _d.ncclGetLsaMultimemPointer(self.ptr, cutlass.Uint64(offset), dev_comm.ptr)

    def cft_le_info(self, offset: int, peer_cft: int, cft_team: Team, dev_comm: DevComm) -> CftLeInfo:
        """The logical endpoint of `cft_team` rank `peer_cft` for byte `offset` (ncclGetCftLeInfo)."""
        from .comm import le_info
        return le_info(_d.ncclGetCftLeInfo, self.ptr, cutlass.Uint64(offset), cutlass.Int32(peer_cft), cft_team,
                       dev_comm.ptr)

    def peer_le_info(self, offset: int, peer: int, dev_comm: DevComm) -> CftLeInfo:
        """The logical endpoint of world rank `peer` (in the flat CFT team) for byte `offset`."""
        from .comm import le_info
        return le_info(_d.ncclGetPeerLeInfo, self.ptr, cutlass.Uint64(offset), cutlass.Int32(peer), dev_comm.ptr)

    def multimem_le_info(self, offset: int, dev_comm: DevComm) -> CftLeInfo:
        """The multicast logical endpoint of byte `offset` (ncclGetMultimemLeInfo)."""
        from .comm import le_info
        return le_info(_d.ncclGetMultimemLeInfo, self.ptr, cutlass.Uint64(offset), dev_comm.ptr)

    def tensor(self, dtype: Any, layout: Any, offset: int = 0) -> Any:
        """A cute.Tensor of `dtype` with `layout` over this rank's window from byte `offset`."""
        tensor = cute.make_tensor(cute.make_ptr(dtype, self.local_pointer(offset)), layout)
        # its offset, for the calls that take the window and the tensor (offset_of): computed here,
        # where the tensor is, rather than from the window's base at each call (after a barrier,
        # loads LLVM cannot hoist)
        self._offsets[id(tensor)] = (tensor, cutlass.Uint64(offset))
        return tensor

    def offset_of(self, tensor: Any) -> Any:
        """The byte offset of `tensor`'s first element in this window: the one tensor() was given,
        else its address less the window's local one."""
        made = self._offsets.get(id(tensor))
        if made is not None and made[0] is tensor:
            return made[1]
        base = cute.make_ptr(cutlass.Int8, self.local_pointer(0))
        return cutlass.Uint64(tensor.iterator.toint() - base.toint())


cutlass.register_jit_arg_adapter(RegisteredWindowHandle)(Window)
