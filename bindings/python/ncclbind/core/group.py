"""NCCL groups: group_start / group_end, the group() context manager, and
group simulation (ncclGroupSimulateEnd) returning GroupSimInfo."""
from __future__ import annotations

from .. import _nccl


class GroupSimInfo:
    """What ncclGroupSimulateEnd reports for the group's operations:
    estimated_time (ncclSimInfo_t.estimatedTime, as NCCL reports it) and raw
    (the ncclSimInfo_t)."""

    __slots__ = ("estimated_time", "raw")

    def __init__(self, estimated_time: float, raw: object = None) -> None:
        self.estimated_time, self.raw = estimated_time, raw

    def __repr__(self) -> str:
        return f"GroupSimInfo(estimated_time={self.estimated_time})"


def group_start() -> None:
    """ncclGroupStart: operations until group_end are issued together."""
    _nccl.group_start()


def group_end(simulate: bool = False) -> GroupSimInfo | None:
    """ncclGroupEnd; with simulate=True, ncclGroupSimulateEnd instead: nothing
    runs, and the estimate comes back as GroupSimInfo."""
    if not simulate:
        _nccl.group_end()
        return None
    info = _nccl.group_simulate_end(_nccl.nccl_sim_info_initializer())
    return GroupSimInfo(float(info.estimatedTime), info)


class GroupBlock:
    """A group as a context manager (made by group()):

        with ncclbind.group():
            comm.send(a, peer=1)
            comm.recv(b, peer=1)

        with ncclbind.group(simulate=True) as g:
            comm.all_reduce(x, x)
        print(g.info.estimated_time)

    The group is ended even when the block raises (NCCL needs the end call).
    """

    __slots__ = ("simulate", "info")

    def __init__(self, simulate: bool = False):
        self.simulate = simulate
        self.info: GroupSimInfo | None = None

    def __enter__(self) -> GroupBlock:
        group_start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        info = group_end(self.simulate and exc_type is None)
        self.info = info


def group(simulate: bool = False) -> GroupBlock:
    """A group as a context manager: `with ncclbind.group(): ...` (nccl4py's function);
    with simulate=True, `with group(simulate=True) as g:` runs nothing and g.info holds
    the estimate (GroupSimInfo)."""
    return GroupBlock(simulate)
