"""The collectives the bench runs, as nccl-tests lays them out: from a sweep size, the count
NCCL is passed, the send and receive buffer lengths, where the in-place buffers sit, the bus
factor (busbw = algbw x factor), and the values every rank sends and expects. The layouts, the
data each rank receives and the bus factors are policy/vocabulary.toml's [collectives]
(bench/_generated/collectives.py; the C and Rust workers' bench/cli/generated/ are rendered from
the same table); the fill pattern is here.

The fill pattern is a function of (rank, index, repetition), as nccl-tests derives its data
from the rank and the element's position; small integers, so that every reduction is exact
in every data type (sums stay <= 7 x nranks; prod: one rank per element holds 2, the rest 1).
The C and Rust workers (bench/cli/) compute the same pattern on the host; test_bench_cli.py
holds them equal."""
from __future__ import annotations

import dataclasses

from ._generated import collectives as _table


@dataclasses.dataclass(frozen=True)
class Layout:
    """One collective at one size on `nranks` ranks, in elements."""
    count: int          # what NCCL is passed (nccl-tests' "count" column)
    send: int           # send buffer length
    recv: int           # receive buffer length
    send_in_place: int  # in place: the send pointer is recvbuff + send_in_place * rank
    recv_in_place: int  # in place: the receive pointer is recvbuff + recv_in_place * rank

    @property
    def buffer(self) -> int:
        """Elements of the receive (in-place) buffer: it holds either side."""
        return max(self.send, self.recv)


@dataclasses.dataclass(frozen=True)
class Collective:
    name: str
    perf_name: str      # nccl-tests' program, e.g. all_reduce_perf
    has_op: bool
    has_root: bool
    in_place_checked: bool  # nccl-tests checks no in-place send/recv (nor all-to-all: NCCL defines none)

    def layout(self, nbytes: int, element_size: int, nranks: int) -> Layout:
        return Layout(*_table.layout(self.name, nbytes // element_size, nranks))

    def bus_factor(self, nranks: int) -> float:
        """nccl-tests' PERFORMANCE.md: busbw = algbw x this."""
        return _table.bus_factor(self.name, nranks)

    def table_bytes(self, layout: Layout, element_size: int) -> int:
        """The size column: the larger of what a rank sends and receives."""
        return max(layout.send, layout.recv) * element_size


COLLECTIVES = {name: Collective(name, perf_name, has_op, has_root, in_place_checked)
               for name, (perf_name, has_op, has_root, in_place_checked, _root_only) in _table.COLLECTIVES.items()}


def bandwidths(collective: Collective, nbytes: int, time_us: float, nranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (10^9 bytes) for `nbytes` (the size column) in `time_us`."""
    if time_us <= 0:
        return 0.0, 0.0
    algbw = nbytes / 1e3 / time_us
    return algbw, algbw * collective.bus_factor(nranks)


# ---- the data: values sent and expected, over any array namespace with arange/%/==/+ -------------

def value(rank, index, rep: int, op: str, nranks: int):
    """The element `index` of rank `rank`'s data (both may be arrays or ints)."""
    if op == "prod":
        return ((index + rank + rep) % nranks == 0) * 1 + 1
    return (index + 3 * rank + rep) % 7 + 1


def reduce_over_ranks(index, rep: int, op: str, nranks: int):
    """What NCCL's op over every rank's value(rank, index) gives (float64 for avg)."""
    acc = value(0, index, rep, op, nranks)
    for r in range(1, nranks):
        v = value(r, index, rep, op, nranks)
        if op in ("sum", "avg"):
            acc = acc + v
        elif op == "prod":
            acc = acc * v
        elif op == "max":
            acc = acc * (acc >= v) + v * (acc < v)
        elif op == "min":
            acc = acc * (acc <= v) + v * (acc > v)
    return acc / nranks if op == "avg" else acc


def send_values(arange, name: str, layout: Layout, rank: int, nranks: int, rep: int, op: str):
    """The send data of `rank` (length layout.send); arange(n) gives int64 indices 0..n-1."""
    return value(rank, arange(layout.send), rep, op, nranks)


def expected_values(arange, name: str, layout: Layout, rank: int, nranks: int, rep: int, op: str, root: int):
    """What `rank` must hold in its receive buffer afterwards (length layout.recv), or None where
    nothing is defined (reduce off the root)."""
    per = layout.count
    return _table.received(name, arange(layout.recv), per, nranks, rank, root,
                           lambda r, i: value(r, i, rep, op, nranks),
                           lambda i: reduce_over_ranks(i, rep, op, nranks))


def tolerance(dtype: str, op: str) -> tuple[float, float]:
    """(absolute, relative) difference allowed: none, except for avg's division (vocabulary.toml's
    avg_tolerance of the type)."""
    return _table.AVG_TOLERANCE[dtype] if op == "avg" else (0.0, 0.0)
