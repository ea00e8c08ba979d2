"""CUDA streams as ints.

A stream argument is None (the default: the CUDA legacy default stream,
handle 0, which is the stream torch and CuPy use unless you switched), an int
cudaStream_t, an object with __cuda_stream__ (returning (version, handle)), a
torch.cuda.Stream (.cuda_stream) or a CuPy stream (.ptr).
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from ..core.argument_types import StreamLike

DEFAULT_STREAM = 0

# The last stream object and its handle: a stream object's handle does not change, so a
# loop passing one stream object reads it once (the C fast path, call_engine.c, remembers
# the same one). Holding the object keeps its identity from being reused.
_known: tuple = (None, DEFAULT_STREAM)


def stream_handle(stream: StreamLike, argument: str = "stream") -> int:
    """The cudaStream_t of `stream` as an int: None (the default stream), an int, an object with
    __cuda_stream__, or a torch / CuPy stream; NcclInvalid naming `argument` otherwise."""
    global _known
    if stream is None:
        return DEFAULT_STREAM
    if type(stream) is int and 0 <= stream < 1 << 64:
        return stream
    if stream is _known[0]:
        return _known[1]
    handle = _read_handle(stream, argument)
    if not 0 <= handle < 1 << 64:  # a cudaStream_t is a pointer
        from ..errors import NcclInvalid
        raise NcclInvalid(f"{argument}: {handle} is not a CUDA stream handle (a pointer: 0 to 2**64 - 1)", argument)
    _known = (stream, handle)
    return handle


def _read_handle(stream, argument: str) -> int:
    if isinstance(stream, bool):
        from ..errors import NcclInvalid
        raise NcclInvalid(f"{argument}: {stream!r} is a bool, not a CUDA stream", argument)
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        value = protocol() if callable(protocol) else protocol
        value = value[1] if isinstance(value, tuple) and len(value) == 2 else value
        if isinstance(value, int) and not isinstance(value, bool):
            return int(value)
        from ..errors import NcclInvalid
        raise NcclInvalid(f"{argument}: its __cuda_stream__ gave {value!r}, not a stream handle", argument)
    for attribute in ("cuda_stream", "ptr", "handle"):  # torch, CuPy, cuda.core
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value
    if isinstance(stream, int):
        return int(stream)
    from ..errors import NcclInvalid
    raise NcclInvalid(f"{argument}: {type(stream).__name__} is not a CUDA stream (pass an int handle, "
                      "an object with __cuda_stream__, a torch or CuPy stream, or None)", argument)
