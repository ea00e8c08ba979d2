"""DevComm: the device communicator (ncclDevComm) as a CuTe kernel argument, and its teams.

The kernel takes the record by value, as NCCL's C++ kernels do: its size is the loaded
release's (the IR's layout: 200 bytes on NCCL 2.28.9, 248 on 2.32.3), and every field is read at
the IR's offset for that release, so one view serves every release. Calls that take the
communicator by reference get the address of one copy, made in the kernel's entry block on
first use."""
from __future__ import annotations

from typing import Any

import cutlass
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import dsl_user_op, ir

from .._generated import cute as _d
from ...core.dev_comm import DevCommResource
from ...errors import NcclInvalid, NcclSymbolNotFoundError
from .. import capabilities, ir_tables, layouts
from ..cute_ffi import entry_alloca, entry_block, load, record_layout, target_release
from .gin import Gin
from .handles import GinBarrierHandle, LsaBarrierHandle, MultimemHandle
from .types import CftLeInfo, CftTeamMode, GinBackendMask, GinResourceSharingMode

Team = _d.ncclTeam

__all__ = ["Team", "DevComm"]


def _record_type() -> ir.Type:
    """The release's ncclDevComm as an MLIR type of its size and alignment (8-byte words)."""
    layout = record_layout("ncclDevComm")
    if layout.align != 8 or layout.size % 8:
        raise NcclInvalid(f"ncclDevComm of NCCL {layout.header_set} is {layout.size} bytes aligned to {layout.align}; "
                          "the CuTe view passes it as 8-byte words", "dev_comm")
    return ir.Type.parse(f"!llvm.struct<(array<{layout.size // 8} x i64>)>")


def _scalar(field: Any) -> ir.Type:
    return ir.IntegerType.get_signless(field.size * 8)


@dsl_user_op
def _le_info_storage(*, loc=None, ip=None) -> tuple[ir.Value, ir.Value]:
    return entry_alloca(4, 4), entry_alloca(8, 8)


def le_info(call, *args) -> CftLeInfo:
    """Runs an ncclGet*LeInfo call with its two out-parameters and reads them."""
    le_id, le_offset = _le_info_storage()
    call(*args, le_id, le_offset)
    return CftLeInfo(le_id=cutlass.Uint32(load(ir.IntegerType.get_signless(32), le_id)),
                     le_offset=cutlass.Uint64(load(ir.IntegerType.get_signless(64), le_offset)))


class DevComm:
    """A device communicator in a CuTe kernel: DevComm(resource) on the host (or the
    DevCommResource itself, through its JIT adapter), the traced view in the kernel."""

    def __init__(self, resource: DevCommResource):
        if not isinstance(resource, DevCommResource):
            raise NcclInvalid(f"resource: DevComm views an ncclbind DevCommResource "
                              f"(Communicator.create_dev_comm), not {type(resource).__name__}", "resource")
        self._resource = resource
        self._traced_from = resource
        self._value = None
        self._ptr = None

    def __c_pointers__(self) -> list[int]:
        if self._resource is None:
            raise NcclInvalid("DevComm: only a host DevComm is a kernel argument", "dev_comm")
        return [self._resource.ptr]

    @staticmethod
    def __get_mlir_types__() -> list[ir.Type]:
        return [_record_type()]

    def __extract_mlir_values__(self) -> list[ir.Value]:
        return [self.value]

    def __new_from_mlir_values__(self, values: list[ir.Value]) -> "DevComm":
        view = object.__new__(type(self))
        view._resource = None
        # The host resource the kernel is traced for (None: a compile-only placeholder), for the
        # host-side checks made while tracing (_require).
        view._traced_from = getattr(self, "_traced_from", None)
        view._value = values[0]
        view._ptr = None
        return view

    def _require(self, check: Any, what: str) -> None:
        """While tracing for a host DevComm: `check(resource, what)` (capabilities.require_gin /
        require_multimem), so a kernel that opens `what` on a device communicator without it is
        refused with NcclStateError when it compiles, before any launch, as Numba's gin_context
        refuses it. Nothing for a compile-only placeholder. A kernel compiled once and called
        again with another DevComm is not traced again: the check is the first compile's."""
        resource = getattr(self, "_traced_from", None)
        if resource is not None:
            check(resource, what)

    @property
    def value(self) -> ir.Value:
        """The ncclDevComm record's value while tracing."""
        if self._value is None:
            raise NcclInvalid("DevComm: its fields are read in a kernel being traced", "dev_comm")
        return self._value

    @property
    def ptr(self) -> ir.Value:
        """The address of this kernel's copy of the record (made on first use)."""
        if self._ptr is None:
            self._ptr = _materialize(self.value)
        return self._ptr

    def _field(self, name: str) -> Any:
        field = _dev_comm_field(name)
        return load(_scalar(field), self.ptr, field.offset)

    def _record(self, name: str, record: type) -> Any:
        field = _dev_comm_field(name)
        return record(load(record.__get_mlir_types__()[0], self.ptr, field.offset))

    # ---- fields ----------------------------------------------------------------------------
    @property
    def rank(self) -> cutlass.Int32:
        return cutlass.Int32(self._field("rank"))

    @property
    def n_ranks(self) -> cutlass.Int32:
        return cutlass.Int32(self._field("nRanks"))

    @property
    def lsa_rank(self) -> cutlass.Int32:
        return cutlass.Int32(self._field("lsaRank"))

    @property
    def lsa_size(self) -> cutlass.Int32:
        return cutlass.Int32(self._field("lsaSize"))

    @property
    def lsa_barrier(self) -> LsaBarrierHandle:
        return LsaBarrierHandle.from_native_struct(self._record("lsaBarrier", _d.ncclLsaBarrierHandle))

    @property
    def rail_gin_barrier(self) -> GinBarrierHandle:
        return GinBarrierHandle.from_native_struct(self._record("railGinBarrier", _d.ncclGinBarrierHandle))

    @property
    def hybrid_lsa_barrier(self) -> LsaBarrierHandle:
        return LsaBarrierHandle.from_native_struct(self._record("hybridLsaBarrier", _d.ncclLsaBarrierHandle))

    @property
    def hybrid_rail_gin_barrier(self) -> GinBarrierHandle:
        return GinBarrierHandle.from_native_struct(self._record("hybridRailGinBarrier", _d.ncclGinBarrierHandle))

    @property
    def world_gin_barrier(self) -> GinBarrierHandle:
        return GinBarrierHandle.from_native_struct(self._record("worldGinBarrier", _d.ncclGinBarrierHandle))

    @property
    def lsa_multimem(self) -> MultimemHandle:
        return MultimemHandle.from_native_struct(self._record("lsaMultimem", _d.ncclMultimemHandle))

    # ---- teams -----------------------------------------------------------------------------
    def _team(self, function: Any, *args: Any) -> Team:
        return _as(Team, function(self.ptr, *args))

    @property
    def team_world(self) -> Team:
        """Every rank (ncclTeamWorld)."""
        return self._team(_d.ncclTeamWorld)

    @property
    def team_lsa(self) -> Team:
        """The ranks that share memory with this one (ncclTeamLsa)."""
        return self._team(_d.ncclTeamLsa)

    @property
    def team_rail(self) -> Team:
        """One rank per LSA team, those with this one's LSA rank (ncclTeamRail)."""
        return self._team(_d.ncclTeamRail)

    def team_cft(self, mode: CftTeamMode = CftTeamMode.FLAT) -> Team:
        """The CFT team in layout `mode` (ncclTeamCft)."""
        return self._team(_d.ncclTeamCft, cutlass.Uint32(int(mode)))

    @property
    def team_cft_multimem(self) -> Team:
        """The CFT multimem team (ncclTeamCftMultimem)."""
        return self._team(_d.ncclTeamCftMultimem)

    def team_rank_to_world(self, team: Team, rank: int) -> cutlass.Int32:
        """`rank` of `team` as a world rank."""
        return cutlass.Int32(_d.ncclTeamRankToWorld(self.ptr, team, cutlass.Int32(rank)))

    def team_rank_to_lsa(self, team: Team, rank: int) -> cutlass.Int32:
        """`rank` of `team` as an LSA rank (it must be in this rank's LSA team; NCCL does not check)."""
        return cutlass.Int32(_d.ncclTeamRankToLsa(self.ptr, team, cutlass.Int32(rank)))

    # ---- resource buffers ------------------------------------------------------------------
    def resource_buffer_local_pointer(self, handle: int) -> ir.Value:
        return _d.ncclGetResourceBufferLocalPointer(self.ptr, cutlass.Uint32(handle))

    def resource_buffer_lsa_pointer(self, handle: int, peer: int) -> ir.Value:
        return _d.ncclGetResourceBufferLsaPointer(self.ptr, cutlass.Uint32(handle), cutlass.Int32(peer))

    def resource_buffer_peer_pointer(self, handle: int, team: Team, peer: int) -> ir.Value:
        return _d.ncclGetResourceBufferPeerPointer(self.ptr, cutlass.Uint32(handle), team, cutlass.Int32(peer))

    def resource_buffer_multimem_pointer(self, handle: int, mm_handle: MultimemHandle) -> ir.Value:
        return _d.ncclGetResourceBufferMultimemPointer(self.ptr, cutlass.Uint32(handle), mm_handle)

    def resource_buffer_lsa_multimem_pointer(self, handle: int) -> ir.Value:
        return _d.ncclGetResourceBufferLsaMultimemPointer(self.ptr, cutlass.Uint32(handle))

    def resource_buffer_cft_le_info(self, handle: int, peer_cft: int) -> CftLeInfo:
        return le_info(_d.ncclGetResourceBufferCftLeInfo, self.ptr, cutlass.Uint32(handle), cutlass.Int32(peer_cft))

    def resource_buffer_peer_le_info(self, handle: int, peer: int) -> CftLeInfo:
        return le_info(_d.ncclGetResourceBufferPeerLeInfo, self.ptr, cutlass.Uint32(handle), cutlass.Int32(peer))

    def resource_buffer_multimem_le_info(self, handle: int) -> CftLeInfo:
        return le_info(_d.ncclGetResourceBufferMultimemLeInfo, self.ptr, cutlass.Uint32(handle))

    # ---- GIN -------------------------------------------------------------------------------
    def gin(self, backend: GinBackendMask, context_id: int, *,
            resource_sharing_mode: GinResourceSharingMode = GinResourceSharingMode.GPU) -> Gin:
        """A Gin over context `context_id` with the backends of `backend`; its ncclGin_C lives on
        the kernel's stack (the IR's size for the release). A release before
        ncclGin_C_initWithResourceSharingMode takes only the GPU sharing mode."""
        self._require(capabilities.require_gin, "an ncclGin (DevComm.gin)")
        layout = record_layout("ncclGin_C")
        storage = entry_alloca(layout.size, layout.align)
        mode = GinResourceSharingMode(resource_sharing_mode)
        try:
            _d.ncclGin_C_initWithResourceSharingMode(storage, cutlass.Uint32(int(backend)), self.ptr,
                                                     cutlass.Int32(context_id), cutlass.Uint8(int(mode)))
        except NcclSymbolNotFoundError:
            if mode != GinResourceSharingMode.GPU:
                raise
            _d.ncclGin_C_init(storage, cutlass.Uint32(int(backend)), self.ptr, cutlass.Int32(context_id))
        return Gin(ptr=storage)


def _dev_comm_field(name: str) -> Any:
    """The release's layout of ncclDevComm field `name`; NcclSymbolNotFoundError naming the
    first release whose ncclDevComm has it when this one's does not (worldGinBarrier before 2.30)."""
    layout = record_layout("ncclDevComm")
    if any(f.name == name for f in layout.fields):
        return layout.field(name)
    code = target_release()
    later = [v for v in ir_tables.header_set_versions() if ir_tables.api()["version_codes"][v] > code
             and any(f.name == name for f in layouts.record_layout("ncclDevComm", v).fields)]
    raise NcclSymbolNotFoundError(f"ncclDevComm.{name} needs NCCL >= {later[0]}; loaded {ir_tables.version_text(code)}"
                                  if later else f"ncclDevComm.{name}: no release has it; loaded "
                                  f"{ir_tables.version_text(code)}", function=f"ncclDevComm.{name}")


def _as(record: type, value: Any) -> Any:
    return value if isinstance(value, record) else record(value if isinstance(value, ir.Value) else
                                                          value.__extract_mlir_values__()[0])


@dsl_user_op
def _materialize(value: ir.Value, *, loc=None, ip=None) -> ir.Value:
    """A copy of the by-value record in memory, allocated in the entry block and stored where the
    value is defined, so it dominates every use: after the allocation for a kernel argument, at
    the start of the region for a value a loop or branch threads in (the tracer passes the
    DevComm into each region as a block argument), after the operation that made it otherwise."""
    layout = record_layout("ncclDevComm")
    ptr = entry_alloca(layout.size, layout.align)
    owner = value.owner
    if isinstance(owner, ir.Block):
        where = (ir.InsertionPoint.after(ptr.owner) if owner == entry_block()
                 else ir.InsertionPoint.at_block_begin(owner))
    else:
        where = ir.InsertionPoint.after(owner)
    with where:
        llvm.store(value, ptr, loc=loc)
    return ptr


def _register() -> None:
    cutlass.register_jit_arg_adapter(DevCommResource)(DevComm)


_register()
