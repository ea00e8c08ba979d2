"""Group and Handle: the owners of NCCL EP's two handles. Their methods are generated from
policy/nccl_ep.toml (ep/_generated/methods.py); what is here is their lifetime."""
from __future__ import annotations

import weakref

from .. import _nccl_ep
from ._generated import checks as ep_checks
from ._generated.methods import STEPS, GroupMethods, HandleMethods
from .base import checks
from .base.records import enum_value
from ..core.communicator import Communicator
from ..base.lifetime import Destroyable
from ..errors import NcclInvalid

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from typing import Any

    from ._generated.classes import GroupConfig


class _Owner(Destroyable):
    """What Group and Handle share: the NCCL EP handle they own (0 once destroyed), and its end
    (Destroyable: a with block, a ResourceWarning when collected undestroyed)."""

    __slots__ = ()
    _handle: int

    @property
    def handle(self) -> int:
        """The ncclEpGroup_t or ncclEpHandle_t, as an int (for ncclbind._nccl_ep)."""
        if not self._handle:
            raise checks.dead(self, "handle")
        return self._handle

    @property
    def ptr(self) -> int:
        """Its address (nccl.ep's Group.ptr and Handle.ptr; the same as handle)."""
        if not self._handle:
            raise checks.dead(self, "ptr")
        return self._handle

    @property
    def closed(self) -> bool:
        return not self._handle



class Group(GroupMethods, _Owner):
    """An NCCL EP group over one communicator (Group.create, collective). It holds its config (and
    so its allocator's callables) until destroy(), which first destroys the handles still open.
    A method of a destroyed group raises NcclInvalid naming the group. It keeps the spec's
    preconditions it meets (the mask calls need enable_mask; mask_clean an LL handle made first):
    a method needing one it lacks raises NcclInvalid naming the method and the precondition."""

    __slots__ = ("_handle", "_comm", "_config", "_symbols", "_device", "_algorithm", "_handles", "_met",
                 "__weakref__")

    def __init__(self, ptr: int, *, comm: Communicator | None = None, config: GroupConfig | None = None) -> None:
        """Adopt an ncclEpGroup_t made elsewhere (nccl.ep's Group(ptr)); Group.create makes one.
        The Group owns it from here: destroy() releases it. `comm` (its communicator) and `config`
        (the GroupConfig it was made with) give the checks what they know of a created group (rank
        count, device, algorithm, dimensions, preconditions); without them those checks are skipped
        and the mask calls, whose preconditions are then unknown, are refused."""
        from ._generated.classes import GroupConfig
        if type(ptr) is not int or not 0 < ptr < 2 ** 64:
            raise NcclInvalid(f"ptr must be an ncclEpGroup_t (an int address > 0), not {ptr!r}", "ptr")
        if config is not None and type(config) is not GroupConfig:
            raise NcclInvalid(f"config: {type(config).__name__} is not an ep.GroupConfig", "config")
        nranks = None
        if comm is not None:
            checks.communicator(comm, Communicator)
            nranks = comm.nranks
        self._init(ptr, comm, config, ep_checks.group_symbols(nranks, config))

    def _init(self, address: int, comm: Communicator | None, config: GroupConfig | None, symbols: dict) -> None:
        self._handle, self._comm, self._config, self._symbols = address, comm, config, symbols
        self._device = None if comm is None else int(comm.device)
        self._algorithm = None if config is None else config._values["algorithm"]
        self._handles = weakref.WeakValueDictionary()
        self._met = ep_checks.met_at_creation(self._algorithm, config)

    @classmethod
    def _made(cls, address: int, comm: Communicator, config: GroupConfig, symbols: dict) -> Group:
        group = object.__new__(cls)
        group._init(address, comm, config, symbols)
        return group

    @property
    def config(self) -> GroupConfig | None:
        """The GroupConfig it was made with (None for a group adopted without it)."""
        return self._config

    @property
    def nranks(self) -> int | None:
        """Its communicator's rank count (None for a group adopted without its communicator)."""
        return self._symbols.get("num_ranks")

    @property
    def device(self) -> int | None:
        """Its communicator's CUDA device (None for a group adopted without its communicator)."""
        return self._device

    @property
    def symbols(self) -> dict:
        """The group's dimensions the checks use (num_ranks, num_experts, num_local_experts, ...)."""
        return dict(self._symbols)

    @property
    def preconditions(self) -> frozenset:
        """The spec's preconditions the group meets now (mask, rdma_buffer, ...)."""
        return frozenset(self._met)

    def destroy(self) -> None:
        """Destroy the handles still open, then the group (ncclEpGroupDestroy); a second call does
        nothing. An exception an allocator callback raised while freeing is raised here."""
        if not self._handle:
            return
        for handle in list(self._handles.values()):
            handle.destroy()
        address, self._handle = self._handle, 0
        try:
            checks.invoke(_nccl_ep.group_destroy, (address,))
        finally:
            self._config = None  # the allocator's callables may go now

    def __repr__(self) -> str:
        if not self._handle:
            return "ep.Group(destroyed)"
        if self._config is None:
            return f"ep.Group(ptr={self._handle:#x}, adopted, nranks={self.nranks}, device={self._device})"
        s = self._symbols
        return (f"ep.Group(algorithm={'LL' if self._algorithm == 0 else 'HT'}, num_experts={s['num_experts']}, "
                f"nranks={s.get('num_ranks')}, device={self._device})")


class Handle(HandleMethods, _Owner):
    """A routing handle of one group (Group.create_handle or init_handle): its layout and the
    current routing (update). dispatch / combine / complete check their records once per routing
    and record set; a destroyed handle (or one whose group was destroyed) raises NcclInvalid."""

    __slots__ = ("_handle", "_group", "_layout", "_mode", "_symbols", "_routing", "_keep",
                 *(f"_last_{name}" for name in STEPS), "__weakref__")  # the per-step caches

    def __init__(self, ptr: int, *, group: Group | None = None, layout: Any = None) -> None:
        """Adopt an ncclEpHandle_t made elsewhere (nccl.ep's Handle(ptr)); Group.create_handle and
        init_handle make one. The Handle owns it from here: destroy() releases it. `group` (the
        ep.Group it belongs to, which then destroys it with itself) and `layout` (the layout it was
        made with) give the checks the group's device and dimensions and the mode's shapes; without
        them those checks are skipped. The routing's extents are taken from each call's tensors."""
        if type(ptr) is not int or not 0 < ptr < 2 ** 64:
            raise NcclInvalid(f"ptr must be an ncclEpHandle_t (an int address > 0), not {ptr!r}", "ptr")
        if group is not None and (type(group) is not Group or group.closed):
            raise NcclInvalid(f"group: {group!r} is not a live ep.Group", "group")
        mode = None
        if layout is not None:
            layout = enum_value("NcclEpLayout", layout, "layout")
            if group is not None and group._algorithm is not None:
                mode = ep_checks.mode_of(group._algorithm, layout)
        symbols = {} if group is None else dict(group._symbols)
        self._init(ptr, group, layout, mode, symbols, [])

    def _init(self, address: int, group: Group | None, layout: int | None, mode: str | None, symbols: dict,
              keep: list) -> None:
        self._handle, self._group, self._layout, self._mode = address, group, layout, mode
        self._symbols = symbols
        self._routing = object()  # a new token per routing: the per-step checks hold for one
        self._keep = keep  # handle_mem: caller memory NCCL EP uses until destroy
        self._forget_steps()
        if group is not None:
            group._handles[id(self)] = self

    @classmethod
    def _made(cls, address: int, group: Group, layout: int | None, mode: str | None, symbols: dict,
              keep: list) -> Handle:
        handle = object.__new__(cls)
        handle._init(address, group, layout, mode, symbols, keep)
        return handle

    def _rebind(self, symbols: dict) -> None:
        self._symbols = symbols
        self._routing = object()

    @property
    def group(self) -> Group | None:
        """The ep.Group it belongs to (None for a handle adopted without it)."""
        return self._group


    @property
    def mode(self) -> str:
        """The group's algorithm and this handle's layout, as the spec names it (ll_expert_major, ...)."""
        return self._mode

    @property
    def symbols(self) -> dict:
        """The dimensions the checks use: the group's and the routing's (num_tokens, top_k)."""
        return dict(self._symbols)

    def destroy(self) -> None:
        """ncclEpHandleDestroy; a second call does nothing."""
        if not self._handle:
            return
        address, self._handle, self._routing = self._handle, 0, None
        self._forget_steps()
        if self._group is not None:
            self._group._handles.pop(id(self), None)
        try:
            checks.invoke(_nccl_ep.handle_destroy, (address,))
        finally:
            self._keep = []

    def _forget_steps(self) -> None:
        """Empty the per-step methods' caches (_last_dispatch, ...: the generated methods keep them)."""
        for name in STEPS:
            setattr(self, f"_last_{name}", None)

    def __repr__(self) -> str:
        if not self._handle:
            return "ep.Handle(destroyed)"
        s = self._symbols
        return f"ep.Handle({self._mode}, num_tokens={s.get('num_tokens')}, top_k={s.get('top_k')})"
