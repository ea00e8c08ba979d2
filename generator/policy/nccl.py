"""The loader of policy/nccl.toml (and, through ep.py, policy/nccl_ep.toml): what each
parameter of an NCCL call means.

It is binding policy, read after the header sets are parsed and merged (editing it parses
nothing again), checked against the merged API, and rendered into the idiomatic layers:
render/policy_python.py (methods, their checks and the fast path's table) and
render/policy_rust.py (safe methods). The TOML's header comment documents the roles.

Two kinds of entry: buffer methods (the default: collectives and point-to-point calls over
device buffers, with the C fast path) and `kind = "call"` (host calls without device buffers:
the owner's handle (none for a module owner), scalar, string and record arguments in, and one
value returned: an out-pointer, a caller buffer NCCL fills, or, with `returns = "value"`, the
C result of a function that returns no ncclResult_t). The coverage file
(<library>_coverage.toml) says, for every other function, which hand-written name covers it
or why it stays raw-only (coverage.py).
"""
from __future__ import annotations

import sys
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..ir.types import int_range
from .common import POLICY_DIR, PolicyError, check_keys

SCALAR_ROLES = {"comm", "stream", "dtype", "op", "root", "peer"}
BUFFER_ROLES = {"send", "recv"}
ELEMENTS = {"count": 1, "nranks * count": "nranks"}
DEFAULT_NAMES = {"send": ("sendbuf", "send"), "recv": ("recvbuf", "recv")}
METHOD_KEYS = {"function", "config_variant", "owner", "doc", "params", "python"}
# A method's public Python surface (the `python` table; nccl4py 0.6.0's names and orders):
#   order      the positional arguments, in order (default: the buffers, then op, then root/peer)
#   aliases    other names of the same method (nccl4py's spellings beside ncclbind's)
#   root_none  a method of the same owner that the call becomes when root is None (root then
#              defaults to None): reduce -> all_reduce, gather -> all_gather
PYTHON_METHOD_KEYS = {"order", "aliases", "root_none"}
# A call's: aliases; property = true for a call without arguments read as an attribute;
# order, its positional arguments in order (default: the C call's; a config stays keyword-only);
# none_if_null = true, a call returning a pointer returns None when NCCL gives NULL (nccl4py's
# "no pointer": a peer not reachable by load/store, no multimem).
PYTHON_CALL_KEYS = {"aliases", "property", "order", "none_if_null"}
BUFFER_KEYS = {"role", "elements", "root_only", "in_place_of", "name"}


CALL_KEYS = {"kind", "function", "owner", "doc", "params", "returns", "python", "record"}
# kind = "record": a record class of the public surface over a C struct of the headers, its
# fields named as the languages name them (nccl4py's WaitSignalDesc over ncclWaitSignalDesc_t).
RECORD_KEYS = {"kind", "record", "doc", "fields"}
RECORD_FIELD_KEYS = {"field", "default"}
CALL_ROLES = {"self", "in", "out", "out_buffer", "out_length"}
IN_KEYS = {"role", "name", "optional", "default", "rank_of"}
# Each owner's handle type, which its "self" parameter must have; None: a module of functions
# (process-wide calls without an owner object: Python ncclbind.<owner>, Rust ncclbind::<owner>).
OWNER_HANDLES = {"Communicator": "ncclComm_t", "Window": "ncclWindow_t", "Param": "ncclParamHandle_t",
                 "params": None, "dev_comm": None}
# What a call entry's function returns: "result" (ncclResult_t, the default) or "value" (the
# C result itself, for a function without ncclResult_t: a missing symbol is the runtime's error).
RETURNS = ("result", "value")
# Records an "in" argument or an "out" pointer may name, and what each is in the languages.
RECORD_KINDS = {"ncclUniqueId": "unique_id", "ncclConfig_t": "comm_config"}


@dataclass(frozen=True)
class ParamRole:
    param: str                  # the header's parameter name
    role: str                   # comm | stream | dtype | op | root | peer | send | recv | count
    position: int               # its index in the C call
    python_name: str = ""       # the argument's name in Python ('' for derived roles)
    rust_name: str = ""
    per_rank: bool = False      # a buffer of nranks * count elements
    root_only: bool = False     # a buffer only the root reads or writes
    in_place_of: str | None = None  # a buffer that may be that other buffer (in place)
    count_of: str | None = None     # role count: the buffer whose size gives it

    @property
    def is_buffer(self) -> bool:
        return self.role in BUFFER_ROLES


@dataclass(frozen=True)
class MethodPolicy:
    name: str                   # method name (Python and Rust)
    function: str               # the NCCL function
    owner: str
    doc: str
    params: tuple[ParamRole, ...]     # in the C call's order
    config_variant: str | None = None
    source: str = ""            # file:table, for messages
    python_order: tuple[str, ...] = ()   # the positional arguments (the `python` table's order)
    aliases: tuple[str, ...] = ()        # other Python names of the method
    root_none: str | None = None         # the method a call with root=None becomes

    def role(self, role: str) -> ParamRole | None:
        return next((p for p in self.params if p.role == role), None)

    def param(self, name: str) -> ParamRole:
        return next(p for p in self.params if p.param == name)

    @property
    def buffers(self) -> tuple[ParamRole, ...]:
        return tuple(p for p in self.params if p.is_buffer)

    @property
    def count(self) -> ParamRole:
        return self.role("count")

    @property
    def rank_arg(self) -> ParamRole | None:
        """The root or peer parameter, if the call has one."""
        return self.role("root") or self.role("peer")

    def argument_notes(self, name, none: str, in_place: bool = False) -> list[str]:
        """What the buffers must hold, as sentences, with `name(param)` spelling an argument
        and `none` the language's word for an absent buffer; in_place: say which buffer may be
        its partner (languages with a separate in-place method leave it out)."""
        of = self.param(self.count.count_of)
        notes = []
        if of.per_rank:
            notes.append(f"{name(of)}'s elements split into nranks equal blocks.")
        for b in self.buffers:
            if b is of:
                continue
            if b.per_rank == of.per_rank:
                notes.append(f"{name(b)} holds as many elements as {name(of)}.")
            elif b.per_rank:
                notes.append(f"{name(b)} holds nranks x {name(of)}'s elements.")
            else:
                notes.append(f"{name(of)} holds nranks x {name(b)}'s elements.")
        for b in self.buffers:
            if b.root_only:
                notes.append(f"{name(b)} is read or written on the root only: {none} elsewhere.")
            if in_place and b.in_place_of:
                partner = name(self.param(b.in_place_of))
                alone = "" if b.root_only else f" or {none}"
                notes.append(f"{name(b)} may be {partner} itself{alone}: in place.")
        return notes

    @property
    def python_signature(self) -> tuple[list[tuple[str, str | None]], list[tuple[str, str | None]]]:
        """(positional, keyword-only) as [(name, default source or None)]: the positional
        arguments in python_order, each default from what it means (an in-place buffer: None;
        op: sum; root with root_none: None); stream and config by keyword."""
        defaults = {}
        for p in self.buffers:
            defaults[p.python_name] = "None" if p.in_place_of is not None and not p.root_only else None
        if self.rank_arg:
            defaults[self.rank_arg.python_name] = "None" if self.root_none else None
        if self.role("op"):
            defaults["op"] = "SUM"
        positional = [(name, defaults[name]) for name in self.python_order]
        keywords = [("stream", "None")]
        if self.config_variant:
            keywords.append(("config", "None"))
        return positional, keywords

    @property
    def python_arguments(self) -> list[str]:
        positional, keywords = self.python_signature
        return [n for n, _ in positional + keywords]


@dataclass(frozen=True)
class CallParam:
    """One parameter of a `kind = "call"` entry, with what its IR type makes it."""
    param: str                  # the header's parameter name
    role: str                   # self | in | out | out_buffer | out_length; result: the C result
    position: int
    name: str = ""              # the argument's name (Python and Rust); '' for self and outs, but
                                # an out of a record-returning call: the record's field
    kind: str = ""              # in: int | enum | unique_id | comm_config | string | record | capacity;
                                # out: int | pointer | record | unique_id | owner | string |
                                # string_table; out_buffer: bytes; result: int | record
    c_type: str = ""            # the C type's name (int, size_t, ncclCommMemStat_t, ...)
    signed: bool = False        # kind int: the C type's range
    size: int = 0
    enum_values: tuple[tuple[str, int], ...] = ()  # kind enum: (C name, value)
    optional: bool = False      # a pointer argument that may be NULL (Python None, Rust Option)
    default: object = None      # the Python default of an "in" argument (None: required)
    rank_of: str | None = None  # kind int: a rank of the record argument of that name (0..its nRanks)
    makes: str | None = None    # kind owner: the owner class the handle becomes
    of: str | None = None       # out_length: the out it is the length of; out_buffer: its capacity argument

    @property
    def bounds(self) -> tuple[int, int]:
        """The C type's range (kind int)."""
        return int_range(self.size, self.signed)


@dataclass(frozen=True)
class CallPolicy:
    """A `kind = "call"` entry: a host call without device buffers."""
    name: str
    function: str
    owner: str
    doc: str
    params: tuple[CallParam, ...]     # in the C call's order
    source: str = ""
    result: CallParam | None = None   # returns = "value": the C result (None for void)
    returns_value: bool = False       # the function returns no ncclResult_t
    aliases: tuple[str, ...] = ()     # other Python names of the method
    python_property: bool = False     # read as an attribute (a call without arguments)
    record: str | None = None         # the record its out-pointers make (each out a field), if any
    python_order: tuple[str, ...] = ()   # the positional "in" arguments in Python, in order
    none_if_null: bool = False        # Python: None for a NULL pointer result

    @property
    def inputs(self) -> tuple[CallParam, ...]:
        return tuple(p for p in self.params if p.role == "in")

    @property
    def python_inputs(self) -> tuple[CallParam, ...]:
        """The "in" arguments in the Python signature's order (python_order, then keyword-only ones)."""
        by_name = {p.name: p for p in self.inputs}
        return tuple(by_name[n] for n in self.python_order) + \
            tuple(p for p in self.inputs if p.name not in self.python_order)

    @property
    def outs(self) -> tuple[CallParam, ...]:
        """The out-pointers, in the C call's order (a record-returning call's fields)."""
        return tuple(p for p in self.params if p.role == "out")

    @property
    def output(self) -> CallParam | None:
        """What the method returns: its out-pointer, the buffer NCCL fills, the C result, or
        (kind result_record) the record its out-pointers make."""
        if self.record is not None:
            return CallParam("", "out", -1, kind="result_record", c_type=self.record)
        return next((p for p in self.params if p.role in ("out", "out_buffer")), self.result)

    @property
    def length(self) -> CallParam | None:
        """The out-pointer NCCL writes the output's length to (an out_length), if any."""
        return next((p for p in self.params if p.role == "out_length"), None)

    @property
    def module(self) -> bool:
        """A process-wide function of a module owner (no owner object)."""
        return OWNER_HANDLES[self.owner] is None


@dataclass(frozen=True)
class RecordField:
    name: str                   # the field's name in the languages (nccl4py's: op_count)
    c_field: str                # the C struct's field (opCnt)
    c_type: str
    signed: bool
    size: int
    default: int | None = None  # None: required
    doc: str = ""               # the header's comment on the C field

    @property
    def bounds(self) -> tuple[int, int]:
        return int_range(self.size, self.signed)


@dataclass(frozen=True)
class RecordPolicy:
    """A `kind = "record"` entry: a public record over a C struct, its integer fields renamed."""
    name: str                   # the class (WaitSignalDesc)
    c_record: str               # the C struct (ncclWaitSignalDesc_t)
    doc: str
    fields: tuple[RecordField, ...]
    source: str = ""


@dataclass(frozen=True)
class ResultRecord:
    """A record that record-returning calls (CallPolicy.record) make of their out-pointers: one
    field per out, named by the policy, typed by the IR; every call that names it agrees."""
    name: str
    fields: tuple[CallParam, ...]   # the first call's outs (name, C type, range)
    calls: tuple[str, ...]          # the calls that return it


@dataclass
class Policy:
    methods: list[MethodPolicy] = field(default_factory=list)
    calls: list[CallPolicy] = field(default_factory=list)
    records: list[RecordPolicy] = field(default_factory=list)

    def result_records(self) -> list[ResultRecord]:
        """The records record-returning calls make, in the order first named."""
        out: dict[str, ResultRecord] = {}
        for c in self.calls:
            if c.record is None:
                continue
            known = out.get(c.record)
            out[c.record] = ResultRecord(c.record, known.fields if known else c.outs,
                                         (known.calls if known else ()) + (c.name,))
        return list(out.values())

    def calls_for(self, owner: str) -> list[CallPolicy]:
        return [c for c in self.calls if c.owner == owner]

    def for_owner(self, owner: str) -> list[MethodPolicy]:
        return [m for m in self.methods if m.owner == owner]

    def generated_functions(self) -> dict[str, tuple[str, str]]:
        """Every NCCL function the policy binds -> (Python name, Rust name) (coverage.py)."""
        from .coverage import PYTHON_OWNERS
        out = {}
        for m in self.methods:
            for function in filter(None, (m.function, m.config_variant)):
                out[function] = (f"{PYTHON_OWNERS[m.owner]}.{m.name}", f"{m.owner}::{m.name}")
        for c in self.calls:
            out[c.function] = (f"{PYTHON_OWNERS[c.owner]}.{c.name}", f"{c.owner}::{c.name}")
        return out

    def functions(self) -> dict[str, MethodPolicy]:
        """Every NCCL function the policy binds (config variants too) -> its method."""
        out = {}
        for m in self.methods:
            out[m.function] = m
            if m.config_variant:
                out[m.config_variant] = m
        for c in self.calls:
            out[c.function] = c
        return out


def load_policy(api, path: Path | None = None) -> Policy:
    """Read a policy file and check it against `api` (a merged LibraryAPI). NCCL EP's
    (nccl_ep.toml) has its own schema: an ep.EpPolicy (generator/policy/ep.py)."""
    path = path or POLICY_DIR / f"{api.library}.toml"
    if not path.exists():
        return Policy()
    if api.library == "nccl_ep":
        from .ep import PolicyError as EpPolicyError, load_ep_policy
        try:
            return load_ep_policy(api, path)
        except EpPolicyError as e:
            raise PolicyError(str(e)) from None
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    functions = {fn.name: fn for fn in api.functions}
    records = {r.name: r for r in getattr(api, "records", ())}
    typedefs = {t.name: t.type for t in getattr(api, "typedefs", ())}
    policy = Policy()
    for name, table in raw.items():
        where = f"{path.name}:[{name}]"
        kind = table.get("kind", "buffers")
        if kind == "call":
            policy.calls.append(_call(name, table, functions, {e.name: e for e in api.enums}, records, where,
                                    typedefs))
        elif kind == "buffers":
            policy.methods.append(_method(name, {k: v for k, v in table.items() if k != "kind"}, functions, where))
        elif kind == "record":
            policy.records.append(_record(name, table, records, where))
        else:
            raise PolicyError(f"{where}: kind must be \"buffers\" (the default), \"call\" or \"record\", "
                            f"not {kind!r}")
    _check_root_none(policy)
    _check_result_records(policy)
    return policy


def _check_result_records(policy: Policy) -> None:
    """Calls that name one record make the same fields (names and C types, in order), and a
    record's name is one thing: not also a kind = "record" entry."""
    entries = {r.name for r in policy.records}
    first: dict[str, CallPolicy] = {}
    for c in policy.calls:
        if c.record is None:
            continue
        if c.record in entries:
            raise PolicyError(f"{c.source}: record = {c.record!r} is also a kind = \"record\" entry")
        known = first.setdefault(c.record, c)
        shape = [(p.name, p.c_type, p.size, p.signed) for p in c.outs]
        if shape != [(p.name, p.c_type, p.size, p.signed) for p in known.outs]:
            raise PolicyError(f"{c.source}: record {c.record!r} has fields {shape} here, but "
                            f"{[(p.name, p.c_type, p.size, p.signed) for p in known.outs]} in {known.source}")


def _record(name: str, table: dict, records: dict, where: str) -> RecordPolicy:
    """A kind = "record" entry, checked: the C struct is in the headers, each field names one of
    its integer fields, every C field is named once (a field a new release adds stops the run),
    defaults fit the C type and no required field follows one with a default."""
    def fail(message):
        raise PolicyError(f"{where}: {message}")

    unknown = set(table) - RECORD_KEYS
    if unknown:
        fail(f"unknown key(s) {sorted(unknown)} (known: {sorted(RECORD_KEYS)})")
    for key in ("record", "doc", "fields"):
        if key not in table:
            fail(f"missing key {key!r}")
    record = records.get(table["record"])
    if record is None:
        fail(f"record {table['record']} is not in the headers")
    c_fields = {f.name: f for f in record.fields}
    out, named, defaulted = [], [], False
    for field_name, value in table["fields"].items():
        if not isinstance(value, dict) or set(value) - RECORD_FIELD_KEYS or "field" not in value:
            fail(f"fields.{field_name}: a table of field (the C field) and an optional default")
        c_field = c_fields.get(value["field"])
        if c_field is None:
            fail(f"fields.{field_name}: {record.name} has no field {value['field']!r} "
                 f"(it has {', '.join(c_fields)})")
        t = c_field.type
        if t.kind != "int" or c_field.bit_width is not None:
            fail(f"fields.{field_name}: {record.name}.{c_field.name} is {t.name or t.kind}, not an integer")
        default = value.get("default")
        if default is not None and (type(default) is not int or not _in_range(default, t)):
            fail(f"fields.{field_name}: default {default!r} is not a {t.name}")
        if default is None and defaulted:
            fail(f"fields.{field_name}: a required field after one with a default")
        defaulted = defaulted or default is not None
        named.append(c_field.name)
        out.append(RecordField(field_name, c_field.name, t.name, bool(t.signed), t.size, default,
                               " ".join((c_field.doc or "").split())))
    missing = [n for n in c_fields if n not in named]
    if missing or len(set(named)) != len(named):
        fail(f"fields must name each field of {record.name} once: {', '.join(missing) or 'one twice'}")
    return RecordPolicy(name, record.name, table["doc"], tuple(out), where)


def _check_root_none(policy: Policy) -> None:
    """A root_none target is a method of the same owner taking the same arguments but root."""
    by_name = {m.name: m for m in policy.methods}
    for m in policy.methods:
        if m.root_none is None:
            continue
        target = by_name.get(m.root_none)
        wanted = [a for a in m.python_arguments if a != m.rank_arg.python_name]
        if target is None or target.owner != m.owner or sorted(target.python_arguments) != sorted(wanted):
            raise PolicyError(f"{m.source}: python.root_none = {m.root_none!r} is not a method of {m.owner} "
                            f"taking {wanted}")


_WARNED: set[str] = set()  # each warning once per run, however often the policy is loaded


def _bind_roles(fn, given: dict, fail, where: str) -> dict:
    """The entry's params, keyed by the newest header's parameter names: each header parameter
    has a role, and no other is named. A name an older release gave a parameter at the same
    position with the same type (the newest renamed it) binds that parameter, with one warning
    naming both names; a name whose parameter changed position or type is an error naming the
    last release that has it."""
    header_params = [p.name for p in fn.params]
    bound = {}
    for p, role in given.items():
        if p in header_params:
            bound[p] = role
            continue
        renamed = next((q for q in fn.params if p in q.former_names), None)
        if renamed is not None and renamed.name not in given:
            position = fn.params.index(renamed) + 1
            message = (f"warning: {where}: {fn.name}'s parameter {p!r} is {renamed.name!r} in the newest release "
                       f"({fn.versions[-1]}): bound by position (parameter {position}, the same type)")
            if message not in _WARNED:
                _WARNED.add(message)
                print(message, file=sys.stderr)
            bound[renamed.name] = role
            continue
        if p in fn.dropped_params:
            fail(f"{fn.name}'s parameter {p!r} changed position or type after NCCL {fn.dropped_params[p]} "
                 f"(the newest release, {fn.versions[-1]}, has {', '.join(header_params)}): say the roles of the "
                 f"newest parameters")
        fail(f"{fn.name} has no parameter {p!r} (it has {', '.join(header_params)})")
    missing = [p for p in header_params if p not in bound]
    if missing:
        fail(f"no role for {fn.name}'s parameter(s) {', '.join(missing)}")
    return bound


def _method(name: str, table: dict, functions: dict, where: str) -> MethodPolicy:
    def fail(message):
        raise PolicyError(f"{where}: {message}")

    check_keys(table, METHOD_KEYS, fail, required=("function", "owner", "doc", "params"))
    fn = functions.get(table["function"])
    if fn is None:
        fail(f"function {table['function']} is not in the headers")
    header_params = [p.name for p in fn.params]
    given = _bind_roles(fn, table["params"], fail, where)
    roles = []
    for position, pname in enumerate(header_params):
        roles.append(_param(pname, given[pname], position, fail))
    _check_roles(roles, fail)
    config_variant = table.get("config_variant")
    if config_variant:
        variant = functions.get(config_variant)
        if variant is None:
            fail(f"config_variant {config_variant} is not in the headers")
        vparams = [p.name for p in variant.params]
        if not vparams or vparams[-1] != "config":
            fail(f"config_variant {config_variant} does not end in a `config` parameter "
                 f"(its parameters: {', '.join(vparams) or 'none'})")
        # one parameter under two names where a release renamed it in one of the two functions
        names = lambda p: {p.name, *p.former_names}  # noqa: E731
        if len(vparams) - 1 != len(fn.params) or any(
                not names(a) & names(b) for a, b in zip(variant.params, fn.params)):
            differ = next(((i, a.name, b.name) for i, (a, b) in enumerate(zip(variant.params, fn.params))
                           if not names(a) & names(b)), None)
            what = (f"its parameter {differ[0] + 1} is {differ[1]!r} where {fn.name} has {differ[2]!r}" if differ else
                    f"it has {len(vparams) - 1} parameters before config, {fn.name} has {len(header_params)}")
            fail(f"config_variant {config_variant} is not {fn.name}'s parameters plus a trailing config: {what}")
    method = MethodPolicy(name, fn.name, table["owner"], table["doc"], tuple(roles), config_variant, where)
    return _python_surface(method, table.get("python", {}), fail)


def _python_surface(method: MethodPolicy, table: dict, fail) -> MethodPolicy:
    """The method with its `python` table's order, aliases and root_none, checked: the order
    names every positional argument once, and a default never precedes a required one."""
    unknown = set(table) - PYTHON_METHOD_KEYS
    if unknown:
        fail(f"python: unknown key(s) {sorted(unknown)} (known: {sorted(PYTHON_METHOD_KEYS)})")
    arguments = [p.python_name for p in method.buffers]
    if method.role("op"):
        arguments.append("op")
    if method.rank_arg:
        arguments.append(method.rank_arg.python_name)
    order = tuple(table.get("order", arguments))
    if sorted(order) != sorted(arguments):
        fail(f"python.order {list(order)} must name each of {arguments} once")
    root_none = table.get("root_none")
    if root_none is not None and not method.role("root"):
        fail("python.root_none: the method has no root")
    aliases = tuple(table.get("aliases", ()))
    if method.name in aliases or len(set(aliases)) != len(aliases):
        fail(f"python.aliases {list(aliases)} repeat a name")
    method = replace(method, python_order=order, aliases=aliases, root_none=root_none)
    positional, _ = method.python_signature
    seen_default = False
    for argument, default in positional:
        if default is None and seen_default:
            fail(f"python.order: {argument!r} is required and follows an argument with a default")
        seen_default = seen_default or default is not None
    return method

def _param(pname: str, value, position: int, fail) -> ParamRole:
    if isinstance(value, str):
        if value not in SCALAR_ROLES:
            fail(f"{pname}: unknown role {value!r} (roles: {sorted(SCALAR_ROLES | BUFFER_ROLES | {'count'})})")
        names = (pname, pname) if value in ("root", "peer") else ("", "")
        return ParamRole(pname, value, position, *names)
    role = value.get("role")
    if role == "count":
        if set(value) != {"role", "of"}:
            fail(f"{pname}: a count takes exactly role and of")
        return ParamRole(pname, "count", position, count_of=value["of"])
    if role not in BUFFER_ROLES:
        fail(f"{pname}: unknown role {role!r}")
    unknown = set(value) - BUFFER_KEYS
    if unknown:
        fail(f"{pname}: unknown key(s) {sorted(unknown)} (known: {sorted(BUFFER_KEYS)})")
    elements = value.get("elements", "count")
    if elements not in ELEMENTS:
        fail(f"{pname}: elements must be one of {sorted(ELEMENTS)}, not {elements!r}")
    python_name, rust_name = value.get("name", DEFAULT_NAMES[role])
    return ParamRole(pname, role, position, python_name, rust_name, per_rank=elements != "count",
                     root_only=bool(value.get("root_only", False)), in_place_of=value.get("in_place_of"))


def _check_roles(roles: list[ParamRole], fail) -> None:
    by_role: dict[str, list[ParamRole]] = {}
    for r in roles:
        by_role.setdefault(r.role, []).append(r)
    for needed in ("comm", "stream", "count", "dtype"):
        if len(by_role.get(needed, [])) != 1:
            fail(f"needs exactly one {needed!r} parameter")
    if not any(r.is_buffer for r in roles):
        fail("needs at least one send or recv buffer")
    if len(by_role.get("root", [])) + len(by_role.get("peer", [])) > 1:
        fail("at most one root or peer parameter")
    buffers = {r.param: r for r in roles if r.is_buffer}
    count = by_role["count"][0]
    if count.count_of not in buffers:
        fail(f"{count.param}: of = {count.count_of!r} is not a buffer parameter")
    if buffers[count.count_of].root_only:
        fail(f"{count.param}: of = {count.count_of!r}, a root-only buffer (every rank needs the count)")
    for b in buffers.values():
        if b.root_only and not by_role.get("root"):
            fail(f"{b.param}: root_only without a root parameter")
        if b.in_place_of is not None and b.in_place_of not in buffers:
            fail(f"{b.param}: in_place_of = {b.in_place_of!r} is not a buffer parameter")


def _call(name: str, table: dict, functions: dict, enums: dict, records: dict, where: str,
          typedefs: dict | None = None) -> CallPolicy:
    def fail(message):
        raise PolicyError(f"{where}: {message}")

    unknown = set(table) - CALL_KEYS
    if unknown:
        fail(f"unknown key(s) {sorted(unknown)} (known: {sorted(CALL_KEYS)})")
    for key in ("function", "owner", "doc", "params"):
        if key not in table:
            fail(f"missing key {key!r}")
    owner = table["owner"]
    if owner not in OWNER_HANDLES:
        fail(f"owner {owner!r} is not one of {sorted(OWNER_HANDLES)}")
    fn = functions.get(table["function"])
    if fn is None:
        fail(f"function {table['function']} is not in the headers")
    returns = table.get("returns", "result")
    if returns not in RETURNS:
        fail(f"returns must be one of {list(RETURNS)}, not {returns!r}")
    result = None
    if returns == "result" and fn.result.name != "ncclResult_t":
        fail(f"{fn.name} returns {fn.result.name or fn.result.kind}, not ncclResult_t: a call entry reports "
             "failures through ncclResult_t, or says returns = \"value\" to return the C result")
    if returns == "value":
        r = fn.result
        if r.name == "ncclResult_t":
            fail(f"{fn.name} returns ncclResult_t: returns = \"value\" is for functions that return something else")
        if r.kind == "int":
            result = CallParam("", "result", -1, kind="int", c_type=r.name, signed=bool(r.signed), size=r.size)
        elif r.kind == "record":
            result = CallParam("", "result", -1, kind="record", c_type=r.name)
        elif r.kind != "void":
            fail(f"{fn.name} returns {r.name or r.kind}: returns = \"value\" takes an integer, a record or void")
    given = _bind_roles(fn, table["params"], fail, where)
    params = [_call_param(p, given[p.name], i, owner, enums, fail, typedefs or {}) for i, p in enumerate(fn.params)]
    roles = [p.role for p in params]
    if roles.count("self") != (0 if OWNER_HANDLES[owner] is None else 1):
        fail("a module owner's functions take no 'self' parameter" if OWNER_HANDLES[owner] is None
             else "needs exactly one 'self' parameter")
    record = table.get("record")
    outs = [p for p in params if p.role == "out"]
    if record is not None:
        # the out-pointers make one record: each an integer, named (its field)
        if not isinstance(record, str) or not record.isidentifier():
            fail(f"record = {record!r}: the name of the record class the outs make")
        if len(outs) < 2 or roles.count("out_buffer") or result is not None or roles.count("out_length"):
            fail("record: for a call with two or more 'out' parameters and no other output")
        for p in outs:
            if p.kind != "int" or not p.name:
                fail(f"{p.param}: an out of a record is an integer with a name (its field)")
        if len({p.name for p in outs}) != len(outs):
            fail("the outs' names (the record's fields) repeat")
    else:
        if roles.count("out") + roles.count("out_buffer") + (result is not None) > 1:
            fail("at most one 'out' parameter (the method returns it; an 'out_buffer' or returns = \"value\" counts "
                 "as one; several outs make a record: record = Name)")
        if any(p.name for p in outs):
            fail("an out's name is a record field: only for a call with record = Name")
    by_param = {p.param: p for p in params}
    for i, p in enumerate(params):
        if p.role == "out_length":
            target = by_param.get(p.of)
            if target is None or target.role not in ("out", "out_buffer") or \
                    (target.role == "out" and target.kind not in ("string", "string_table")):
                fail(f"{p.param}: of = {p.of!r} is not a string, string-table or buffer output")
        if p.role == "out_buffer":
            capacity = by_param.get(p.of)
            if capacity is None or capacity.role != "in" or capacity.kind != "int":
                fail(f"{p.param}: capacity = {p.of!r} is not an integer 'in' argument")
            if not [q for q in params if q.role == "out_length" and q.of == p.param]:
                fail(f"{p.param}: an out_buffer needs an out_length (how much NCCL wrote)")
            params[capacity.position] = replace(capacity, kind="capacity")
        if p.rank_of is not None:
            team = by_param.get(p.rank_of)
            fields = {f.name for f in getattr(records.get(team.c_type), "fields", ())} if team else set()
            # (the record may come after the rank: the generated method checks records first)
            if team is None or team.role != "in" or team.kind != "record" or "nRanks" not in fields:
                fail(f"{p.param}: rank_of = {p.rank_of!r} is not a record argument with an nRanks field")
    names = [p.name for p in params if p.role == "in"]
    if len(set(names)) != len(names):
        fail(f"argument names repeat: {names}")
    python = table.get("python", {})
    unknown = set(python) - PYTHON_CALL_KEYS
    if unknown:
        fail(f"python: unknown key(s) {sorted(unknown)} (known: {sorted(PYTHON_CALL_KEYS)})")
    inputs = {p.name: p for p in params if p.role == "in"}
    positional = [n for n, p in inputs.items() if p.kind != "comm_config"]
    order = tuple(python.get("order", positional))
    if sorted(order) != sorted(positional):
        fail(f"python.order {list(order)} must name each of {positional} once (a config stays keyword-only)")
    # Python's defaults in Python's order (Rust takes every argument, in the C call's order)
    defaulted = False
    for n in order + tuple(n for n in inputs if n not in order):
        p = inputs[n]
        if p.default is None and not p.optional and defaulted:
            fail(f"{p.param}: a required argument after one with a default"
                 + (" (in python.order)" if "order" in python else ""))
        defaulted = defaulted or p.default is not None or p.optional
    is_property = bool(python.get("property", False))
    if is_property and (names or OWNER_HANDLES[owner] is None):
        fail("python.property is for a method of an owner object that takes no argument")
    aliases = tuple(python.get("aliases", ()))
    if name in aliases or len(set(aliases)) != len(aliases):
        fail(f"python.aliases {list(aliases)} repeat a name")
    none_if_null = python.get("none_if_null", False)
    if type(none_if_null) is not bool:
        fail(f"python.none_if_null: true or false, not {none_if_null!r}")
    if none_if_null and (len(outs) != 1 or outs[0].kind != "pointer" or record is not None):
        fail("python.none_if_null: for a call that returns one pointer (an 'out' of a void *)")
    return CallPolicy(name, fn.name, owner, table["doc"], tuple(params), where, result, returns == "value",
                    aliases, is_property, record, order, none_if_null)


def _is_char(t) -> bool:
    return t is not None and t.kind == "int" and t.name == "char"


def _call_param(param, value, position: int, owner: str, enums: dict, fail, typedefs: dict) -> CallParam:
    t = param.type
    if value == "self":
        if OWNER_HANDLES[owner] is None or t.name != OWNER_HANDLES[owner]:
            fail(f"{param.name}: 'self' is {OWNER_HANDLES[owner]} for a {owner}, not {t.name or t.kind}")
        return CallParam(param.name, "self", position)
    if isinstance(value, str):
        fail(f"{param.name}: unknown role {value!r} (roles of a call: {sorted(CALL_ROLES)})")
    role = value.get("role")
    if role == "out_length":
        if set(value) != {"role", "of"}:
            fail(f"{param.name}: an out_length takes exactly role and of")
        if t.kind != "pointer" or t.const or t.pointee.kind != "int":
            fail(f"{param.name}: 'out_length' needs an out-pointer to an integer, not {t.name or t.kind}")
        return CallParam(param.name, "out_length", position, kind="int", c_type=t.pointee.name,
                         signed=bool(t.pointee.signed), size=t.pointee.size, of=value["of"])
    if role == "out_buffer":
        if set(value) != {"role", "capacity"}:
            fail(f"{param.name}: an out_buffer takes exactly role and capacity")
        if t.kind != "pointer" or t.const or t.pointee.kind != "void":
            fail(f"{param.name}: 'out_buffer' needs a void * NCCL writes into, not {t.name or t.kind}")
        return CallParam(param.name, "out_buffer", position, kind="bytes", c_type="void *", of=value["capacity"])
    if role == "out":
        if set(value) - {"role", "name"}:
            fail(f"{param.name}: an out parameter takes role, and name when it is a field of the call's record")
        if t.kind != "pointer" or t.const or param.direction != "out":
            fail(f"{param.name}: 'out' needs an out-pointer, not {t.kind} ({param.direction})")
        target = t.pointee
        field_name = value.get("name", "")
        resolved = target
        while resolved.kind == "typedef" and resolved.name in typedefs:  # ncclCftLeId: uint32_t
            resolved = typedefs[resolved.name]
        if resolved.kind == "int":
            return CallParam(param.name, "out", position, name=field_name, kind="int", c_type=target.name,
                             signed=bool(resolved.signed), size=resolved.size)
        if field_name:
            fail(f"{param.name}: a named out (a record field) is an integer, not {target.name or target.kind}")
        if target.kind == "pointer" and _is_char(target.pointee):
            return CallParam(param.name, "out", position, kind="string", c_type="const char *")
        if target.kind == "pointer" and target.pointee.kind == "pointer" and _is_char(target.pointee.pointee):
            return CallParam(param.name, "out", position, kind="string_table", c_type="const char **")
        if target.kind == "pointer":
            return CallParam(param.name, "out", position, kind="pointer", c_type="void *")
        handles = {h: o for o, h in OWNER_HANDLES.items() if h}
        if target.kind == "typedef" and target.name in handles:
            return CallParam(param.name, "out", position, kind="owner", c_type=target.name,
                             makes=handles[target.name])
        if target.kind == "record":
            return CallParam(param.name, "out", position, kind=RECORD_KINDS.get(target.name, "record"),
                             c_type=target.name)
        fail(f"{param.name}: an out-pointer to {target.name or target.kind} is not one a call returns")
    if role != "in":
        fail(f"{param.name}: unknown role {role!r} (roles of a call: {sorted(CALL_ROLES)})")
    unknown = set(value) - IN_KEYS
    if unknown:
        fail(f"{param.name}: unknown key(s) {sorted(unknown)} (known: {sorted(IN_KEYS)})")
    if "name" not in value:
        fail(f"{param.name}: an 'in' argument needs a name")
    name, optional, default = value["name"], bool(value.get("optional", False)), value.get("default")
    rank_of = value.get("rank_of")
    common = dict(name=name, optional=optional, default=default)
    if rank_of is not None and t.kind != "int":
        fail(f"{param.name}: rank_of is for an integer rank, not {t.name or t.kind}")
    if t.kind == "int":
        if optional:
            fail(f"{param.name}: optional is for pointer arguments (None / NULL), not {t.name}")
        if default is not None and (type(default) is not int or not _in_range(default, t)):
            fail(f"{param.name}: default {default!r} is not a {t.name}")
        return CallParam(param.name, "in", position, kind="int", c_type=t.name, signed=bool(t.signed),
                         size=t.size, rank_of=rank_of, **common)
    if t.kind == "enum":
        enum = enums.get(t.name)
        if enum is None or optional:
            fail(f"{param.name}: enum {t.name} is not in the headers, or marked optional")
        values = tuple((v.name, v.value) for v in enum.values)
        if default is not None and default not in [v for _, v in values]:
            fail(f"{param.name}: default {default!r} is not a value of {t.name}")
        return CallParam(param.name, "in", position, kind="enum", c_type=t.name, enum_values=values, **common)
    if t.kind == "record":
        if optional or default is not None:
            fail(f"{param.name}: a record passed by value takes neither optional nor a default")
        return CallParam(param.name, "in", position, kind="record", c_type=t.name, **common)
    if t.kind == "pointer" and t.const and _is_char(t.pointee):
        if optional or default is not None:
            fail(f"{param.name}: a string argument takes neither optional nor a default")
        return CallParam(param.name, "in", position, kind="string", c_type="const char *", **common)
    record = t.pointee if t.kind == "pointer" else None
    if record is not None and record.kind == "record" and record.name in RECORD_KINDS:
        if default is not None:
            fail(f"{param.name}: a record argument takes optional, not a default")
        return CallParam(param.name, "in", position, kind=RECORD_KINDS[record.name], c_type=record.name, **common)
    fail(f"{param.name}: 'in' takes an integer, an enum, a string (const char *), a record by value or a "
         f"pointer to one of {sorted(RECORD_KINDS)}, not {t.name or t.kind}")


def _in_range(value: int, t) -> bool:
    low, high = int_range(t.size, t.signed)
    return low <= value <= high
