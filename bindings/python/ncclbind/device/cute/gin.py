"""Gin: GPU-initiated networking (ncclGin_C) from a CuTe kernel. Made by DevComm.gin.

Data moves between windows: `put` and `get` take cute.Tensor views made by Window.tensor, and
the byte offsets and size come from the tensors (their addresses less the window's local one,
their element count times the element width). A machine without a GIN backend (one host, or no
GIN-capable network) has no GIN context: ncclbind.device.gin_context refuses that on the host,
before any launch."""
from __future__ import annotations

from typing import Any

import cutlass
import cutlass.cute as cute

from .._generated import cute as _d
from cutlass.cutlass_dsl import ir

from ..cute_ffi import Ptr, load, record_layout, to_ptr
from .types import MemoryOrder, ThreadScope

__all__ = ["Gin"]

ncclTeam = _d.ncclTeam
ncclCoopAny = Any  # a Coop (ncclCoopAny by its address)


def _offset(window: Any, tensor: Any) -> Any:
    """The byte offset of `tensor`'s first element in `window` (Window.offset_of)."""
    return window.offset_of(tensor)


def _bytes(tensor: Any) -> Any:
    return cutlass.Uint64((tensor.element_type.width // 8) * cute.size(tensor))


@cute.native_struct
class Gin:
    """An ncclGin_C, by its address on the kernel's stack."""

    ptr: Ptr

    def put(self, team: ncclTeam, peer: int, dst_win, dst, src_win, src, coop: ncclCoopAny, *,
            is_signal: bool = False, signal_id: int = 0, signal_op: int = 0, signal_op_arg: int = 0,
            is_counter: bool = False, counter_id: int = 0, is_descriptor: bool = False, descriptor_ptr=0,
            given_release: ThreadScope = ThreadScope.THREAD, required_release: ThreadScope = ThreadScope.DEVICE,
            opt_flags: int = 0) -> None:
        """Puts tensor `src` (in `src_win`) into tensor `dst` of `dst_win` on `team` rank `peer`
        (ncclGinPut_v2); then, if asked, applies `signal_op` to signal `signal_id` there and
        counts completion on local counter `counter_id`."""
        _d.ncclGinPut_v2(self.ptr, team, peer, dst_win.ptr, _offset(dst_win, dst), src_win.ptr, _offset(src_win, src),
                         _bytes(dst), is_signal, signal_id, signal_op, signal_op_arg, is_counter, counter_id, coop,
                         is_descriptor, to_ptr(descriptor_ptr, "descriptor_ptr"), int(given_release),
                         int(required_release), opt_flags)

    def put_value(self, team: ncclTeam, peer: int, dst_win, dst, value: int, coop: ncclCoopAny, *,
                  is_signal: bool = False, signal_id: int = 0, signal_op: int = 0, signal_op_arg: int = 0,
                  is_descriptor: bool = False, descriptor_ptr=0, given_release: ThreadScope = ThreadScope.THREAD,
                  required_release: ThreadScope = ThreadScope.DEVICE, opt_flags: int = 0) -> None:
        """Puts `value`, as wide as `dst`'s element, at tensor `dst` of `dst_win` on `team` rank
        `peer` (ncclGinPutValue_v2)."""
        _d.ncclGinPutValue_v2(self.ptr, team, peer, dst_win.ptr, _offset(dst_win, dst), value,
                              cutlass.Uint64(dst.element_type.width // 8), is_signal, signal_id, signal_op,
                              signal_op_arg, coop, is_descriptor, to_ptr(descriptor_ptr, "descriptor_ptr"),
                              int(given_release), int(required_release), opt_flags)

    def get(self, team: ncclTeam, peer: int, remote_win, remote, local_win, local, coop: ncclCoopAny, *,
            is_descriptor: bool = False, descriptor_ptr=0, opt_flags: int = 0) -> None:
        """Gets tensor `remote` of `remote_win` on `team` rank `peer` into tensor `local` of
        `local_win` (ncclGinGet)."""
        _d.ncclGinGet(self.ptr, team, peer, remote_win.ptr, _offset(remote_win, remote), local_win.ptr,
                      _offset(local_win, local), _bytes(local), coop, is_descriptor,
                      to_ptr(descriptor_ptr, "descriptor_ptr"), opt_flags)

    def signal(self, team: ncclTeam, peer: int, is_signal: bool, signal_id: int, signal_op: int, signal_op_arg: int,
               coop: ncclCoopAny, *, is_descriptor: bool = False, descriptor_ptr=0,
               given_release: ThreadScope = ThreadScope.THREAD, required_release: ThreadScope = ThreadScope.DEVICE,
               opt_flags: int = 0) -> None:
        """Applies `signal_op` with `signal_op_arg` to signal `signal_id` of `team` rank `peer`,
        after this rank's earlier puts to it (ncclGinSignal_v2)."""
        _d.ncclGinSignal_v2(self.ptr, team, peer, is_signal, signal_id, signal_op, signal_op_arg, coop, is_descriptor,
                            to_ptr(descriptor_ptr, "descriptor_ptr"), int(given_release), int(required_release),
                            opt_flags)

    def read_signal(self, *, signal: int = 0, bits: int = 64, ord: MemoryOrder = MemoryOrder.ACQUIRE) -> cutlass.Int64:
        """The value of local signal `signal` (its low `bits` bits)."""
        return cutlass.Int64(_d.ncclGinReadSignal(self.ptr, signal, bits, int(ord)))

    def wait_signal(self, coop: ncclCoopAny, *, signal: int = 0, least: int = 1, bits: int = 64,
                    ord: MemoryOrder = MemoryOrder.ACQUIRE) -> None:
        """Waits until local signal `signal` is at least `least`."""
        _d.ncclGinWaitSignal(self.ptr, coop, signal, least, bits, int(ord))

    def read_counter(self, *, counter: int = 0, bits: int = 56,
                     ord: MemoryOrder = MemoryOrder.ACQUIRE) -> cutlass.Int64:
        """The value of local counter `counter` (its low `bits` bits)."""
        return cutlass.Int64(_d.ncclGinReadCounter(self.ptr, counter, bits, int(ord)))

    def wait_counter(self, coop: ncclCoopAny, *, counter: int = 0, least: int = 1, bits: int = 56,
                     ord: MemoryOrder = MemoryOrder.ACQUIRE) -> None:
        """Waits until local counter `counter` is at least `least`."""
        _d.ncclGinWaitCounter(self.ptr, coop, counter, least, bits, int(ord))

    def reset_counter(self, *, counter: int) -> None:
        """Sets local counter `counter` to 0."""
        _d.ncclGinResetCounter(self.ptr, counter)

    def reset_signal(self, *, signal: int) -> None:
        """Sets local signal `signal` to 0."""
        _d.ncclGinResetSignal(self.ptr, signal)

    def signal_shadow_pointer(self, *, signal: int = 0) -> cute.Pointer:
        """The address of local signal `signal`'s shadow (a Uint64 cute pointer)."""
        return cute.make_ptr(cutlass.Uint64, _d.ncclGinGetSignalShadowPtr(self.ptr, signal))

    def flush(self, coop: ncclCoopAny, ord: MemoryOrder = MemoryOrder.ACQUIRE) -> None:
        """Waits until this context's earlier puts and gets have left the local buffers."""
        _d.ncclGinFlush(self.ptr, coop, int(ord))

    def value(self, *, loc=None, ip=None) -> Any:
        """The ncclGin_C record by value (the release's size, as 8-byte words)."""
        layout = record_layout("ncclGin_C")
        return load(ir.Type.parse(f"!llvm.array<{-(-layout.size // 8)} x i64>"), self.ptr, loc=loc, ip=ip)
