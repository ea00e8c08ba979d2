"""The reference implementation of every method generated from generator/spec/*.toml.

A generated method (ncclbind/_generated/communicator_methods.py) is a signature, a docstring
and one call of `call_method` with its row of the spec (a `MethodSpec`). This function is
where each such call's arguments are resolved and checked and every rejection is raised;
the C fast path (bindings/python/src/call_engine.c) only takes calls that pass these same
checks, from the same rows, and gives every other call to the method's Python definition.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
from dataclasses import dataclass

from .. import _nccl
from ..errors import NcclInvalid
from .config import as_struct, comm_config, initialized
from .dtypes import check_op_for_complex
from .streams import stream_handle
from .watchdog import watched

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
class MethodSpec:
    """One generated method, as data (rendered from generator/spec by templates/python/methods.py.j2)."""
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


def call_method(comm, spec: MethodSpec, values: dict) -> None:
    """Make the call `spec` describes on `comm` with the method's arguments `values`."""
    handle, stream, rank_value, resolved, base, count = _checked(comm, spec, values)
    args = []
    for item in spec.order:
        if item == "count":
            args.append(count)
        elif item == "dtype":
            args.append(base.dtype)
        elif item == "op":
            check_op_for_complex(base, values["op"])
            args.append(comm._op(values["op"], base.dtype))
        elif item == "comm":
            args.append(handle)
        elif item == "stream":
            args.append(stream)
        elif item in ("root", "peer"):
            args.append(rank_value)
        else:
            buf = resolved[item]
            args.append(0 if buf is None else buf.ptr)
    config = values.get("config")
    if config is not None:
        config = coll_config(config)
    # The gate last (as in call_engine.c): the checks above may have let another thread destroy comm.
    with comm._gate, watched(comm, spec.name, stream):
        if config is None:
            getattr(_nccl, spec.low_level)(*args)
        else:
            getattr(_nccl, spec.config_low_level)(*args, config)


def _checked(comm, spec: MethodSpec, values: dict):
    """call_method's resolution and checks, raising its rejections: (handle, stream, root or peer,
    {buffer argument: NcclBuffer or None}, the buffer that gives the count, the count)."""
    handle = comm._live()
    stream = stream_handle(values["stream"])
    nranks = comm._nranks
    rank_value = None
    if spec.rank_argument:
        rank_value = comm._check_rank(values[spec.rank_argument], spec.rank_argument)
    on_root = spec.rank_argument == "root" and rank_value == comm._rank

    resolved = {}
    first = spec.buffer(spec.count_of)
    for role in (first, *(b for b in spec.buffers if b is not first)):
        obj = values[role.argument]
        partner = role.in_place_of
        if partner is not None and (obj is values[partner] or (obj is None and not role.root_only)):
            continue  # in place: the partner's resolution, below
        if obj is None:
            if role.root_only and not on_root:
                resolved[role.argument] = None
                continue
            where = "on the root" if role.root_only else "here"
            raise NcclInvalid(f"{role.argument} is None {where}", role.argument)
        resolved[role.argument] = comm._buffer(obj, role.argument, role.writable, stream)
    for role in spec.buffers:
        if role.argument in resolved:
            continue
        shared = resolved[role.in_place_of]
        if shared is None:  # root-only partner, not the root
            resolved[role.argument] = None
            continue
        if role.writable and shared.readonly:
            raise NcclInvalid(f"{role.in_place_of} is read-only, but an in-place {spec.name} writes into it",
                              role.in_place_of)
        resolved[role.argument] = shared

    base = resolved[first.argument]
    count = base.count
    if first.per_rank:
        if count % nranks:
            raise NcclInvalid(f"{first.argument}'s {count} elements do not split into {nranks} equal blocks",
                              first.argument)
        count //= nranks
    for role in spec.buffers:
        buf = resolved[role.argument]
        if role is first or buf is None or buf is base:
            continue
        if buf.dtype != base.dtype:
            raise NcclInvalid(f"{role.argument} is {buf.dtype.name}, {first.argument} is {base.dtype.name}",
                              role.argument)
        expected = count * nranks if role.per_rank else count
        if buf.count != expected:
            raise NcclInvalid(_count_message(spec, role, buf.count, first, base.count, nranks), role.argument)
    return handle, stream, rank_value, resolved, base, count


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
    spec = _PREPARABLE.get(func) if func is not None else None
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
        spec = _PREPARABLE[func]
        values = {k: v for k, v in values.items() if k in spec.buffer_arguments or k in ("op", "stream", "config")}
    _, stream, rank_value, resolved, base, _ = _checked(comm, spec, values)
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
    return _nccl._prepare_call(func, comm, prepared, functools.partial(method, *args, **kwargs))


def _count_message(spec: MethodSpec, role: BufferRole, count: int, first: BufferRole, base_count: int,
                   nranks: int) -> str:
    if role.per_rank == first.per_rank:
        return (f"{role.argument} holds {count} elements, {first.argument} {base_count}; {spec.name} needs equal "
                "counts")
    if role.per_rank:
        return (f"{role.argument} holds {count} elements; {spec.name} needs nranks ({nranks}) x "
                f"{first.argument}'s {base_count} = {base_count * nranks}")
    return (f"{role.argument} holds {count} elements; {spec.name} needs {first.argument}'s {base_count} / "
            f"nranks ({nranks}) = {base_count // nranks}")


def coll_config(config):
    """A per-call config: an ncclCollConfig_t, or a dict of its fields (C or snake_case names)
    over NCCL_COLLCONFIG_INITIALIZER, filled as core/config.py fills every versioned struct;
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


def install_fast_paths(cls, specs) -> None:
    """Replace each generated method of cls by its C fast path (which gives every call it
    does not take to that same Python definition)."""
    for spec in specs:
        method = _nccl._install_method(spec.name, cls.__dict__[spec.name])
        setattr(cls, spec.name, method)
        _PREPARABLE[method] = spec


# The installed fast paths and their rows: what prepare() accepts.
_PREPARABLE: dict = {}


# ---- host calls without device buffers (kind = "call" in generator/spec) ----------------

# ncclTeam_t: what Communicator.team_world() and the other team methods return, and what
# team_rank_to_world / team_rank_to_lsa take (fields nRanks, rank, stride).
Team = _nccl.ncclTeam_t


@dataclass(frozen=True)
class CallArgument:
    """One argument of a generated host call, as data."""
    argument: str                 # the Python argument (and the Rust one)
    kind: str                     # int | enum | unique_id | comm_config | string | record | capacity
    c_type: str                   # the C parameter's type, for messages (kind record: its _nccl class)
    low: int = 0                  # kind int, capacity: the accepted range
    high: int = 0
    values: tuple[int, ...] = ()  # kind enum: the values the headers define
    optional: bool = False        # a pointer that may be None (NULL)
    rank_of: str | None = None    # kind int: a rank of this record argument (0..its nRanks - 1)


@dataclass(frozen=True)
class CallSpec:
    """One generated host call (rendered from generator/spec by templates/python/methods.py.j2)."""
    name: str
    function: str                 # the NCCL function
    low_level: str                # its ncclbind._nccl function (which returns the out-pointer's value)
    owner: str                    # Communicator | Window | Param, or a module owner (params, device_api)
    order: tuple[str, ...]        # the low-level call's arguments: "self", an argument's name, or
                                  # "@buffer" (the buffer made for an out_buffer, `capacity` bytes)
    arguments: tuple[CallArgument, ...]
    returns: str | None           # int | pointer | record | unique_id | owner | string |
                                  # string_table | bytes | result_record, or None
    makes: str | None = None      # returns owner: the class the handle becomes, when not the owner's
    capacity: str | None = None   # returns bytes: the argument that gives the buffer's size
    with_length: bool = False     # the low-level call returns (value, its length)
    none_if_null: bool = False    # returns pointer: None when NCCL gives NULL
    record: type | None = None    # returns result_record: the class made of the outs, in order


_NO_GATE = contextlib.nullcontext()


def call_simple_method(owner, spec: CallSpec, values: dict):
    """Make the call `spec` describes on `owner` (None for a module owner's function) with the
    method's arguments `values`: every argument is checked before NCCL is called, and a
    function the loaded library lacks raises NcclSymbolNotFoundError (from the _nccl function,
    also for one that returns no ncclResult_t) before anything is made."""
    handle = _OWNER_HANDLES[spec.owner](owner) if "self" in spec.order else None
    # a rank of a record argument after that record's own check
    checked = {a.argument: _checked_argument(a, values[a.argument], values)
               for a in sorted(spec.arguments, key=lambda a: a.rank_of is not None)}
    if spec.capacity is not None:
        checked["@buffer"] = bytearray(checked[spec.capacity])
    with _gate_of(owner, spec):
        result = getattr(_nccl, spec.low_level)(*(handle if item == "self" else checked[item]
                                                  for item in spec.order))
    if spec.returns == "unique_id":
        from .unique_id import UniqueId
        return UniqueId(bytes(result))
    if spec.returns == "owner" and spec.makes is not None:
        return _OWNER_CLASSES[spec.makes]()(result)
    if spec.returns == "owner":
        # The new handle is owned from here on, on the device of the owner that made it.
        return type(owner)(result, device=owner._device)
    if spec.returns == "bytes":
        # result: how many bytes NCCL wrote (at most the buffer's size)
        return bytes(checked["@buffer"][:max(0, min(result, len(checked["@buffer"])))])
    if spec.returns == "string":
        value = result[0] if spec.with_length else result
        return value if value is not None else ""
    if spec.returns == "string_table":
        return _strings(*result)
    if spec.returns == "result_record":
        return spec.record(*result)
    if spec.none_if_null and not result:
        return None
    return result


def _strings(table: int, count: int) -> list[str]:
    """Copies of the `count` C strings of the table of char pointers at address `table`."""
    import ctypes
    if count <= 0 or not table:
        return []
    pointers = (ctypes.c_char_p * count).from_address(table)
    return [(p or b"").decode("utf-8", "surrogateescape") for p in pointers]


def _param_class():
    from .params import Param
    return Param


def _window_handle(window) -> int:
    window._check_open()
    window.communicator._live()
    return window.window


_OWNER_HANDLES = {"Communicator": lambda comm: comm._live(), "Window": _window_handle,
                  "Param": lambda param: param.handle}


def _gate_of(owner, spec: CallSpec):
    """The call gate the call enters: its communicator's (a Window's too), or none."""
    if "self" not in spec.order or spec.owner not in ("Communicator", "Window"):
        return _NO_GATE
    return owner._gate if spec.owner == "Communicator" else owner.communicator._gate
# The class a returned handle becomes (CallSpec.makes), imported when first made.
_OWNER_CLASSES = {"Param": _param_class}


def _checked_argument(arg: CallArgument, value, values: dict):
    name = arg.argument
    if arg.kind in ("int", "enum", "capacity"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise NcclInvalid(f"{name}: an int ({arg.c_type}), not {type(value).__name__}", name)
        if arg.kind == "enum" and int(value) not in arg.values:
            raise NcclInvalid(f"{name}: {int(value)} is not a value of {arg.c_type} "
                              f"({', '.join(map(str, arg.values))})", name)
        if arg.rank_of is not None:
            # the record's own check came first (its argument comes first in the row)
            nranks = values[arg.rank_of].nRanks
            if not 0 <= value < nranks:
                raise NcclInvalid(f"{name}: {value} is not a rank of {arg.rank_of} (0..{nranks - 1}: its nRanks is "
                                  f"{nranks})", name)
        if arg.kind != "enum" and not arg.low <= value <= arg.high:
            raise NcclInvalid(f"{name}: {value} is out of range for {arg.c_type} ({arg.low}..{arg.high})", name)
        return int(value)
    if arg.kind == "string":
        if not isinstance(value, str):
            raise NcclInvalid(f"{name}: a str, not {type(value).__name__}", name)
        if "\0" in value:
            raise NcclInvalid(f"{name}: {value!r} holds a NUL character", name)
        return value
    if arg.kind == "record":
        return _checked_record(name, value, arg.c_type)
    if value is None:
        if arg.optional:
            return None
        raise NcclInvalid(f"{name} is None", name)
    if arg.kind == "unique_id":
        from .unique_id import NBYTES, UniqueId
        if isinstance(value, UniqueId):
            return value.to_bytes()
        if isinstance(value, (bytes, bytearray, memoryview)) and len(value) == NBYTES:
            return bytes(value)
        raise NcclInvalid(f"{name}: a UniqueId or its {NBYTES} bytes, not {type(value).__name__}", name)
    value = as_struct(value, name)  # an NCCLConfig
    if not isinstance(value, (dict, _nccl.ncclConfig_t)):
        raise NcclInvalid(f"{name}: an ncclConfig_t or a dict of its fields, not {type(value).__name__}", name)
    return comm_config(value)


def _checked_record(name: str, value, c_type: str):
    """A record argument passed by value: an instance of its generated _nccl class (or nccl4py's
    record of it: an NCCLTeam for an ncclTeam_t)."""
    value = as_struct(value, name)
    if not isinstance(value, getattr(_nccl, c_type)):
        raise NcclInvalid(f"{name}: an ncclbind._nccl.{c_type}, not {type(value).__name__}", name)
    return value
