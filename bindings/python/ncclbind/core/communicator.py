"""Communicator: an NCCL communicator with Pythonic collectives.

    uid = get_unique_id()                             # on one rank; share its bytes
    with Communicator.init(nranks, rank, uid) as comm:
        comm.all_reduce(x, x)                         # in place, on the default stream
        comm.all_gather(x, y, stream=torch.cuda.current_stream())

Buffers are anything NcclBuffer resolves (torch tensors, CuPy arrays, CUDA
array interface or DLPack objects, (pointer, count, dtype[, device]));
count and dtype come from them and are checked against the collective.
Streams: see base/streams.py (default: the legacy default stream, 0).
Errors: NcclInvalid for arguments rejected here, NcclError subclasses for
NCCL's own failures.
"""
from __future__ import annotations

import operator

from .. import _nccl
from .._generated.communicator_methods import CommunicatorMethods
from ..errors import NcclError, NcclInvalid
from ..nccl_enums import NCCL_SPLIT_NOCOLOR, CommShrinkFlag, NcclRedOp, NcclResult
from ..base import comm_interface
from ..base.buffer import NcclBuffer, cached
from ..base.config import comm_config
from ..base.cuda import CudaDevice, CudaDeviceContext
from ..base.unique_id import UniqueId
from .signals import SignalMethods
from .._generated.variable_count_methods import VariableCountMethods
from .versions import loaded_version_code
from ..base.lifetime import Destroyable
from ..base.watchdog import WatchdogSupport

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from .. import NCCLCommProperties
    from ..nccl_enums import NcclGinType
    from .argument_types import BufferLike, CommConfigLike, DataTypeLike, UniqueIdLike
    from .dev_comm import DevCommResource, NCCLDevCommRequirements
    from .resources import CustomRedOp, RegisteredBufferHandle, RegisteredWindowHandle

_resolve = NcclBuffer.resolve
# How long abort() lets the calls already past the gate return before it frees the handle: a call
# that is not blocked in NCCL takes microseconds; after a revoke, a blocked one returns.
ABORT_GRACE_S = 0.05
REVOKE_GRACE_S = 1.0
_BUILTIN_OPS = frozenset(int(m) for m in NcclRedOp)  # NCCL's own ops (the headers' ncclRedOp_t, but its count)


def _unique_id_bytes(uid, argument="unique_id") -> bytes:
    if isinstance(uid, UniqueId):
        return uid.to_bytes()
    if isinstance(uid, (bytes, bytearray, memoryview)) or hasattr(uid, "layout_version"):
        return bytes(uid)
    raise NcclInvalid(f"{argument}: a UniqueId or its 128 bytes, not {type(uid).__name__}", argument)


def _check_new_rank(nranks, rank) -> None:
    """The size and this rank of a communicator being made (init, initialize, grow's new rank)."""
    if isinstance(nranks, bool) or not isinstance(nranks, int) or nranks < 1:
        raise NcclInvalid(f"nranks must be a positive int, not {nranks!r}", "nranks")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < nranks:
        raise NcclInvalid(f"rank {rank!r} is out of range for {nranks} ranks", "rank")


class Communicator(CommunicatorMethods, VariableCountMethods, WatchdogSupport, SignalMethods, Destroyable):
    """One rank's NCCL communicator. Create with Communicator.init (or
    init_all, split, shrink); release with destroy() (or abort(), or a with
    block). Resources it created (registered buffers and windows, custom ops,
    device communicators) are released first; using anything after it is
    gone raises NcclInvalid.

    The collectives and send/recv (all_reduce, reduce, broadcast, all_gather,
    reduce_scatter, all_to_all, gather, scatter, send, recv) come from
    policy/nccl.toml through CommunicatorMethods, each generated as its own
    code (ncclbind/_generated/communicator_methods.py says what each checks)."""

    # The slots generated code and the C fast path read (_handle, _device, _rank, _nranks, _gate)
    # are declared in base/comm_interface.py; _gate: every NCCL call that takes _handle enters it,
    # and destroy() closes it and waits for the calls inside before freeing the handle
    # (bindings/python/src/call_gate.h).
    __slots__ = tuple(name for name, _ in comm_interface.SLOTS) + ("_properties", "_resources", "__weakref__")

    def __init__(self, ptr: int | None = None, *, device: int | None = None):
        """Wrap an existing ncclComm_t (an int), owned from now on; Communicator() (ptr None
        or 0) is a null communicator: initialize() makes it one, or grow(..., rank=r) joins
        an existing communicator as a new rank through it (nccl4py's meaning)."""
        if ptr is not None and (isinstance(ptr, bool) or not isinstance(ptr, int) or ptr < 0):
            raise NcclInvalid(f"ptr: an ncclComm_t address (int) or None, not {ptr!r}", "ptr")
        self._gate = _nccl._CallGate()
        self._resources = {}
        self._handle = 0
        self._rank = self._nranks = self._device = self._properties = None
        if ptr:
            self._own(ptr, device)

    def _own(self, handle: int, device: int | None) -> None:
        self._rank = _nccl.comm_user_rank(handle)
        self._nranks = _nccl.comm_count(handle)
        self._device = int(_nccl.comm_cu_device(handle) if device is None else device)  # exact int: call_engine.c
        self._handle = handle

    def _made(self, handle: int) -> Communicator:
        """A communicator this one's call made (on its device); a null one for a NULL handle."""
        return type(self)(handle, device=self._device) if handle else type(self)()

    # ---- creation ---------------------------------------------------------

    @classmethod
    def init(cls, nranks: int, rank: int, unique_id: UniqueIdLike | Sequence[UniqueIdLike],
             config: CommConfigLike | None = None, *, device: int | None = None,
             **config_fields: Any) -> Communicator:
        """Join a communicator of `nranks` as `rank`. unique_id is a UniqueId
        (or its bytes), or a sequence of them (ncclCommInitRankScalable: ranks
        spread their bootstrap over several ids). config / config_fields: an NCCLConfig,
        an ncclConfig_t, a dict of its fields, or keywords (blocking=0, comm_name="x").
        device: the CUDA device to use (default: the current one)."""
        comm = cls()
        comm.initialize(nranks, rank, unique_id, config, device=device, **config_fields)
        return comm

    def initialize(self, nranks: int, rank: int, unique_id: UniqueIdLike | Sequence[UniqueIdLike],
                   config: CommConfigLike | None = None, *, device: int | None = None,
                   **config_fields: Any) -> None:
        """init() on this null communicator (Communicator()): it becomes rank `rank` of `nranks`."""
        if self._handle or self._gate.closed:
            raise NcclInvalid("initialize: the communicator is already initialized (or was destroyed); "
                              "initialize a null Communicator()", "self")
        _check_new_rank(nranks, rank)
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
        self._own(handle, device)

    @classmethod
    def init_all(cls, devices: int | Sequence[int] | None = None) -> list[Communicator]:
        """One communicator per device in this process (ncclCommInitAll), rank i on
        devices[i]: `devices` is a list of CUDA ordinals, a count n for devices 0..n-1, or
        None for every visible device. No device (0, [], none visible): [] without NCCL."""
        from ..base.cuda import device_count
        if devices is None:
            devices = device_count()
        if isinstance(devices, bool):
            raise NcclInvalid(f"devices: an int, a sequence of ints or None, not {devices!r}", "devices")
        if isinstance(devices, int):
            if devices < 0:
                raise NcclInvalid(f"devices: a count of at least 0, not {devices}", "devices")
            devices = range(devices)
        if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__"):
            raise NcclInvalid(f"devices: an int, a sequence of ints or None, not {type(devices).__name__}",
                              "devices")
        devices = list(devices)
        for d in devices:
            if isinstance(d, bool) or not isinstance(d, int) or d < 0:
                raise NcclInvalid(f"devices: {d!r} is not a CUDA device ordinal (int >= 0)", "devices")
        if not devices:
            return []
        handles = _nccl.comm_init_all(devices)
        return [cls(h, device=d) for h, d in zip(handles, devices)]

    def split(self, color: int | None = None, key: int = 0, config: CommConfigLike | None = None,
              **config_fields: Any) -> Communicator:
        """ncclCommSplit (collective): ranks with the same color form a new communicator,
        ordered by key. color None (NCCL_SPLIT_NOCOLOR) takes no part and gets a null
        Communicator (is_valid False)."""
        handle = self._live()
        color = NCCL_SPLIT_NOCOLOR if color is None else color
        config = comm_config(config, **config_fields)
        with self._gate:
            handle = _nccl.comm_split(handle, color, key, config)
        return self._made(handle)

    def shrink(self, exclude_ranks: Sequence[int] | None = None, config: CommConfigLike | None = None,
               flag: int = CommShrinkFlag.DEFAULT, *, flags: int | None = None,
               **config_fields: Any) -> Communicator:
        """ncclCommShrink: a new communicator without `exclude_ranks` (None: none excluded).
        flag: CommShrinkFlag.DEFAULT, or ABORT after a failure (`flags=` is the same)."""
        handle = self._live()
        if flags is not None:
            flag = flags
        exclude = [self._check_rank(r, "exclude_ranks") for r in (exclude_ranks or ())]
        config = comm_config(config, **config_fields)
        with self._gate:
            handle = _nccl.comm_shrink(handle, exclude, config, int(flag))
        return self._made(handle)

    def grow(self, nranks: int, unique_id: UniqueIdLike | None = None, rank: int | None = None,
             config: CommConfigLike | None = None, **config_fields: Any) -> Communicator:
        """ncclCommGrow (collective over old and new ranks): a communicator of `nranks`.
        Existing ranks call it on their communicator with rank None (the one that called
        get_unique_id passes that id, the others None); a new rank calls it on a null
        Communicator() with the id and its rank (>= the old size). rank -1 is None (NCCL's value)."""
        if rank is not None and not (type(rank) is int and rank == -1):
            if self._handle or self._gate.closed:
                raise NcclInvalid("grow: a new rank (rank given) joins through a null Communicator()", "rank")
            _check_new_rank(nranks, rank)
            if unique_id is None:
                raise NcclInvalid("unique_id: a new rank needs the id from the root's get_unique_id()", "unique_id")
            uid = _unique_id_bytes(unique_id)
            handle = _nccl.comm_grow(0, nranks, uid, rank, comm_config(config, **config_fields))
            return type(self)(handle)
        if not self._handle:
            raise NcclInvalid("grow: an existing rank grows its initialized communicator "
                              "(a new rank passes rank=)", "self")
        return super().grow(nranks, unique_id, -1, config=comm_config(config, **config_fields))

    # ---- lifetime --------------------------------------------------------------

    def _live(self) -> int:
        handle = self._handle
        if not handle:
            if self._gate.closed:
                raise NcclInvalid("the communicator was destroyed or aborted", "comm")
            raise NcclInvalid("the communicator is null (Communicator() not initialized: initialize() it)", "comm")
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

    # Lifetime and threads (the model, stated in docs/guarantees.md, "Threads"): destroy() and abort()
    # first close the gate, so a call that starts afterwards raises NcclInvalid (comm) without
    # reaching NCCL. destroy() then waits for the calls already inside to return before
    # ncclCommDestroy: a call completes before the destroy, or raises. abort() waits for them too,
    # but only ABORT_GRACE_S: a call that is not blocked leaves in microseconds, and the handle is
    # never freed under it. A call still inside after that is blocked in NCCL (a collective whose
    # peers are gone), and returns only because of an abort: where the library has
    # ncclCommRevoke (NCCL 2.28.9 on), abort revokes first (which stops the communicator's work and
    # frees nothing) and grants REVOKE_GRACE_S; then ncclCommAbort, NCCL's documented way
    # to end a blocked call, which a call still blocked inside sees as an error. Whoever closes
    # first frees the handle once (the gate's take()); an abort during a destroy's wait takes it,
    # and the waiting destroy then returns.

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
        communicator's resources, which are marked closed. Idempotent. From another thread,
        calls already under way get ABORT_GRACE_S to return first (ncclCommRevoke then stops
        one blocked inside NCCL, where the library has it, and it gets REVOKE_GRACE_S); one still
        blocked after that is ended by the abort itself, with an error."""
        gate = self._gate
        gate.close()
        if not self._handle or not gate.take():
            return
        handle = self._handle
        if not gate.wait(ABORT_GRACE_S) and self._has("ncclCommRevoke"):
            try:
                _nccl.comm_revoke(handle, 0)
            except NcclError:
                pass  # the abort below is what ends it, then
            gate.wait(REVOKE_GRACE_S)
        self._release_resources(invalidate=True)
        self._handle = 0
        _nccl.comm_abort(handle)

    def revoke(self, flags: int = 0) -> None:
        """ncclCommRevoke: make outstanding and future operations fail (fault tolerance)."""
        self._call(_nccl.comm_revoke, flags)

    @property
    def closed(self) -> bool:
        """True once destroyed, aborted or closed (the handle is gone, or going)."""
        return not self._handle or self._gate.closed

    def __exit__(self, exc_type, exc, tb) -> None:
        # After a failure, peers may be gone: destroy could wait for them forever.
        if exc_type is None:
            self.destroy()
        else:
            self.abort()

    def __repr__(self) -> str:
        if not self._handle:
            return "Communicator(destroyed)" if self._gate.closed else "Communicator(null)"
        return f"Communicator(rank={self._rank}, nranks={self._nranks}, device={self._device})"

    # ---- properties --------------------------------------------------------

    @property
    def handle(self) -> int:
        """The ncclComm_t, as an int (for the low-level ncclbind._nccl functions)."""
        return self._live()

    @property
    def ptr(self) -> int:
        """The ncclComm_t's address (nccl4py's name): 0 for a null or destroyed communicator."""
        return self._handle

    @property
    def is_valid(self) -> bool:
        """Whether this is a live communicator (not null, destroyed or aborted)."""
        return bool(self._handle) and not self._gate.closed

    @property
    def rank(self) -> int:
        """This process's rank in the communicator."""
        if not self._handle:
            self._live()
        return self._rank

    @property
    def nranks(self) -> int:
        """The number of ranks in the communicator."""
        if not self._handle:
            self._live()
        return self._nranks

    @property
    def device(self) -> CudaDevice:
        """The CUDA device the communicator uses: an int that is also a cuda.core Device."""
        if not self._handle:
            self._live()
        return CudaDevice(self._device)

    @property
    def cuda_dev(self) -> int:
        """The CUDA device ordinal (ncclCommCuDevice; the same as properties.cuda_dev)."""
        return int(self.device)

    @property
    def properties(self) -> NCCLCommProperties:
        """Everything ncclCommQueryProperties reports, as an NCCLCommProperties (read once;
        query_properties() asks NCCL again)."""
        if self._properties is None:
            self._properties = self.query_properties()
        return self._properties

    @property
    def nvml_dev(self) -> int:
        """The NVML device index (properties.nvml_dev)."""
        return self.properties.nvml_dev

    @property
    def device_api_support(self) -> bool:
        """Whether device-side (kernel) communication works on this communicator."""
        return self.properties.device_api_support

    @property
    def multimem_support(self) -> bool:
        """Whether NCCL reports multimem (NVLS) support for this communicator."""
        return self.properties.multimem_support

    @property
    def gin_type(self) -> NcclGinType:
        """The GPU-initiated networking type (NcclGinType)."""
        return self.properties.gin_type

    @property
    def n_lsa_teams(self) -> int:
        """How many LSA (load/store accessible) teams the communicator has."""
        return self.properties.n_lsa_teams

    @property
    def host_rma_support(self) -> bool:
        """Whether host-initiated RMA (put_signal, signal, wait_signal) works here."""
        return self.properties.host_rma_support

    @property
    def railed_gin_type(self) -> NcclGinType:
        """The rail-restricted GIN type (NcclGinType)."""
        return self.properties.railed_gin_type

    def get_last_error(self) -> str:
        """ncclGetLastError for this communicator."""
        return self._call(_nccl.get_last_error) or ""

    def get_async_error(self) -> NcclResult:
        """ncclCommGetAsyncError: NcclResult.SUCCESS, IN_PROGRESS, or the error."""
        return NcclResult(self._call(_nccl.comm_get_async_error))

    def _has(self, function: str) -> bool:
        """Whether the loaded library has a C function (by the release that added it and, for
        one a newer release removed, the release that removed it)."""
        since, until = _nccl.since.get(function), _nccl.until.get(function)
        loaded = loaded_version_code()
        return since is not None and loaded >= since[1] and (until is None or loaded < until[1])

    # ---- argument checks ---------------------------------------------------------

    def _check_rank(self, rank, argument: str) -> int:
        if type(rank) is not int:  # a NumPy integer is a rank too (operator.index), a bool is not
            if isinstance(rank, bool) or not hasattr(type(rank), "__index__"):
                raise NcclInvalid(f"{argument}: a rank is an int, not {type(rank).__name__}", argument)
            rank = operator.index(rank)
        if 0 <= rank < self._nranks:
            return rank
        raise NcclInvalid(f"{argument} {rank!r} is out of range for {self._nranks} ranks", argument)

    _check_peer = _check_rank

    def _op(self, op, dtype) -> int:
        if isinstance(op, bool):
            raise NcclInvalid(f"op: {op!r} is a bool, not a reduction op", "op")
        if type(op) is int or isinstance(op, NcclRedOp):
            return self._op_value(int(op), dtype)
        value_for = getattr(op, "value_for", None)
        if value_for is not None:
            return value_for(self, dtype)
        if isinstance(op, str):
            try:
                return NcclRedOp[op.upper()]
            except KeyError:
                raise NcclInvalid(f"op: no reduction op named {op!r}", "op") from None
        if isinstance(op, int):
            return self._op_value(int(op), dtype)
        raise NcclInvalid(f"op: an NcclRedOp, a CustomRedOp or a name, not {type(op).__name__}", "op")

    def _op_value(self, value: int, dtype) -> int:
        """An op given as its value: one of NCCL's (NcclRedOp), or a live CustomRedOp's of this
        communicator (then checked as the CustomRedOp is); any other value never reaches NCCL."""
        if value in _BUILTIN_OPS:
            return value
        for resource in list(self._resources.values()):
            if getattr(resource, "op", None) == value and hasattr(resource, "value_for"):
                return resource.value_for(self, dtype)
        raise NcclInvalid(f"op: {value} is neither an NcclRedOp ({', '.join(f'{m.name} {int(m)}' for m in NcclRedOp)}) "
                          "nor a CustomRedOp of this communicator", "op")

    def _buffer(self, obj, argument: str, writable: bool, stream: int) -> NcclBuffer:
        buf = cached(obj)
        if buf is None or (writable and buf.readonly) or (buf.device is not None and buf.device != self._device):
            buf = _resolve(obj, argument, writable=writable, device=self._device, stream=stream)
        return buf

    # ---- resources ---------------------------------------------------------------------

    def register_buffer(self, buffer: BufferLike) -> RegisteredBufferHandle:
        """ncclCommRegister of the buffer's bytes: a RegisteredBufferHandle (which keeps the
        buffer alive), released before the communicator."""
        from .resources import RegisteredBufferHandle
        self._live()
        buf = _resolve(buffer, "buffer", device=self._device)
        return RegisteredBufferHandle(self, buf.ptr, buf.nbytes, buffer=buf)

    def register_window(self, buffer: BufferLike, flags: int | None = None) -> RegisteredWindowHandle:
        """ncclCommWindowRegister of the buffer's bytes (collective: every rank calls it): a
        RegisteredWindowHandle (which keeps the buffer alive). flags: a WindowFlag
        (COLL_SYMMETRIC, ...) or its int; None: WindowFlag.DEFAULT."""
        from .resources import RegisteredWindowHandle
        self._live()
        buf = _resolve(buffer, "buffer", device=self._device)
        return RegisteredWindowHandle(self, buf.ptr, buf.nbytes, flags, buffer=buf)

    def create_pre_mul_sum(self, scalar: float | BufferLike, datatype: DataTypeLike | None = None, *,
                           dtype: DataTypeLike | None = None) -> CustomRedOp:
        """A CustomRedOp (ncclRedOpCreatePreMulSum): sum after multiplying each input by
        `scalar`, a host number (datatype: the collective's type; None infers it from the
        number: float32 for a float, int64 for an int) or a one-element device buffer (its
        own type). dtype= is the same as datatype."""
        from .resources import CustomRedOp
        self._live()
        if dtype is not None and datatype is not None and dtype != datatype:
            raise NcclInvalid(f"datatype {datatype!r} and dtype {dtype!r} disagree: give one", "datatype")
        return CustomRedOp(self, scalar, datatype if datatype is not None else dtype)

    def close_all_resources(self) -> None:
        """Release every resource this communicator made (registered buffers and windows,
        custom ops, device communicators), in dependency order; the communicator stays usable."""
        self._live()
        self._release_resources(invalidate=False)

    def create_dev_comm(self, requirements: NCCLDevCommRequirements | None = None) -> DevCommResource:
        """ncclDevCommCreate (collective): a DevCommResource for device kernels."""
        from .dev_comm import DevCommResource
        self._live()
        return DevCommResource(self, requirements)

