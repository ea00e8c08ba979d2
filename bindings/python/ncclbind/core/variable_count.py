"""Variable-count collectives, which NCCL does not have, built from calls it has
in one group (ncclGroupStart ... ncclGroupEnd):

    all_to_allv      one ncclSend and one ncclRecv per peer
    all_gatherv      one ncclSend (this rank's block) and one ncclRecv per peer
    reduce_scatterv  one ncclReduce per rank, rooted at the rank whose block it is

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

import operator
from collections.abc import Mapping, Set as AbstractSet
from typing import Sequence

from .. import _nccl
from ..errors import NcclInvalid
from ..nccl_enums import NcclRedOp
from ..base.buffer import NcclBuffer
from ..base.dtypes import check_op_for_complex
from .group import group
from ..base.streams import stream_handle
from ..base.watchdog import watched


def _counts(values, argument: str, nranks: int) -> list[int]:
    """`values` as one non-negative int per rank; NcclInvalid naming argument[index] otherwise."""
    # a sequence in rank order: a dict (or set) has a length but no order by rank
    if isinstance(values, (str, bytes, Mapping, AbstractSet)) or not hasattr(values, "__len__"):
        raise NcclInvalid(f"{argument} must be a sequence of {nranks} ints (one per rank), not "
                          f"{type(values).__name__}", argument)
    if len(values) != nranks:
        raise NcclInvalid(f"{argument} has {len(values)} entries; the communicator has {nranks} ranks", argument)
    checked = []
    for index, value in enumerate(values):
        try:
            if isinstance(value, bool) or type(value).__name__ == "bool_":
                raise TypeError
            number = operator.index(value)
        except TypeError:
            raise NcclInvalid(f"{argument}[{index}] is {value!r}; it must be an int", argument) from None
        if number < 0:
            raise NcclInvalid(f"{argument}[{index}] is {number}; it must not be negative", argument)
        checked.append(number)
    return checked


def _packed(counts: list[int]) -> list[int]:
    """Displacements of blocks laid end to end in rank order."""
    displs, offset = [], 0
    for count in counts:
        displs.append(offset)
        offset += count
    return displs


def _check_blocks_inside(buffer: NcclBuffer, argument: str, counts: list[int], counts_argument: str,
                         displs: list[int], displs_argument: str) -> None:
    for index, (count, displ) in enumerate(zip(counts, displs)):
        if count and displ + count > buffer.elements:
            raise NcclInvalid(f"{displs_argument}[{index}] + {counts_argument}[{index}] = {displ} + {count} is past "
                              f"the end of {argument} ({buffer.elements} elements)", displs_argument)


def _check_no_overlap(counts: list[int], displs: list[int], displs_argument: str) -> None:
    blocks = sorted((displ, displ + count, index) for index, (count, displ) in enumerate(zip(counts, displs)) if count)
    for (start, end, index), (next_start, next_end, next_index) in zip(blocks, blocks[1:]):
        if next_start < end:
            first, second = sorted((index, next_index))
            raise NcclInvalid(f"{displs_argument}[{second}]: receive block {second} overlaps block {first} "
                              f"([{start}, {end}) and [{next_start}, {next_end}) elements)", displs_argument)


def _same_type(send: NcclBuffer, recv: NcclBuffer) -> None:
    if send.dtype != recv.dtype or send.complex != recv.complex:
        raise NcclInvalid(f"recvbuf is {recv.complex_dtype_name}, sendbuf is {send.complex_dtype_name}", "recvbuf")


def _address(buffer: NcclBuffer, displ: int) -> int:
    """The address of element `displ` (a complex element is two of buffer.dtype)."""
    return buffer.ptr + displ * buffer.dtype.itemsize * (2 if buffer.complex else 1)


def _nccl_count(buffer: NcclBuffer, count: int) -> int:
    return 2 * count if buffer.complex else count


class VariableCountCollectives:
    """all_to_allv, all_gatherv and reduce_scatterv (a mixin of Communicator)."""

    __slots__ = ()

    def _resolve_pair(self, sendbuf, recvbuf, stream) -> tuple[int, int, NcclBuffer, NcclBuffer]:
        """The live handle, the stream handle and both buffers, of one element type."""
        handle = self._live()
        s = stream_handle(stream)
        send = self._buffer(sendbuf, "sendbuf", False, s)
        recv = self._buffer(recvbuf, "recvbuf", True, s)
        _same_type(send, recv)
        return handle, s, send, recv

    def all_to_allv(self, sendbuf, send_counts: Sequence[int], send_displs: Sequence[int], recvbuf,
                    recv_counts: Sequence[int], recv_displs: Sequence[int], *, stream=None) -> None:
        """Block p of sendbuf (send_counts[p] elements at send_displs[p]) goes to
        rank p; block q of recvbuf (recv_counts[q] elements at recv_displs[q])
        comes from rank q. One ncclSend and one ncclRecv per non-empty block, in
        one group."""
        handle, s, send, recv = self._resolve_pair(sendbuf, recvbuf, stream)
        n = self._nranks
        send_counts = _counts(send_counts, "send_counts", n)
        send_displs = _counts(send_displs, "send_displs", n)
        recv_counts = _counts(recv_counts, "recv_counts", n)
        recv_displs = _counts(recv_displs, "recv_displs", n)
        _check_blocks_inside(send, "sendbuf", send_counts, "send_counts", send_displs, "send_displs")
        _check_blocks_inside(recv, "recvbuf", recv_counts, "recv_counts", recv_displs, "recv_displs")
        _check_no_overlap(recv_counts, recv_displs, "recv_displs")
        with self._gate, watched(self, "all_to_allv", s), group():
            for peer in range(n):
                if send_counts[peer]:
                    _nccl.send(_address(send, send_displs[peer]), _nccl_count(send, send_counts[peer]), send.dtype,
                               peer, handle, s)
                if recv_counts[peer]:
                    _nccl.recv(_address(recv, recv_displs[peer]), _nccl_count(recv, recv_counts[peer]), recv.dtype,
                               peer, handle, s)

    def all_gatherv(self, sendbuf, recvbuf, recv_counts: Sequence[int], recv_displs: Sequence[int] | None = None, *,
                    stream=None) -> None:
        """Block q of recvbuf (recv_counts[q] elements at recv_displs[q]; packed in
        rank order when recv_displs is None) = rank q's sendbuf, which holds
        recv_counts[q] elements. This rank's sendbuf goes to every rank (its own
        block too) with one ncclSend per peer, and each block comes with one
        ncclRecv, in one group."""
        handle, s, send, recv = self._resolve_pair(sendbuf, recvbuf, stream)
        n = self._nranks
        recv_counts = _counts(recv_counts, "recv_counts", n)
        recv_displs = _packed(recv_counts) if recv_displs is None else _counts(recv_displs, "recv_displs", n)
        if send.elements != recv_counts[self._rank]:
            raise NcclInvalid(f"sendbuf holds {send.elements} elements; recv_counts[{self._rank}] (this rank's "
                              f"block) is {recv_counts[self._rank]}", "sendbuf")
        _check_blocks_inside(recv, "recvbuf", recv_counts, "recv_counts", recv_displs, "recv_displs")
        _check_no_overlap(recv_counts, recv_displs, "recv_displs")
        with self._gate, watched(self, "all_gatherv", s), group():
            for peer in range(n):
                if send.count:
                    _nccl.send(send.ptr, send.count, send.dtype, peer, handle, s)
                if recv_counts[peer]:
                    _nccl.recv(_address(recv, recv_displs[peer]), _nccl_count(recv, recv_counts[peer]), recv.dtype,
                               peer, handle, s)

    def reduce_scatterv(self, sendbuf, recvbuf, recv_counts: Sequence[int], send_displs: Sequence[int] | None = None,
                        op=NcclRedOp.SUM, *, stream=None) -> None:
        """recvbuf on rank p = op over all ranks of block p of sendbuf
        (recv_counts[p] elements at send_displs[p]; packed in rank order when
        send_displs is None); recvbuf holds at least recv_counts[this rank].

        NCCL has no reduce-scatter with counts per rank: this is one ncclReduce
        per non-empty block, rooted at the rank the block belongs to, all in one
        group. NCCL runs the reductions together, but each moves its block as a
        reduce does (a tree or ring to one root), so it is slower than
        reduce_scatter for equal counts; use that when counts are equal."""
        handle, s, send, recv = self._resolve_pair(sendbuf, recvbuf, stream)
        n = self._nranks
        recv_counts = _counts(recv_counts, "recv_counts", n)
        send_displs = _packed(recv_counts) if send_displs is None else _counts(send_displs, "send_displs", n)
        _check_blocks_inside(send, "sendbuf", recv_counts, "recv_counts", send_displs, "send_displs")
        if recv_counts[self._rank] > recv.elements:
            raise NcclInvalid(f"recvbuf holds {recv.elements} elements; recv_counts[{self._rank}] (this rank's "
                              f"block) is {recv_counts[self._rank]}", "recvbuf")
        check_op_for_complex(send, op)
        op_value = self._op(op, send.dtype)
        with self._gate, watched(self, "reduce_scatterv", s), group():
            for root in range(n):
                if recv_counts[root]:
                    _nccl.reduce(_address(send, send_displs[root]), recv.ptr if root == self._rank else 0,
                                 _nccl_count(send, recv_counts[root]), send.dtype, op_value, root, handle, s)
