"""What a Communicator owns: registered buffers and windows, custom reduction
ops, device communicators. Each is released before its communicator is
destroyed (device communicators, then windows, then buffers, then ops), can be
closed early (close() or a with block), and raises NcclInvalid when used after
it was closed."""
from __future__ import annotations

import struct

from .. import _nccl
from .._generated.window_methods import WindowMethods
from ..errors import NcclInvalid, NcclSymbolNotFoundError
from ..nccl_enums import NcclDataType, NcclScalarResidence
from .buffer import NcclBuffer
from .config import field_name, fill
from .streams import stream_handle

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from .argument_types import BufferLike, DataTypeLike, StreamLike
    from .communicator import Communicator


class CommResource:
    """Base: tied to one Communicator, released before it."""

    release_order = 9  # lower goes first when the communicator is destroyed
    __slots__ = ("_comm", "_closed", "__weakref__")

    def __init__(self, comm: Communicator):
        self._comm = comm
        self._closed = False
        comm._adopt(self)

    @property
    def closed(self) -> bool:
        """True once released (by close, or with its communicator)."""
        return self._closed

    @property
    def communicator(self):
        return self._comm

    def close(self) -> None:
        """Release it now (idempotent)."""
        if self._closed:
            return
        try:
            self._release()
        finally:
            self._closed = True
            self._comm._forget(self)

    def _release(self) -> None:  # the NCCL call that frees it
        raise NotImplementedError

    def _invalidate(self) -> None:
        """The communicator was aborted: NCCL freed everything; make no call."""
        self._closed = True

    def _check_open(self, what: str = "used") -> None:
        if self._closed:
            raise NcclInvalid(f"{type(self).__name__} was closed (or its communicator destroyed) and cannot be {what}",
                              type(self).__name__)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RegisteredBufferHandle(CommResource):
    """A buffer registered with ncclCommRegister (zero-copy for some collectives)."""

    release_order = 3
    __slots__ = ("handle", "buffer")

    def __init__(self, comm: Communicator, buffer: NcclBuffer):
        self.buffer = buffer
        self.handle = comm._call(_nccl.comm_register, buffer.ptr, buffer.nbytes)
        super().__init__(comm)

    def _release(self) -> None:
        _nccl.comm_deregister(self._comm.handle, self.handle)

    def __repr__(self) -> str:
        return f"RegisteredBufferHandle({self.buffer!r}{', closed' if self._closed else ''})"


class RegisteredWindowHandle(CommResource, WindowMethods):
    """A window registered with ncclCommWindowRegister. Host RMA calls
    (put_signal, signal, wait_signal) exist where the loaded library has them
    (NCCL 2.32.3 and later); has_rma says whether it does. The device-pointer
    queries (lsa_pointer, peer_pointer, multimem_pointer) come from
    generator/spec/nccl.toml through WindowMethods."""

    release_order = 2
    __slots__ = ("window", "buffer", "flags")

    def __init__(self, comm: Communicator, buffer: NcclBuffer, flags: int = 0):
        self.buffer = buffer
        self.flags = flags
        self.window = comm._call(_nccl.comm_window_register, buffer.ptr, buffer.nbytes, flags)
        super().__init__(comm)

    def _release(self) -> None:
        _nccl.comm_window_deregister(self._comm.handle, self.window)

    @property
    def has_rma(self) -> bool:
        """Whether the loaded NCCL has the one-sided calls (ncclPutSignal, ncclSignal, ncclWaitSignal)."""
        return all(self._comm._has(name) for name in ("ncclPutSignal", "ncclSignal", "ncclWaitSignal"))

    def put_signal(self, localbuf: BufferLike, peer: int, peer_offset: int = 0, *, signal_index: int = 0,
                   context: int = 0, flags: int = 0, stream: StreamLike = None) -> None:
        """ncclPutSignal: write `localbuf` into peer's window at byte offset
        `peer_offset`, then raise the peer's signal `signal_index`."""
        self._check_open()
        comm = self._comm
        s = stream_handle(stream)
        buf = NcclBuffer.resolve(localbuf, "localbuf", device=comm.device, stream=s)
        comm._check_peer(peer, "peer")
        handle = comm.handle
        with comm._gate:
            _nccl.put_signal(buf.ptr, buf.count, buf.dtype, peer, self.window, peer_offset, signal_index, context,
                             flags, handle, s)

    def signal(self, peer: int, *, signal_index: int = 0, context: int = 0, flags: int = 0,
               stream: StreamLike = None) -> None:
        """ncclSignal: raise peer's signal `signal_index` without data."""
        self._check_open()
        comm = self._comm
        comm._check_peer(peer, "peer")
        s = stream_handle(stream)
        handle = comm.handle
        with comm._gate:
            _nccl.signal(peer, signal_index, context, flags, handle, s)

    def wait_signal(self, signals: Sequence[Any], *, stream: StreamLike = None) -> None:
        """ncclWaitSignal: wait on the stream until each (peer, signal_index,
        context, op_count) in `signals` has arrived."""
        self._check_open()
        comm = self._comm
        descs = []
        for peer, signal_index, context, op_count in signals:
            comm._check_peer(peer, "signals")
            descs.append(_nccl.ncclWaitSignalDesc_t(opCnt=op_count, peer=peer, sigIdx=signal_index, ctx=context))
        doc = _nccl.wait_signal.__doc__ or ""
        if "signalDescs" not in doc.split("--", 1)[0]:
            # The generated binding reads signalDescs as an out-parameter until
            # conventions.toml gives it "in[nDesc]"; calling it would send zeroed descriptors.
            raise NcclSymbolNotFoundError("wait_signal: the generated ncclWaitSignal binding does not take the "
                                          "descriptors yet (conventions.toml: \"ncclWaitSignal.signalDescs\" = "
                                          "\"in[nDesc]\")", function="ncclWaitSignal")
        s = stream_handle(stream)
        handle = comm.handle
        with comm._gate:
            _nccl.wait_signal(descs, handle, s)

    def __repr__(self) -> str:
        return f"RegisteredWindowHandle({self.buffer!r}, flags={self.flags}{', closed' if self._closed else ''})"


def _scalar_bytes(value, dtype: NcclDataType) -> bytes:
    """A host scalar in dtype's encoding (little-endian, as on every CUDA host)."""
    name = dtype.dtype_name
    formats = {"int8": "<b", "uint8": "<B", "int32": "<i", "uint32": "<I", "int64": "<q", "uint64": "<Q",
               "float16": "<e", "float32": "<f", "float64": "<d"}
    if name in formats:
        return struct.pack(formats[name], value)
    if name == "bfloat16":  # the high half of the float32, rounded to nearest even
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
        bits += 0x7FFF + ((bits >> 16) & 1)
        return struct.pack("<H", (bits >> 16) & 0xFFFF)
    raise NcclInvalid(f"scalar: a host scalar of {name} is not supported; pass it as a device buffer", "scalar")


class CustomRedOp(CommResource):
    """A reduction op made by ncclRedOpCreatePreMulSum: sum of inputs each
    multiplied by `scalar` first. Pass it as `op` to this communicator's
    collectives of the same dtype. The scalar is a host number (read once,
    ncclScalarHostImmediate) or a one-element device buffer (read at each
    collective, ncclScalarDevice; kept alive here)."""

    release_order = 4
    __slots__ = ("op", "dtype", "residence", "scalar")

    def __init__(self, comm: Communicator, scalar: float | BufferLike, dtype: DataTypeLike | None = None):
        if isinstance(scalar, (int, float)) and not isinstance(scalar, bool):
            if dtype is None:
                raise NcclInvalid("dtype: a host scalar needs the collective's dtype", "dtype")
            self.dtype = NcclDataType.from_dtype(dtype, "dtype")
            self.residence = NcclScalarResidence.HOST_IMMEDIATE
            self.scalar = scalar
            pointer = bytearray(_scalar_bytes(scalar, self.dtype))  # void *scalar: a writable buffer
        else:
            buf = NcclBuffer.resolve(scalar, "scalar", device=comm.device)
            if buf.count != 1:
                raise NcclInvalid(f"scalar: a device scalar is one element, not {buf.count}", "scalar")
            self.dtype = buf.dtype if dtype is None else NcclDataType.from_dtype(dtype, "dtype")
            if self.dtype != buf.dtype:
                raise NcclInvalid(f"scalar is {buf.dtype.name}, dtype is {self.dtype.name}", "scalar")
            self.residence = NcclScalarResidence.DEVICE
            self.scalar = buf
            pointer = buf.ptr
        handle = comm.handle
        with comm._gate:
            self.op = _nccl.red_op_create_pre_mul_sum(pointer, self.dtype, self.residence, handle)
        super().__init__(comm)

    def _release(self) -> None:
        _nccl.red_op_destroy(self.op, self._comm.handle)

    def value_for(self, comm: Communicator, dtype: DataTypeLike) -> int:
        """The op's value, checked against the collective that uses it."""
        self._check_open()
        if comm is not self._comm:
            raise NcclInvalid("op: this CustomRedOp belongs to another communicator", "op")
        if dtype != self.dtype:
            raise NcclInvalid(f"op: this CustomRedOp was made for {self.dtype.name}, the buffers are {dtype.name}",
                              "op")
        return self.op

    def __index__(self) -> int:
        self._check_open()
        return self.op

    def __repr__(self) -> str:
        where = "device" if self.residence == NcclScalarResidence.DEVICE else "host"
        return f"CustomRedOp(op={self.op}, {where} scalar, dtype={self.dtype.name}{', closed' if self._closed else ''})"


class NCCLDevCommRequirements:
    """ncclDevCommRequirements_t in the loaded library's layout (its initializer
    applied where the layout has one), set by C or snake_case field names:

        reqs = NCCLDevCommRequirements(lsa_barrier_count=1)
        reqs.ginContextCount = 4

    A field the loaded layout lacks raises NcclInvalid at once."""

    __slots__ = ("record",)

    def __init__(self, **fields: Any):
        object.__setattr__(self, "record", _nccl.nccl_dev_comm_requirements_initializer())
        fill(self.record, fields)

    def __getattr__(self, name):
        return getattr(self.record, field_name(type(self.record), name))

    def __setattr__(self, name, value):
        fill(self.record, {name: value})

    def __repr__(self) -> str:
        return f"NCCLDevCommRequirements({self.record!r})"


class DevCommResource(CommResource):
    """A device communicator (ncclDevCommCreate): `dev_comm` is the
    ncclDevComm_t to hand to device kernels (by value: bytes(dev_comm))."""

    release_order = 1
    __slots__ = ("dev_comm", "requirements")

    def __init__(self, comm: Communicator, requirements: NCCLDevCommRequirements | None = None):
        self.requirements = requirements if requirements is not None else NCCLDevCommRequirements()
        record = getattr(self.requirements, "record", self.requirements)
        self.dev_comm = comm._call(_nccl.dev_comm_create, record)
        super().__init__(comm)

    def _release(self) -> None:
        _nccl.dev_comm_destroy(self._comm.handle, self.dev_comm)

    def to_bytes(self) -> bytes:
        """The ncclDevComm record as bytes, to pass to a device kernel."""
        self._check_open()
        return bytes(self.dev_comm)

    def __repr__(self) -> str:
        return f"DevCommResource(rank={self.dev_comm.rank}, nRanks={self.dev_comm.nRanks}" \
               f"{', closed' if self._closed else ''})"
