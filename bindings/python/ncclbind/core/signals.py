"""The one-sided (host RMA) calls of a Communicator, as nccl4py 0.6.0 has them: put_signal,
signal and wait_signal (ncclPutSignal, ncclSignal, ncclWaitSignal; NCCL 2.29.7 and later, a
missing one raises NcclSymbolNotFoundError). Communicator takes them from SignalMethods.

    window = comm.register_window(x)                  # collective
    comm.put_signal(x[:n], peer, window, 128)         # into peer's window at ELEMENT 128
    comm.wait_signal(WaitSignalDesc(peer=peer))       # on the peer: wait for one signal

put_signal's peer_window_offset counts elements of local_buffer's data type (nccl4py's
meaning); NCCL takes bytes, so the byte offset passed is peer_window_offset x the element size.
Every argument is checked before NCCL is called (NcclInvalid naming it): ranks in range, the
window registered on this communicator and open, indices and flags non-negative ints in their
C types' ranges (the ranges of ncclWaitSignalDesc_t's fields, from the IR)."""
from __future__ import annotations

from .. import _nccl
from .._generated.policy_records import WaitSignalDesc
from ..errors import NcclInvalid
from ..base.buffer import NcclBuffer
from ..base.streams import stream_handle

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from collections.abc import Sequence

    from .argument_types import BufferLike, StreamLike
    from .resources import RegisteredWindowHandle

__all__ = ["SignalMethods", "WaitSignalDesc"]

# signal_index and context mean in ncclSignal / ncclPutSignal what sigIdx and ctx mean in a
# wait's descriptor: the same C types, so the same ranges (rendered from the IR).
_RANGES = {name: (c_type, high) for name, _, c_type, _, high in WaitSignalDesc.FIELDS}


def _index(value, name: str, field: str) -> int:
    """A non-negative int in the range of the descriptor field's C type."""
    c_type, high = _RANGES[field]
    if isinstance(value, bool) or not isinstance(value, int):
        raise NcclInvalid(f"{name}: an int ({c_type}), not {type(value).__name__}", name)
    if not 0 <= value <= high:
        raise NcclInvalid(f"{name}: {value} is not in 0..{high}", name)
    return int(value)


def _flags(flags) -> int:
    # the upper bound (unsigned int) is the low-level call's own check, which names flags too
    if isinstance(flags, bool) or not isinstance(flags, int) or flags < 0:
        raise NcclInvalid(f"flags: an int of at least 0 (reserved: 0), not {flags!r}", "flags")
    return int(flags)


class SignalMethods:
    """Communicator's one-sided calls (see the module's docstring)."""

    __slots__ = ()

    def put_signal(self, local_buffer: BufferLike, peer: int, peer_window: RegisteredWindowHandle,
                   peer_window_offset: int = 0, signal_index: int = 0, context: int = 0, flags: int = 0, *,
                   stream: StreamLike = None) -> None:
        """ncclPutSignal: write local_buffer into peer's part of the window peer_window (this
        rank's handle of a window every rank registered, register_window), starting at element
        peer_window_offset (in elements of local_buffer's data type, as nccl4py counts; a
        complex buffer counts its real and imaginary parts), then raise peer's signal
        signal_index of context context. The peer waits for it with wait_signal. NCCL 2.32.3
        takes local_buffer only inside a registered symmetric window too (else
        ncclInvalidArgument, "srcWinHost is not in a valid symmetric window"), which nccl.h
        does not say; NCCL judges it."""
        handle = self._live()
        s = stream_handle(stream)
        buf = NcclBuffer.resolve(local_buffer, "local_buffer", device=self.device, stream=s)
        peer = self._check_rank(peer, "peer")
        window = self._signal_window(peer_window)
        if isinstance(peer_window_offset, bool) or not isinstance(peer_window_offset, int) or peer_window_offset < 0:
            raise NcclInvalid(f"peer_window_offset: an element offset (an int of at least 0), not "
                              f"{peer_window_offset!r}", "peer_window_offset")
        byte_offset = int(peer_window_offset) * buf.dtype.itemsize
        signal_index = _index(signal_index, "signal_index", "signal_index")
        context = _index(context, "context", "context")
        flags = _flags(flags)
        with self._gate:
            _nccl.put_signal(buf.ptr, buf.count, buf.dtype, peer, window, byte_offset, signal_index, context, flags,
                             handle, s)

    def signal(self, peer: int, signal_index: int = 0, context: int = 0, flags: int = 0, *,
               stream: StreamLike = None) -> None:
        """ncclSignal: raise peer's signal signal_index of context context, without data."""
        handle = self._live()
        peer = self._check_rank(peer, "peer")
        signal_index = _index(signal_index, "signal_index", "signal_index")
        context = _index(context, "context", "context")
        flags = _flags(flags)
        s = stream_handle(stream)
        with self._gate:
            _nccl.signal(peer, signal_index, context, flags, handle, s)

    def wait_signal(self, descs: WaitSignalDesc | Sequence[WaitSignalDesc], *, stream: StreamLike = None) -> None:
        """ncclWaitSignal: make the stream wait until, for each WaitSignalDesc in descs (one or
        a sequence), op_count signals of signal_index / context have come from its peer."""
        handle = self._live()
        if isinstance(descs, WaitSignalDesc):
            descs = (descs,)
        if isinstance(descs, (str, bytes)) or not hasattr(descs, "__iter__"):
            raise NcclInvalid(f"descs: a WaitSignalDesc or a sequence of them, not {type(descs).__name__}", "descs")
        records = []
        for desc in descs:
            if not isinstance(desc, WaitSignalDesc):
                raise NcclInvalid(f"descs: a WaitSignalDesc or a sequence of them, not a {type(desc).__name__} "
                                  "among them", "descs")
            self._check_rank(desc.peer, "descs")
            for name in ("op_count", "signal_index", "context"):
                if getattr(desc, name) < 0:
                    raise NcclInvalid(f"descs: {name} {getattr(desc, name)} is negative", "descs")
            records.append(desc.to_record())
        if not records:
            raise NcclInvalid("descs: no WaitSignalDesc to wait for", "descs")
        s = stream_handle(stream)
        with self._gate:
            _nccl.wait_signal(records, handle, s)

    def _signal_window(self, window) -> int:
        """The ncclWindow_t of peer_window, a window of this communicator that is open."""
        from .resources import RegisteredWindowHandle
        if not isinstance(window, RegisteredWindowHandle):
            raise NcclInvalid(f"peer_window: a RegisteredWindowHandle (register_window), not {type(window).__name__}",
                              "peer_window")
        if window.communicator is not self:
            raise NcclInvalid("peer_window: a window of another communicator", "peer_window")
        if window.closed:
            raise NcclInvalid("peer_window: the window was closed", "peer_window")
        if not window.window:
            raise NcclInvalid("peer_window: NCCL has not given the window a handle yet (a registration in a group "
                              "or on a non-blocking communicator completes first)", "peer_window")
        return window.window
