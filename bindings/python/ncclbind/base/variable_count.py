"""The checks and addressing of the variable-count collectives (all_to_allv, all_gatherv,
reduce_scatterv), which NCCL does not have: each is described once in
policy/variable_count.toml and its method rendered into
ncclbind/_generated/variable_count_methods.py (Rust's from the same entry), which calls these.

Counts and displacements are in elements of the buffers as the caller sees them
(complex numbers for a complex buffer). Every count and displacement is checked
before NCCL is called: one per rank, non-negative ints (bools are not counts),
each block inside its buffer, no two receive blocks overlapping, and equal
dtypes; a rejection is NcclInvalid naming the argument and the index. Empty
blocks make no NCCL call (the peer's matching block is empty too). Every rank
must pass counts that agree with its peers' (send_counts[p] on rank r equals
recv_counts[r] on rank p): NCCL cannot check that, and a mismatch hangs or
corrupts, which is what Communicator.watchdog is for.
"""
from __future__ import annotations

from collections.abc import Mapping, Set as AbstractSet

from ..errors import NcclInvalid
from .argument_checks import non_negative_ints
from .buffer import NcclBuffer


def counts(values, argument: str, nranks: int) -> list[int]:
    """`values` as one non-negative int per rank; NcclInvalid naming argument[index] otherwise."""
    # a sequence in rank order: a dict (or set) has a length but no order by rank
    if isinstance(values, (str, bytes, Mapping, AbstractSet)) or not hasattr(values, "__len__"):
        raise NcclInvalid(f"{argument} must be a sequence of {nranks} ints (one per rank), not "
                          f"{type(values).__name__}", argument)
    if len(values) != nranks:
        raise NcclInvalid(f"{argument} has {len(values)} entries; the communicator has {nranks} ranks", argument)
    return non_negative_ints(values, argument)


def packed(counts: list[int]) -> list[int]:
    """Displacements of blocks laid end to end in rank order."""
    displs, offset = [], 0
    for count in counts:
        displs.append(offset)
        offset += count
    return displs


def check_blocks_inside(buffer: NcclBuffer, argument: str, counts: list[int], counts_argument: str,
                         displs: list[int], displs_argument: str) -> None:
    for index, (count, displ) in enumerate(zip(counts, displs)):
        if count and displ + count > buffer.elements:
            raise NcclInvalid(f"{displs_argument}[{index}] + {counts_argument}[{index}] = {displ} + {count} is past "
                              f"the end of {argument} ({buffer.elements} elements)", displs_argument)


def check_no_overlap(counts: list[int], displs: list[int], displs_argument: str) -> None:
    blocks = sorted((displ, displ + count, index) for index, (count, displ) in enumerate(zip(counts, displs)) if count)
    for (start, end, index), (next_start, next_end, next_index) in zip(blocks, blocks[1:]):
        if next_start < end:
            first, second = sorted((index, next_index))
            raise NcclInvalid(f"{displs_argument}[{second}]: receive block {second} overlaps block {first} "
                              f"([{start}, {end}) and [{next_start}, {next_end}) elements)", displs_argument)


def same_type(send: NcclBuffer, recv: NcclBuffer) -> None:
    if send.dtype != recv.dtype or send.complex != recv.complex:
        raise NcclInvalid(f"recvbuf is {recv.complex_dtype_name}, sendbuf is {send.complex_dtype_name}", "recvbuf")


def address(buffer: NcclBuffer, displ: int) -> int:
    """The address of element `displ` (a complex element is two of buffer.dtype)."""
    return buffer.ptr + displ * buffer.dtype.itemsize * (2 if buffer.complex else 1)


def nccl_count(buffer: NcclBuffer, count: int) -> int:
    return 2 * count if buffer.complex else count


def check_own(buffer: NcclBuffer, argument: str, counts: list[int], counts_argument: str, rank: int,
              rule: str) -> None:
    """This rank's block (counts[rank]) against the buffer that holds it: exactly its elements
    ("equal": a send buffer that is the block) or at most them ("at_least": a receive buffer
    that holds at least the block)."""
    own = counts[rank]
    if (buffer.elements != own) if rule == "equal" else (own > buffer.elements):
        raise NcclInvalid(f"{argument} holds {buffer.elements} elements; {counts_argument}[{rank}] (this rank's "
                          f"block) is {own}", argument)
