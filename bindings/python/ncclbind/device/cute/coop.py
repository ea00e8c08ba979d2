"""Cooperative groups (ncclCoopAny): which threads take part in a device call.

`cta()`, `warp()`, `thread()`, `lanes(mask)` and `warp_span(warp0, n_warps, id)` make a Coop
whose ncclCoopAny lives on the kernel's stack (the IR's size for the release); calls that take a
coop by value get its address (the byval pointer the C ABI has)."""
from __future__ import annotations

import cutlass
import cutlass.cute as cute

from ..._generated import cute_device as _d
from ..cute_ffi import Ptr, alloca, record_layout

__all__ = ["Coop", "cta", "warp", "thread", "lanes", "warp_span"]


@cute.native_struct
class Coop:
    """An ncclCoopAny, by its address on the kernel's stack."""

    ptr: Ptr

    @property
    def thread_rank(self) -> cutlass.Int32:
        """This thread's index in the group."""
        return cutlass.Int32(_d.ncclCoopThreadRank(self.ptr))

    @property
    def size(self) -> cutlass.Int32:
        """The number of threads in the group."""
        return cutlass.Int32(_d.ncclCoopSize(self.ptr))

    @property
    def num_threads(self) -> cutlass.Int32:
        """The number of threads the group spans (a lanes group: the warp's)."""
        return cutlass.Int32(_d.ncclCoopNumThreads(self.ptr))

    def sync(self) -> None:
        """Synchronize the group's threads."""
        _d.ncclCoopSync(self.ptr)


def _storage():
    layout = record_layout("ncclCoopAny")
    return alloca(layout.size, layout.align)


def cta() -> Coop:
    """Every thread of the CTA."""
    ptr = _storage()
    _d.ncclCoopAnyInitCta(ptr)
    return Coop(ptr=ptr)


def warp() -> Coop:
    """The calling warp."""
    ptr = _storage()
    _d.ncclCoopAnyInitWarp(ptr)
    return Coop(ptr=ptr)


def thread() -> Coop:
    """The calling thread alone."""
    ptr = _storage()
    _d.ncclCoopAnyInitThread(ptr)
    return Coop(ptr=ptr)


def lanes(lane_mask: int) -> Coop:
    """The lanes of the calling warp set in the 32-bit `lane_mask`."""
    ptr = _storage()
    _d.ncclCoopAnyInitLanes(ptr, cutlass.Uint32(lane_mask))
    return Coop(ptr=ptr)


def warp_span(warp0: int, n_warps: int, id: int) -> Coop:
    """`n_warps` consecutive warps from warp `warp0`; `id` (0-15) tells concurrent spans apart."""
    ptr = _storage()
    _d.ncclCoopAnyInitWarpSpan(ptr, cutlass.Int32(warp0), cutlass.Int32(n_warps), cutlass.Int32(id))
    return Coop(ptr=ptr)
