"""Cooperative groups (ncclCoopAny): which threads take part in a device call.

`cta()`, `warp()`, `thread()`, `lanes(mask)` and `warp_span(warp0, n_warps, id)` make a Coop
whose ncclCoopAny lives on the kernel's stack (the IR's size for the release); calls that take a
coop by value get its address (the byval pointer the C ABI has). A stateless coop (cta, warp,
thread) links each call's twin for it from ncclbind's wrapper (ncclbind.device.cute_ffi)."""
from __future__ import annotations

from typing import Any

import cutlass

from .._generated import cute as _d
from ..base.cute_abi import PtrView
from .. import linking
from ..cute_ffi import entry_alloca, record_layout

__all__ = ["Coop", "cta", "warp", "thread", "lanes", "warp_span"]


class Coop(PtrView):
    """An ncclCoopAny, by its address on the kernel's stack; `coop_kind` is its stateless kind
    (Cta, Warp, Thread: calls made with it link the wrapper's twin for that coop, as NCCL's C++
    kernels are compiled), None for lanes and warp spans (NCCL's ncclCoopAny calls)."""

    @property
    def thread_rank(self) -> cutlass.Int32:
        """This thread's index in the group."""
        return cutlass.Int32(_d.ncclCoopThreadRank(self))

    @property
    def size(self) -> cutlass.Int32:
        """The number of threads in the group."""
        return cutlass.Int32(_d.ncclCoopSize(self))

    @property
    def num_threads(self) -> cutlass.Int32:
        """The number of threads the group spans (a lanes group: the warp's)."""
        return cutlass.Int32(_d.ncclCoopNumThreads(self))

    def sync(self) -> None:
        """Synchronize the group's threads."""
        _d.ncclCoopSync(self)


def _storage():
    layout = record_layout("ncclCoopAny")
    return entry_alloca(layout.size, layout.align)


def _stateless(init: Any) -> Coop:
    ptr = _storage()
    init(ptr)
    return Coop(ptr=ptr, coop_kind=linking.coop_kind(init.name))


def cta() -> Coop:
    """Every thread of the CTA."""
    return _stateless(_d.ncclCoopAnyInitCta)


def warp() -> Coop:
    """The calling warp."""
    return _stateless(_d.ncclCoopAnyInitWarp)


def thread() -> Coop:
    """The calling thread alone."""
    return _stateless(_d.ncclCoopAnyInitThread)


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
