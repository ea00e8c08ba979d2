"""What a Communicator owns: registered buffers and windows, custom reduction
ops, device communicators. Each is released before its communicator is
destroyed (device communicators, then windows, then buffers, then ops), can be
closed early (close() or a with block), and raises NcclInvalid when used after
it was closed."""
from __future__ import annotations

import struct

from .. import _nccl
from .._generated.window_methods import WindowMethods
from ..errors import NcclInvalid
from ..nccl_enums import NcclDataType, NcclScalarResidence, WindowFlag
from ..base.buffer import NcclBuffer

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from .argument_types import BufferLike, DataTypeLike
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
    """A buffer registered with ncclCommRegister (zero-copy for some collectives): the
    `size` bytes at device address `buffer_ptr` (nccl4py's arguments). Communicator.register_buffer
    makes one from a buffer object, which it keeps alive as `buffer` (None when made from an
    address: the caller keeps the memory alive)."""

    release_order = 3
    __slots__ = ("handle", "buffer", "_buffer_ptr", "_size")

    def __init__(self, comm: Communicator, buffer_ptr: int, size: int, *, buffer: NcclBuffer | None = None):
        _check_registration(comm, buffer_ptr, size)
        self.buffer = buffer
        self._buffer_ptr = buffer_ptr
        self._size = size
        self.handle = comm._call(_nccl.comm_register, buffer_ptr, size)
        super().__init__(comm)

    def _release(self) -> None:
        _nccl.comm_deregister(self._comm.handle, self.handle)

    @property
    def is_valid(self) -> bool:
        """Whether the buffer is still registered (not closed, nor released with its communicator)."""
        return not self._closed

    @property
    def size(self) -> int:
        """The registered size in bytes."""
        return self._size

    def __repr__(self) -> str:
        what = repr(self.buffer) if self.buffer is not None else f"{self._buffer_ptr:#x}, {self._size} bytes"
        return f"RegisteredBufferHandle({what}{', closed' if self._closed else ''})"


def _check_registration(comm, buffer_ptr, size) -> None:
    """What ncclCommRegister / ncclCommWindowRegister take, checked before NCCL sees it."""
    from .communicator import Communicator
    if not isinstance(comm, Communicator):
        raise NcclInvalid(f"comm: an ncclbind Communicator, not {type(comm).__name__}", "comm")
    for name, value in (("buffer_ptr", buffer_ptr), ("size", size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise NcclInvalid(f"{name}: an int of at least 0 (a device {'address' if name == 'buffer_ptr' else 'byte count'}), "
                              f"not {value!r}", name)


class RegisteredWindowHandle(CommResource, WindowMethods):
    """A window registered with ncclCommWindowRegister (collective: every rank registers one):
    the `size` bytes at device address `buffer_ptr`, with `flags` (a WindowFlag; None: DEFAULT).
    Communicator.register_window makes one from a buffer object, kept alive as `buffer` (None
    when made from an address). The one-sided calls that use it (put_signal, signal,
    wait_signal) are the communicator's; the device-pointer and LE-info queries
    (get_lsa_device_pointer, get_peer_device_pointer, get_*_le_info, ...) come from
    policy/nccl.toml through WindowMethods."""

    release_order = 2
    __slots__ = ("window", "buffer", "flags", "_buffer_ptr", "_size")

    def __init__(self, comm: Communicator, buffer_ptr: int, size: int, flags: int | None = None, *,
                 buffer: NcclBuffer | None = None):
        _check_registration(comm, buffer_ptr, size)
        if flags is None:
            flags = WindowFlag.DEFAULT
        if isinstance(flags, bool) or not isinstance(flags, int) or flags < 0:
            raise NcclInvalid(f"flags: window flags (a WindowFlag or an int >= 0), not {flags!r}", "flags")
        self.buffer = buffer
        self.flags = WindowFlag(flags)
        self._buffer_ptr = buffer_ptr
        self._size = size
        self.window = comm._call(_nccl.comm_window_register, buffer_ptr, size, int(flags))
        super().__init__(comm)

    def _release(self) -> None:
        _nccl.comm_window_deregister(self._comm.handle, self.window)

    def _live_window(self) -> int:
        """The ncclWindow_t for a call on it (the generated WindowMethods): the window open and
        its communicator live, else NcclInvalid."""
        self._check_open()
        self._comm._live()
        return self.window

    @property
    def is_valid(self) -> bool:
        """Whether the window is still registered (not closed, and NCCL gave a handle)."""
        return not self._closed and bool(self.window)

    @property
    def handle(self) -> int:
        """The ncclWindow_t as an int; 0 once closed (or while a grouped or non-blocking
        registration has not filled it)."""
        return 0 if self._closed else self.window

    @property
    def size(self) -> int:
        """The window's size in bytes."""
        return self._size

    @property
    def user_ptr(self) -> int:
        """The device address the window was registered at (NcclInvalid once closed)."""
        self._check_open()
        return self._buffer_ptr

    @property
    def has_rma(self) -> bool:
        """Whether the loaded NCCL has the one-sided calls (ncclPutSignal, ncclSignal, ncclWaitSignal)."""
        return all(self._comm._has(name) for name in ("ncclPutSignal", "ncclSignal", "ncclWaitSignal"))

    def __repr__(self) -> str:
        what = repr(self.buffer) if self.buffer is not None else f"{self._buffer_ptr:#x}, {self._size} bytes"
        return f"RegisteredWindowHandle({what}, flags={self.flags!r}{', closed' if self._closed else ''})"


def _scalar_bytes(value, dtype: NcclDataType) -> bytes:
    """A host scalar in dtype's encoding (little-endian, as on every CUDA host)."""
    name = dtype.dtype_name
    formats = {"int8": "<b", "uint8": "<B", "int32": "<i", "uint32": "<I", "int64": "<q", "uint64": "<Q",
               "float16": "<e", "float32": "<f", "float64": "<d"}
    if name in formats:
        try:
            return struct.pack(formats[name], value)
        except (struct.error, OverflowError) as e:
            raise NcclInvalid(f"scalar {value!r} does not fit {name}: {e}", "scalar") from None
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
        if type(scalar).__module__ == "numpy" and hasattr(scalar, "dtype"):  # a host array or scalar
            if getattr(scalar, "size", 1) != 1:
                raise NcclInvalid(f"scalar: a host array of one element, not {scalar.size}", "scalar")
            held = NcclDataType.from_dtype(scalar.dtype, "scalar")
            if dtype is not None and NcclDataType.from_dtype(dtype, "datatype") != held:
                raise NcclInvalid(f"scalar is {held.name}, datatype is {NcclDataType.from_dtype(dtype).name}",
                                  "scalar")
            scalar, dtype = scalar.item(), held
        if isinstance(scalar, (int, float)) and not isinstance(scalar, bool):
            # nccl4py's inference: a Python int is int64, a float float64 (NumPy's own types)
            inferred = NcclDataType.INT64 if isinstance(scalar, int) else NcclDataType.FLOAT64
            self.dtype = inferred if dtype is None else NcclDataType.from_dtype(dtype, "datatype")
            self.residence = NcclScalarResidence.HOST_IMMEDIATE
            self.scalar = scalar
            pointer = bytearray(_scalar_bytes(scalar, self.dtype))  # void *scalar: a writable buffer
        else:
            buf = NcclBuffer.resolve(scalar, "scalar", device=comm.device)
            if buf.count != 1:
                raise NcclInvalid(f"scalar: a device scalar is one element, not {buf.count}", "scalar")
            self.dtype = buf.dtype if dtype is None else NcclDataType.from_dtype(dtype, "datatype")
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
