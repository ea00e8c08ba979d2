"""The semantic spec: what each parameter of an NCCL call means (generator/spec/*.toml).

It is binding policy, read after the header sets are parsed and merged (editing it parses
nothing again), checked against the merged API, and rendered into the idiomatic layers:
render/spec_python.py (methods, their checks and the fast path's table) and
render/spec_rust.py (safe methods). The TOML's header comment documents the roles.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

SPEC_DIR = Path(__file__).parent

SCALAR_ROLES = {"comm", "stream", "dtype", "op", "root", "peer"}
BUFFER_ROLES = {"send", "recv"}
ELEMENTS = {"count": 1, "nranks * count": "nranks"}
DEFAULT_NAMES = {"send": ("sendbuf", "send"), "recv": ("recvbuf", "recv")}
METHOD_KEYS = {"function", "config_variant", "owner", "doc", "params"}
BUFFER_KEYS = {"role", "elements", "root_only", "in_place_of", "name"}


class SpecError(Exception):
    """A spec entry that does not fit the headers or the roles; names the file and entry."""


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
class MethodSpec:
    name: str                   # method name (Python and Rust)
    function: str               # the NCCL function
    owner: str
    doc: str
    params: tuple[ParamRole, ...]     # in the C call's order
    config_variant: str | None = None
    source: str = ""            # file:table, for messages

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
        """(positional, keyword-only) as [(name, default source or None)]: buffers in the
        call's order, then root/peer, then op (default sum); stream and config by keyword."""
        positional = []
        for p in self.buffers:
            optional = p.in_place_of is not None and not p.root_only
            positional.append((p.python_name, "None" if optional else None))
        if self.rank_arg:
            positional.append((self.rank_arg.python_name, None))
        if self.role("op"):
            positional.append(("op", "SUM"))
        keywords = [("stream", "None")]
        if self.config_variant:
            keywords.append(("config", "None"))
        return positional, keywords

    @property
    def python_arguments(self) -> list[str]:
        positional, keywords = self.python_signature
        return [n for n, _ in positional + keywords]


@dataclass
class Spec:
    methods: list[MethodSpec] = field(default_factory=list)

    def for_owner(self, owner: str) -> list[MethodSpec]:
        return [m for m in self.methods if m.owner == owner]

    def functions(self) -> dict[str, MethodSpec]:
        """Every NCCL function the spec binds (config variants too) -> its method."""
        out = {}
        for m in self.methods:
            out[m.function] = m
            if m.config_variant:
                out[m.config_variant] = m
        return out


def load_spec(api, path: Path | None = None) -> Spec:
    """Read a spec file and check it against `api` (a merged LibraryAPI)."""
    path = path or SPEC_DIR / f"{api.library}.toml"
    if not path.exists():
        return Spec()
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    functions = {fn.name: fn for fn in api.functions}
    return Spec([_method(name, table, functions, f"{path.name}:[{name}]") for name, table in raw.items()])


def _method(name: str, table: dict, functions: dict, where: str) -> MethodSpec:
    def fail(message):
        raise SpecError(f"{where}: {message}")

    unknown = set(table) - METHOD_KEYS
    if unknown:
        fail(f"unknown key(s) {sorted(unknown)} (known: {sorted(METHOD_KEYS)})")
    for key in ("function", "owner", "doc", "params"):
        if key not in table:
            fail(f"missing key {key!r}")
    fn = functions.get(table["function"])
    if fn is None:
        fail(f"function {table['function']} is not in the headers")
    header_params = [p.name for p in fn.params]
    given = table["params"]
    for p in given:
        if p not in header_params:
            fail(f"{fn.name} has no parameter {p!r} (it has {', '.join(header_params)})")
    missing = [p for p in header_params if p not in given]
    if missing:
        fail(f"no role for {fn.name}'s parameter(s) {', '.join(missing)}")
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
        if vparams[:-1] != header_params or vparams[-1] != "config":
            fail(f"config_variant {config_variant} is not {fn.name}'s parameters plus a trailing config")
    return MethodSpec(name, fn.name, table["owner"], table["doc"], tuple(roles), config_variant, where)


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
