"""Communicator: an NCCL communicator with Pythonic collectives.

    uid = UniqueId()                                  # on one rank; share its bytes
    with Communicator.init(nranks, rank, uid) as comm:
        comm.all_reduce(x, x)                         # in place, on the default stream
        comm.all_gather(x, y, stream=torch.cuda.current_stream())

Buffers are anything NcclBuffer resolves (torch tensors, CuPy arrays, CUDA
array interface or DLPack objects, (pointer, count, dtype[, device]));
count and dtype come from them and are checked against the collective.
Streams: see core/streams.py (default: the legacy default stream, 0).
Errors: NcclInvalid for arguments rejected here, NcclError subclasses for
NCCL's own failures.
"""
from __future__ import annotations

import warnings

from .. import _nccl
from .._generated.communicator_methods import CommunicatorMethods
from ..errors import NcclInvalid
from ..nccl_enums import NCCL_SPLIT_NOCOLOR, NcclRedOp, NcclResult
from .buffer import NcclBuffer, cached
from .config import comm_config
from .cuda import CudaDeviceContext
from .unique_id import UniqueId
from .variable_count import VariableCountCollectives
from .versions import loaded_version_code
from .watchdog import WatchdogSupport

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from .argument_types import BufferLike, CommConfigLike, DataTypeLike, UniqueIdLike
    from .resources import (CustomRedOp, DevCommResource, NCCLDevCommRequirements, RegisteredBufferHandle,
                            RegisteredWindowHandle)

_resolve = NcclBuffer.resolve


def _unique_id_bytes(uid, argument="unique_id") -> bytes:
    if isinstance(uid, UniqueId):
        return uid.to_bytes()
    if isinstance(uid, (bytes, bytearray, memoryview)) or hasattr(uid, "layout_version"):
        return bytes(uid)
    raise NcclInvalid(f"{argument}: a UniqueId or its 128 bytes, not {type(uid).__name__}", argument)


class Communicator(CommunicatorMethods, VariableCountCollectives, WatchdogSupport):
    """One rank's NCCL communicator. Create with Communicator.init (or
    init_all, split, shrink); release with destroy() (or abort(), or a with
    block). Resources it created (registered buffers and windows, custom ops,
    device communicators) are released first; using anything after it is
    gone raises NcclInvalid.

    The collectives and send/recv (all_reduce, reduce, broadcast, all_gather,
    reduce_scatter, all_to_all, gather, scatter, send, recv) come from
    generator/spec/nccl.toml through CommunicatorMethods; ncclbind.core.calls
    says what each checks."""

    # _gate: every NCCL call that takes _handle enters it (calls.py, the C fast path, the
    # methods below); destroy() closes it and waits for the calls inside before freeing the
    # handle (bindings/python/src/call_gate.h).
    __slots__ = ("_handle", "_device", "_rank", "_nranks", "_resources", "_gate", "__weakref__")

    def __init__(self, handle: int, *, device: int | None = None):
        """Wrap an existing ncclComm_t (an int); it is owned from now on."""
        if not handle:
            raise NcclInvalid("handle: a NULL communicator", "handle")
        self._gate = _nccl._CallGate()
        self._handle = handle
        self._resources = {}
        self._rank = _nccl.comm_user_rank(handle)
        self._nranks = _nccl.comm_count(handle)
        self._device = _nccl.comm_cu_device(handle) if device is None else device

    # ---- creation ---------------------------------------------------------

    @classmethod
    def init(cls, nranks: int, rank: int, unique_id: UniqueIdLike | Sequence[UniqueIdLike], *,
             config: CommConfigLike | None = None, device: int | None = None,
             **config_fields: Any) -> Communicator:
        """Join a communicator of `nranks` as `rank`. unique_id is a UniqueId
        (or its bytes), or a sequence of them (ncclCommInitRankScalable: ranks
        spread their bootstrap over several ids). device: the CUDA device to use
        (default: the current one). config / config_fields: ncclConfig_t fields
        (dict, ncclConfig_t, or keywords such as blocking=0, comm_name="x")."""
        if not isinstance(nranks, int) or nranks < 1:
            raise NcclInvalid(f"nranks must be a positive int, not {nranks!r}", "nranks")
        if not isinstance(rank, int) or not 0 <= rank < nranks:
            raise NcclInvalid(f"rank {rank!r} is out of range for {nranks} ranks", "rank")
        if device is not None and (not isinstance(device, int) or isinstance(device, bool) or device < 0):
            raise NcclInvalid(f"device must be a CUDA device ordinal (int >= 0) or None, not {device!r}", "device")
        cfg = comm_config(config, **config_fields)
        if isinstance(unique_id, (list, tuple)):
            ids = [_unique_id_bytes(u, "unique_id") for u in unique_id]
            if not ids:
                raise NcclInvalid("unique_id: an empty sequence", "unique_id")
        else:
            ids = None
            uid = _unique_id_bytes(unique_id)
        with CudaDeviceContext(device):
            if ids is not None:
                handle = _nccl.comm_init_rank_scalable(nranks, rank, ids, cfg)
            elif cfg is not None:
                handle = _nccl.comm_init_rank_config(nranks, uid, rank, cfg)
            else:
                handle = _nccl.comm_init_rank(nranks, uid, rank)
        return cls(handle, device=device)

    @classmethod
    def init_all(cls, devices: int | Sequence[int]) -> list[Communicator]:
        """One communicator per device in this process (ncclCommInitAll):
        `devices` is a list of CUDA ordinals, or a count n for devices 0..n-1."""
        if isinstance(devices, int):
            devices = list(range(devices))
        devices = [int(d) for d in devices]
        if not devices:
            raise NcclInvalid("devices: at least one device", "devices")
        handles = _nccl.comm_init_all(devices)
        return [cls(h, device=d) for h, d in zip(handles, devices)]

    def split(self, color: int | None, key: int, *, config: CommConfigLike | None = None,
              **config_fields: Any) -> Communicator | None:
        """ncclCommSplit: ranks with the same color form a new communicator,
        ordered by key. color=None (NCCL_SPLIT_NOCOLOR) takes no part: None."""
        handle = self._live()
        color = NCCL_SPLIT_NOCOLOR if color is None else color
        config = comm_config(config, **config_fields)
        with self._gate:
            handle = _nccl.comm_split(handle, color, key, config)
        return type(self)(handle, device=self._device) if handle else None

    def shrink(self, exclude_ranks: Sequence[int], *, flags: int = 0, config: CommConfigLike | None = None,
               **config_fields: Any) -> Communicator:
        """ncclCommShrink: a new communicator without `exclude_ranks`
        (flags: NCCL_SHRINK_DEFAULT, or NCCL_SHRINK_ABORT after a failure)."""
        handle = self._live()
        exclude = [self._check_rank(r, "exclude_ranks") for r in exclude_ranks]
        config = comm_config(config, **config_fields)
        with self._gate:
            handle = _nccl.comm_shrink(handle, exclude, config, flags)
        return type(self)(handle, device=self._device)

    # ---- lifetime --------------------------------------------------------------

    def _live(self) -> int:
        handle = self._handle
        if not handle:
            raise NcclInvalid("the communicator was destroyed or aborted", "comm")
        return handle

    def _adopt(self, resource) -> None:
        self._live()
        self._resources[id(resource)] = resource

    def _forget(self, resource) -> None:
        self._resources.pop(id(resource), None)

    def _release_resources(self, invalidate: bool) -> None:
        ordered = sorted(self._resources.values(), key=lambda r: r.release_order)
        for resource in ordered:
            if invalidate:
                resource._invalidate()
            else:
                resource.close()
        self._resources.clear()

    def _call(self, function, *args):
        """function(handle, *args) for an NCCL call on this communicator, inside its gate."""
        handle = self._live()
        with self._gate:
            return function(handle, *args)

    def finalize(self) -> None:
        """ncclCommFinalize: flush outstanding work (the communicator stays usable for destroy)."""
        self._call(_nccl.comm_finalize)

    # Lifetime and threads: destroy() and abort() first close the gate, so a call that
    # starts afterwards raises NcclInvalid (comm) without reaching NCCL. destroy() then waits
    # for the calls already inside NCCL to return before ncclCommDestroy: a call completes
    # before the destroy, or raises. abort() does not wait: a call blocked inside NCCL (a
    # collective whose peers are gone) returns only because of the abort, and NCCL documents
    # ncclCommAbort from another thread as the way to make it return (with an error); such a
    # call may still be inside NCCL while the handle is aborted, which is NCCL's contract.
    # Whoever closes first frees the handle once (the gate's take()); an abort during a
    # destroy's wait takes it, and the waiting destroy then returns.

    def destroy(self) -> None:
        """Release the resources this communicator made, then ncclCommDestroy. Idempotent;
        from another thread, it waits for calls already inside NCCL (new ones raise)."""
        gate = self._gate
        if not self._handle or not gate.close():
            return
        gate.wait()
        if not gate.take():
            return  # aborted while waiting
        try:
            self._release_resources(invalidate=False)
        finally:
            handle, self._handle = self._handle, 0
            _nccl.comm_destroy(handle)

    close = destroy

    def abort(self) -> None:
        """ncclCommAbort: stop everything now (after a failure); NCCL frees the
        communicator's resources, which are marked closed. Idempotent; from another
        thread, it makes a call blocked inside NCCL return (it does not wait for it)."""
        gate = self._gate
        gate.close()
        if not self._handle or not gate.take():
            return
        self._release_resources(invalidate=True)
        handle, self._handle = self._handle, 0
        _nccl.comm_abort(handle)

    def revoke(self, flags: int = 0) -> None:
        """ncclCommRevoke: make outstanding and future operations fail (fault tolerance)."""
        self._call(_nccl.comm_revoke, flags)

    @property
    def closed(self) -> bool:
        """True once destroyed, aborted or closed (the handle is gone, or going)."""
        return not self._handle or self._gate.closed

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # After a failure, peers may be gone: destroy could wait for them forever.
        if exc_type is None:
            self.destroy()
        else:
            self.abort()

    def __del__(self):
        if getattr(self, "_handle", 0):
            warnings.warn(f"{self!r} was not destroyed; call destroy() or use a with block",
                          ResourceWarning, stacklevel=2)

    def __repr__(self) -> str:
        if not self._handle:
            return "Communicator(destroyed)"
        return f"Communicator(rank={self._rank}, nranks={self._nranks}, device={self._device})"

    # ---- properties --------------------------------------------------------

    @property
    def handle(self) -> int:
        """The ncclComm_t, as an int (for the low-level ncclbind._nccl functions)."""
        return self._live()

    @property
    def rank(self) -> int:
        """This process's rank in the communicator."""
        return self._rank

    @property
    def nranks(self) -> int:
        """The number of ranks in the communicator."""
        return self._nranks

    @property
    def device(self) -> int:
        """The CUDA device the communicator uses."""
        return self._device

    def properties(self):
        """ncclCommQueryProperties (NCCL 2.32.3+): an ncclCommProperties_t."""
        return self._call(_nccl.comm_query_properties)

    @property
    def device_api_support(self) -> bool:
        """Whether device-side (kernel) communication works on this communicator."""
        return bool(self.properties().deviceApiSupport)

    @property
    def multimem_support(self) -> bool:
        """Whether NCCL reports multimem (NVLS) support for this communicator (ncclCommQueryProperties)."""
        return bool(self.properties().multimemSupport)

    @property
    def gin_type(self):
        """The GPU-initiated networking type (NcclGinType)."""
        from ..nccl_enums import NcclGinType
        return NcclGinType(self.properties().ginType)

    def get_last_error(self) -> str:
        """ncclGetLastError for this communicator."""
        return self._call(_nccl.get_last_error) or ""

    def get_async_error(self) -> NcclResult:
        """ncclCommGetAsyncError: NcclResult.SUCCESS, IN_PROGRESS, or the error."""
        return NcclResult(self._call(_nccl.comm_get_async_error))

    def _has(self, function: str) -> bool:
        """Whether the loaded library has a C function (by the version that added it)."""
        since = _nccl.since.get(function)
        return since is not None and loaded_version_code() >= since[1]

    # ---- argument checks ---------------------------------------------------------

    def _check_rank(self, rank, argument: str) -> int:
        if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < self._nranks:
            return int(rank)
        raise NcclInvalid(f"{argument} {rank!r} is out of range for {self._nranks} ranks", argument)

    _check_peer = _check_rank

    def _op(self, op, dtype) -> int:
        if isinstance(op, bool):
            raise NcclInvalid(f"op: {op!r} is a bool, not a reduction op", "op")
        if type(op) is int or isinstance(op, NcclRedOp):
            return op
        value_for = getattr(op, "value_for", None)
        if value_for is not None:
            return value_for(self, dtype)
        if isinstance(op, str):
            try:
                return NcclRedOp[op.upper()]
            except KeyError:
                raise NcclInvalid(f"op: no reduction op named {op!r}", "op") from None
        if isinstance(op, int):
            return op
        raise NcclInvalid(f"op: an NcclRedOp, a CustomRedOp or a name, not {type(op).__name__}", "op")

    def _buffer(self, obj, argument: str, writable: bool, stream: int) -> NcclBuffer:
        buf = cached(obj)
        if buf is None or (writable and buf.readonly) or (buf.device is not None and buf.device != self._device):
            buf = _resolve(obj, argument, writable=writable, device=self._device, stream=stream)
        return buf

    # ---- resources ---------------------------------------------------------------------

    def register_buffer(self, buffer: BufferLike) -> RegisteredBufferHandle:
        """ncclCommRegister: a RegisteredBufferHandle, released before the communicator."""
        from .resources import RegisteredBufferHandle
        self._live()
        return RegisteredBufferHandle(self, _resolve(buffer, "buffer", device=self._device))

    def register_window(self, buffer: BufferLike, flags: int = 0) -> RegisteredWindowHandle:
        """ncclCommWindowRegister (collective: every rank calls it): a RegisteredWindowHandle.
        flags: NCCL_WIN_DEFAULT, NCCL_WIN_COLL_SYMMETRIC, ..."""
        from .resources import RegisteredWindowHandle
        self._live()
        return RegisteredWindowHandle(self, _resolve(buffer, "buffer", device=self._device), flags)

    def create_pre_mul_sum(self, scalar: float | BufferLike, dtype: DataTypeLike | None = None) -> CustomRedOp:
        """A CustomRedOp: sum after multiplying each input by `scalar` (a host
        number, with `dtype`; or a one-element device buffer)."""
        from .resources import CustomRedOp
        self._live()
        return CustomRedOp(self, scalar, dtype)

    def create_dev_comm(self, requirements: NCCLDevCommRequirements | None = None) -> DevCommResource:
        """ncclDevCommCreate (collective): a DevCommResource for device kernels."""
        from .resources import DevCommResource
        self._live()
        return DevCommResource(self, requirements)

