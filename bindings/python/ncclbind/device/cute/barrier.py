"""Barrier sessions: LSA (memory shared over NVLink / peer access), GIN (network) and hybrid (an
LSA stage inside a GIN stage).

A session's storage (ncclLsaBarrierSession_C & co.) is reserved on the kernel's stack with the
IR's size for the release (its device_storage), in the entry block: no call to ask the size.
Every thread of the session's coop calls `destroy()` once after its last operation, from uniform
control flow; that makes its handle and index safe to reuse."""
from __future__ import annotations

from typing import Any


from .._generated import cute as _d
from ...errors import NcclInvalid
from .. import capabilities, layouts
from ..base.cute_abi import PtrView
from ..cute_ffi import entry_alloca, target_release, to_ptr
from .comm import DevComm
from .gin import Gin
from .handles import GinBarrierHandle, LsaBarrierHandle, MultimemHandle
from .types import GinFenceLevel, MemoryOrder

__all__ = ["LsaBarrierSession", "GinBarrierSession", "BarrierSession", "GIN_ALL_CONTEXTS", "lsa_session",
           "gin_session", "hybrid_session", "lsa_default", "world_gin", "rail_gin", "world_hybrid"]

ncclTeam = _d.ncclTeam
ncclCoopAny = Any  # a Coop


def _storage(name: str) -> Any:
    layout = layouts.storage_layout(name, target_release())
    return entry_alloca(layout.size, layout.align)


def _kind(coop: Any) -> str | None:
    """The session's coop kind: its init, and then every call on it, link the twins for that coop
    (the C++ session is a template of the coop: one kind throughout)."""
    return coop.coop_kind if isinstance(coop, PtrView) else None


def _multimem(multimem: bool, mm_handle: MultimemHandle | None, what: str) -> Any:
    """The multimem handle a session init takes: `mm_handle`, or a null one without multimem."""
    if mm_handle is not None:
        return mm_handle
    if multimem:
        raise NcclInvalid(f"{what}: multimem=True needs the team's multimem handle (DevComm.lsa_multimem for LSA)",
                          what)
    return _d.ncclMultimemHandle(mcBasePtr=to_ptr(0))


class LsaBarrierSession(PtrView):
    """An LSA barrier session (ncclLsaBarrierSession_C), by its address. Made by lsa_session or
    lsa_default."""

    def arrive(self, coop: ncclCoopAny, order: MemoryOrder) -> None:
        """This rank's arrival (publishes its earlier writes with `order`)."""
        _d.ncclLsaBarrierSessionArrive(self.ptr, coop, int(order), coop_kind=self.coop_kind)

    def wait(self, coop: ncclCoopAny, order: MemoryOrder) -> None:
        """Waits for every team rank's arrival."""
        _d.ncclLsaBarrierSessionWait(self.ptr, coop, int(order), coop_kind=self.coop_kind)

    def sync(self, coop: ncclCoopAny, order: MemoryOrder) -> None:
        """arrive, then wait."""
        _d.ncclLsaBarrierSessionSync(self.ptr, coop, int(order), coop_kind=self.coop_kind)

    def destroy(self) -> None:
        """Ends the session (every thread of its coop, once)."""
        _d.ncclLsaBarrierSessionDestroy(self.ptr, coop_kind=self.coop_kind)


def lsa_session(coop: ncclCoopAny, dev_comm: DevComm, team: ncclTeam, handle: LsaBarrierHandle, index: int, *,
                multimem: bool = False, mm_handle: MultimemHandle | None = None) -> LsaBarrierSession:
    """An LSA barrier session over `team` with barrier `index` of `handle`; multimem=True arrives
    with multicast stores through `mm_handle`."""
    if multimem:
        dev_comm._require(capabilities.require_multimem, "an LSA barrier session with multimem=True (lsa_session)")
    storage = _storage("ncclLsaBarrierSession_C")
    _d.ncclLsaBarrierSessionInit(storage, coop, dev_comm.ptr, team, handle, index, multimem,
                                 _multimem(multimem, mm_handle, "mm_handle"))
    return LsaBarrierSession(storage, _kind(coop))


class GinBarrierSession(PtrView):
    """A GIN barrier session (ncclGinBarrierSession_C), by its address; it only syncs. Made by
    gin_session, world_gin or rail_gin."""

    def sync(self, coop: ncclCoopAny, order: MemoryOrder, fence: GinFenceLevel) -> None:
        """Arrive and wait; `fence` says which earlier GIN operations it drains."""
        _d.ncclGinBarrierSessionSync(self.ptr, coop, int(order), int(fence), coop_kind=self.coop_kind)

    def destroy(self) -> None:
        """Ends the session (every thread of its coop, once)."""
        _d.ncclGinBarrierSessionDestroy(self.ptr, coop_kind=self.coop_kind)


class _GinAllContexts:
    """The type of GIN_ALL_CONTEXTS."""

    def __repr__(self) -> str:
        return "GIN_ALL_CONTEXTS"


GIN_ALL_CONTEXTS = _GinAllContexts()
"""In place of a Gin: the GIN session's sync fences every GIN context of the communicator."""


def gin_session(coop: ncclCoopAny, gin: Gin | _GinAllContexts, dev_comm: DevComm, team: ncclTeam,
                handle: GinBarrierHandle, index: int) -> GinBarrierSession:
    """A GIN barrier session over `team` with barrier `index` of `handle`, fencing `gin`'s
    context (or every context: GIN_ALL_CONTEXTS; dev_comm is used only then)."""
    storage = _storage("ncclGinBarrierSession_C")
    if isinstance(gin, _GinAllContexts):
        dev_comm._require(capabilities.require_gin, "a GIN barrier session over every context (gin_session)")
        _d.ncclGinBarrierSessionInitAllContexts(storage, coop, dev_comm.ptr, team, handle, index)
    else:
        _d.ncclGinBarrierSessionInit(storage, coop, gin.ptr, team, handle, index)
    return GinBarrierSession(storage, _kind(coop))


class BarrierSession(PtrView):
    """A hybrid barrier session (ncclBarrierSession_C): an LSA stage inside a GIN stage, by its
    address. Made by hybrid_session or world_hybrid."""

    def sync(self, coop: ncclCoopAny, order: MemoryOrder, fence: GinFenceLevel) -> None:
        """Arrive and wait on both stages; `fence` applies to the GIN stage."""
        _d.ncclBarrierSessionSync(self.ptr, coop, int(order), int(fence), coop_kind=self.coop_kind)

    def destroy(self) -> None:
        """Ends the session (every thread of its coop, once)."""
        _d.ncclBarrierSessionDestroy(self.ptr, coop_kind=self.coop_kind)


def hybrid_session(coop: ncclCoopAny, inner_team: ncclTeam, outer_team: ncclTeam, gin: Gin,
                   inner_handle: LsaBarrierHandle, outer_handle: GinBarrierHandle, index: int, *,
                   multimem: bool = False, inner_mm_handle: MultimemHandle | None = None) -> BarrierSession:
    """A hybrid session: LSA barrier `inner_handle` over `inner_team`, then GIN barrier
    `outer_handle` over `outer_team` through `gin`, both at `index`."""
    storage = _storage("ncclBarrierSession_C")
    _d.ncclBarrierSessionInit(storage, coop, inner_team, outer_team, gin.ptr, inner_handle, outer_handle, index,
                              multimem, _multimem(multimem, inner_mm_handle, "inner_mm_handle"))
    return BarrierSession(storage, _kind(coop))


def lsa_default(coop: ncclCoopAny, dev_comm: DevComm, index: int, *, multimem: bool = False,
                mm_handle: MultimemHandle | None = None) -> LsaBarrierSession:
    """lsa_session over the LSA team with the communicator's LSA barrier."""
    return lsa_session(coop, dev_comm, dev_comm.team_lsa, dev_comm.lsa_barrier, index, multimem=multimem,
                       mm_handle=mm_handle)


def world_gin(coop: ncclCoopAny, gin: Gin | _GinAllContexts, dev_comm: DevComm, index: int) -> GinBarrierSession:
    """gin_session over every rank with the communicator's world GIN barrier."""
    return gin_session(coop, gin, dev_comm, dev_comm.team_world, dev_comm.world_gin_barrier, index)


def rail_gin(coop: ncclCoopAny, gin: Gin | _GinAllContexts, dev_comm: DevComm, index: int) -> GinBarrierSession:
    """gin_session over the rail team with the communicator's rail GIN barrier."""
    return gin_session(coop, gin, dev_comm, dev_comm.team_rail, dev_comm.rail_gin_barrier, index)


def world_hybrid(coop: ncclCoopAny, gin: Gin, dev_comm: DevComm, index: int, *, multimem: bool = False,
                 inner_mm_handle: MultimemHandle | None = None) -> BarrierSession:
    """A hybrid session over every rank, as NCCL's C++ ncclBarrierSession(coop, ncclTeamTagWorld,
    gin, index) builds it: the LSA team with the hybrid LSA barrier inside, the rail team with
    the hybrid rail GIN barrier outside."""
    return hybrid_session(coop, dev_comm.team_lsa, dev_comm.team_rail, gin, dev_comm.hybrid_lsa_barrier,
                          dev_comm.hybrid_rail_gin_barrier, index, multimem=multimem,
                          inner_mm_handle=inner_mm_handle)
