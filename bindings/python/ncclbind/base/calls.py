"""What the generated buffer methods share: their rows (MethodRow, what ncclbind.prepare() and the
C fast path read), the per-call config, the C fast path's installation, and prepare().

Each generated method (ncclbind/_generated/communicator_methods.py) is its own code, with its
_checked_<method> function (its buffers, root or peer and stream resolved and checked, each
rejection with its own message); the C fast path (bindings/python/src/call_engine.c) only
takes calls that pass the same checks, from the same rows, and gives every other call to the
method's Python definition.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass

from .. import _nccl
from ..errors import NcclInvalid
from .config import as_struct, initialized
from .dtypes import check_op_for_complex

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Callable, ParamSpec

    P = ParamSpec("P")


@dataclass(frozen=True)
class BufferRole:
    argument: str                 # the Python argument
    param: str                    # the C parameter
    writable: bool                # role recv
    per_rank: bool                # holds nranks * count elements
    root_only: bool               # only the root reads or writes it
    in_place_of: str | None       # the argument it may be (in place), or None


@dataclass(frozen=True)
class MethodRow:
    """One generated method, as data (rendered from policy by templates/python/methods.py.j2)."""
    name: str
    function: str                 # the NCCL function
    low_level: str                # its ncclbind._nccl function
    config_low_level: str | None  # the _nccl function of its config variant
    order: tuple[str, ...]        # the C call's parameters, as roles or buffer arguments
    buffers: tuple[BufferRole, ...]
    count_of: str                 # the buffer argument whose size gives the count
    rank_argument: str | None     # "root" or "peer"
    root_none: str | None = None  # the method a call with root None is (reduce: all_reduce)

    def buffer(self, argument: str) -> BufferRole:
        return next(b for b in self.buffers if b.argument == argument)

    @property
    def buffer_arguments(self) -> tuple[str, ...]:
        return tuple(b.argument for b in self.buffers)


PreparedCall = _nccl.PreparedCall


def prepare(method: Callable[P, None], /, *args: P.args, **kwargs: P.kwargs) -> PreparedCall:
    """One call of a communicator's buffer-taking method (comm.all_reduce, comm.send, ...), bound,
    checked and resolved now, as calling `method(*args, **kwargs)` would, without calling NCCL;
    the PreparedCall it returns makes that call each time it is called (no arguments), in C: no
    argument binding, buffer probe or check is repeated, which is most of a Python call's cost for
    small messages. It keeps the buffers and the communicator alive and calls with the pointers,
    counts, op, root/peer and stream resolved now: a buffer re-pointed or resized afterwards
    (torch's set_() / resize_()) is not seen, as in a captured CUDA graph; prepare again then.
    A destroyed communicator, or one under a watchdog, is seen: such a call goes to the method
    as it was given, which raises or times it."""
    func = getattr(method, "__func__", None)
    comm = getattr(method, "__self__", None)
    spec, checked = _PREPARABLE.get(func, (None, None)) if func is not None else (None, None)
    if spec is None or comm is None:
        raise NcclInvalid("method: a buffer-taking method of a communicator, bound to it "
                          f"(e.g. comm.all_reduce; an ep.Handle's per-step methods: ncclbind.ep.prepare), not "
                          f"{method!r}", "method")
    bound = inspect.signature(func.__wrapped__).bind(comm, *args, **kwargs)
    bound.apply_defaults()
    values = dict(bound.arguments)
    del values[next(iter(values))]  # self
    if spec.root_none and values[spec.rank_argument] is None:  # the call the method makes: root_none's
        func = getattr(comm, spec.root_none).__func__
        spec, checked = _PREPARABLE[func]
        values = {k: v for k, v in values.items() if k in spec.buffer_arguments or k in ("op", "stream", "config")}
    rank = (values[spec.rank_argument],) if spec.rank_argument else ()
    _, stream, rank_value, resolved, base, _ = checked(comm, *(values[a] for a in spec.buffer_arguments), *rank,
                                                       values["stream"])
    prepared = dict(values)
    prepared.update(resolved)
    prepared["stream"] = stream
    if spec.rank_argument:
        prepared[spec.rank_argument] = rank_value
    if "op" in values:
        check_op_for_complex(base, values["op"])
        prepared["op"] = int(comm._op(values["op"], base.dtype))
    if values.get("config") is not None:
        prepared["config"] = coll_config(values["config"])
    try:
        return _nccl._prepare_call(func, comm, prepared, functools.partial(method, *args, **kwargs))
    except RuntimeError:
        if comm.closed:  # destroyed or aborted by another thread since the checks: every call's error
            raise NcclInvalid("the communicator was destroyed or aborted", "comm") from None
        raise


def coll_config(config):
    """A per-call config: an ncclCollConfig_t, or a dict of its fields (C or snake_case names)
    over NCCL_COLLCONFIG_INITIALIZER, filled as base/config.py fills every versioned struct;
    a rejection names the argument, config."""
    config = as_struct(config, "config")  # an NCCLCollConfig
    record_type = getattr(_nccl, "ncclCollConfig_t", None)
    if record_type is not None and isinstance(config, record_type):
        return config
    if not isinstance(config, dict):
        raise NcclInvalid(f"config: an ncclCollConfig_t or a dict of its fields, not {type(config).__name__}",
                          "config")
    if not all(isinstance(name, str) for name in config):
        raise NcclInvalid(f"config: field names are str, not {sorted(map(repr, config))}", "config")
    try:
        return initialized(_nccl.ncclCollConfig_t, _nccl.nccl_collconfig_initializer, **config)
    except (NcclInvalid, TypeError, ValueError, OverflowError) as e:  # the record names the field
        raise NcclInvalid(f"config: {e}", "config") from None


def install_fast_paths(cls, methods) -> None:
    """Replace each generated method of cls by its C fast path (which gives every call it
    does not take to that same Python definition); methods: (row, its _checked_ function)."""
    for spec, checked in methods:
        method = _nccl._install_method(spec.name, cls.__dict__[spec.name])
        setattr(cls, spec.name, method)
        _PREPARABLE[method] = (spec, checked)


# The installed fast paths, their rows and checks: what prepare() accepts.
_PREPARABLE: dict = {}


# ncclTeam_t (fields nRanks, rank, stride): what team_rank_to_world / team_rank_to_lsa take, as
# nccl4py's NCCLTeam (what the team properties return) is too.
Team = _nccl.ncclTeam_t
