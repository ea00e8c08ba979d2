"""Device communicators (ncclDevCommCreate) and what they are asked for.

NCCLDevCommRequirements and TeamRequirement are nccl4py's record classes, generated from
ncclDevCommRequirements_t and ncclTeamRequirements_t (policy/python_api.toml);
LsaBarrierRequirement, GinBarrierRequirement and LLA2ARequirement each stand for one
resource-requirement call (ncclLsaBarrierCreateRequirement, ncclGinBarrierCreateRequirement,
ncclLLA2ACreateRequirement). DevCommResource links the teams and resources into the lists
ncclDevCommRequirements_t points to, keeps the handles NCCL writes during ncclDevCommCreate,
and hands them out as views (MultimemHandle, LsaBarrierHandle, GinBarrierHandle, LLA2AHandle).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import _nccl
from .._generated.nccl_records import (VIEWS, GinBarrierHandle, LLA2AHandle, LsaBarrierHandle, MultimemHandle,
                                       NCCLDevCommRequirements, NCCLTeam, TeamRequirement)
from ..errors import NcclInvalid
from ..base.config import record_struct
from .resources import CommResource

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from typing import Any

    from .communicator import Communicator

__all__ = ["NCCLDevCommRequirements", "TeamRequirement", "LsaBarrierRequirement", "GinBarrierRequirement",
           "LLA2ARequirement", "DevCommResource", "MultimemHandle", "LsaBarrierHandle", "GinBarrierHandle",
           "LLA2AHandle"]


@dataclass(frozen=True)
class LsaBarrierRequirement:
    """An LSA barrier resource on `team` with `n_barriers` barriers (ncclLsaBarrierCreateRequirement):
    an entry of NCCLDevCommRequirements.resources; its LsaBarrierHandle is in
    DevCommResource.resource_handles at the same index."""

    team: NCCLTeam
    n_barriers: int


@dataclass(frozen=True)
class GinBarrierRequirement:
    """A GIN barrier resource on `team` with `n_barriers` barriers (ncclGinBarrierCreateRequirement):
    an entry of NCCLDevCommRequirements.resources; its GinBarrierHandle is in
    DevCommResource.resource_handles at the same index."""

    team: NCCLTeam
    n_barriers: int


@dataclass(frozen=True)
class LLA2ARequirement:
    """A low-latency all-to-all resource of `n_blocks` blocks holding up to `max_elements` elements
    of at most `max_element_size` bytes (ncclLLA2ACalcSlots, ncclLLA2ACreateRequirement): an entry
    of NCCLDevCommRequirements.resources; its LLA2AHandle is in DevCommResource.resource_handles."""

    n_blocks: int
    max_elements: int
    max_element_size: int


def _team(team: Any, argument: str) -> NCCLTeam:
    if isinstance(team, NCCLTeam):
        return team
    if isinstance(team, _nccl.ncclTeam_t):
        return NCCLTeam.from_struct(team)
    raise NcclInvalid(f"{argument}: an NCCLTeam (or an ncclTeam_t), not {type(team).__name__}", argument)


def _team_list(teams: Any) -> tuple[list[Any], dict[NCCLTeam, Any]]:
    """ncclTeamRequirements_t nodes, linked, for `teams` (TeamRequirement entries; one node per
    team, multimem if any entry of that team asks for it, as NCCL allocates one multicast per
    team), and the multimem handle NCCL fills for each team that asks."""
    merged: dict[NCCLTeam, bool] = {}
    for i, entry in enumerate(teams):
        if not isinstance(entry, TeamRequirement):
            raise NcclInvalid(f"requirements: teams[{i}] is a TeamRequirement, not {type(entry).__name__}",
                              "requirements")
        team = _team(entry.team, f"teams[{i}].team")
        merged[team] = merged.get(team, False) or bool(entry.multimem)
    nodes, multimem = [], {}
    for team, wanted in merged.items():
        node = _nccl.ncclTeamRequirements_t()
        node.team = record_struct(team)
        node.multimem = wanted
        if wanted:
            handle = _nccl.ncclMultimemHandle_t()
            node.outMultimemHandle = handle
            multimem[team] = handle
        if nodes:
            nodes[-1].next = node  # a pointer field keeps its target alive
        nodes.append(node)
    return nodes, multimem


def _resource_list(comm: Communicator, resources: Any) -> tuple[list[Any], tuple[Any, ...]]:
    """ncclDevResourceRequirements_t nodes, linked, one per entry of `resources` (in order), and
    the handle each one's requirement call ties to it (NCCL writes it during ncclDevCommCreate)."""
    nodes, handles = [], []
    for i, entry in enumerate(resources):
        if isinstance(entry, LsaBarrierRequirement):
            team = record_struct(_team(entry.team, f"resources[{i}].team"))
            handle, node = _nccl.lsa_barrier_create_requirement(team, entry.n_barriers)
        elif isinstance(entry, GinBarrierRequirement):
            team = record_struct(_team(entry.team, f"resources[{i}].team"))
            handle, node = comm._call(_nccl.gin_barrier_create_requirement, team, entry.n_barriers)
        elif isinstance(entry, LLA2ARequirement):
            slots = _nccl.lla2a_calc_slots(entry.max_elements, entry.max_element_size)
            handle, node = _nccl.lla2a_create_requirement(entry.n_blocks, slots)
        else:
            raise NcclInvalid(f"requirements: resources[{i}] is an LsaBarrierRequirement, GinBarrierRequirement or "
                              f"LLA2ARequirement, not {type(entry).__name__}", "requirements")
        if nodes:
            nodes[-1].next = node
        nodes.append(node)
        handles.append(handle)
    return nodes, tuple(handles)


def requirements_struct(comm: Communicator, requirements: NCCLDevCommRequirements):
    """(the ncclDevCommRequirements_t of `requirements` in the loaded layout, with its team and
    resource lists linked, {NCCLTeam: multimem handle}, the resource handles in order). The struct
    holds the nodes until ncclDevCommCreate has copied them; the handles must outlive it."""
    struct = record_struct(requirements, "requirements")
    teams, multimem = _team_list(requirements.teams)
    resources, handles = _resource_list(comm, requirements.resources)
    if teams:
        struct.teamRequirementsList = teams[0]
    if resources:
        struct.resourceRequirementsList = resources[0]
    return struct, multimem, handles


class DevCommResource(CommResource):
    """A device communicator (ncclDevCommCreate): `dev_comm` is the ncclDevComm_t to hand to
    device kernels (by value: bytes(dev_comm)); `ptr` its address. Made by
    Communicator.create_dev_comm from an NCCLDevCommRequirements (or an ncclDevCommRequirements_t
    used as it is, with the handles its lists point to: team_multimem_lowpp, {team: its
    ncclMultimemHandle_t}, and resource_handle_lowpps, in its resource list's order)."""

    release_order = 1
    __slots__ = ("dev_comm", "requirements", "_multimem", "_handles")

    def __init__(self, comm: Communicator,
                 reqs_lowpp: NCCLDevCommRequirements | _nccl.ncclDevCommRequirements_t | None = None,
                 team_multimem_lowpp: dict[Any, _nccl.ncclMultimemHandle_t] | None = None,
                 resource_handle_lowpps: tuple[Any, ...] | None = None):
        self.requirements = reqs_lowpp if reqs_lowpp is not None else NCCLDevCommRequirements()
        multimem = {_team(team, "team_multimem_lowpp"): handle for team, handle in (team_multimem_lowpp or {}).items()}
        handles = tuple(resource_handle_lowpps or ())
        if isinstance(self.requirements, NCCLDevCommRequirements):
            struct, made, handles_made = requirements_struct(comm, self.requirements)
            multimem.update(made)
            handles = handles_made + handles
        elif isinstance(self.requirements, _nccl.ncclDevCommRequirements_t):
            struct = self.requirements
        else:
            raise NcclInvalid(f"requirements: an NCCLDevCommRequirements (or an ncclDevCommRequirements_t), not "
                              f"{type(self.requirements).__name__}", "requirements")
        for handle in handles:
            if type(handle).__name__ not in VIEWS:
                raise NcclInvalid(f"resource_handle_lowpps: {type(handle).__name__} is not a resource handle "
                                  f"({', '.join(VIEWS)})", "resource_handle_lowpps")
        self._multimem = multimem
        self._handles = handles
        self.dev_comm = comm._call(_nccl.dev_comm_create, struct)
        super().__init__(comm)

    def _release(self) -> None:
        _nccl.dev_comm_destroy(self._comm.handle, self.dev_comm)

    @property
    def ptr(self) -> int:
        """The address of the ncclDevComm_t (this object's copy of what NCCL returned)."""
        self._check_open()
        return self.dev_comm.address

    def multimem_handle(self, team: NCCLTeam | _nccl.ncclTeam_t) -> MultimemHandle:
        """The multicast handle NCCL filled for `team`, which the requirements' teams asked for with
        multimem=True (KeyError otherwise); valid until this device communicator is closed."""
        self._check_open()
        key = _team(team, "team")
        try:
            return MultimemHandle.from_struct(self._multimem[key])
        except KeyError:
            raise KeyError(f"no multimem handle for {key!r}: it was not asked for with multimem=True in this "
                           "device communicator's requirements") from None

    @property
    def resource_handles(self) -> tuple[LsaBarrierHandle | GinBarrierHandle | LLA2AHandle, ...]:
        """The handle of each entry of the requirements' resources, in their order."""
        self._check_open()
        return tuple(VIEWS[type(handle).__name__].from_struct(handle) for handle in self._handles)

    def to_bytes(self) -> bytes:
        """The ncclDevComm record as bytes, to pass to a device kernel."""
        self._check_open()
        return bytes(self.dev_comm)

    def __repr__(self) -> str:
        return f"DevCommResource(rank={self.dev_comm.rank}, nRanks={self.dev_comm.nRanks}" \
               f"{', closed' if self._closed else ''})"
