"""The NCCL EP policy (policy/nccl_ep.toml): what each EP call's parameters mean, the
tensor rules (dtypes, shapes by mode), the dimension symbols and limits the checks use, and the
token-row byte rules ([[row_bytes]]: a row in transit, by quantization recipe, against a budget).

Read after the header sets are merged and checked against the merged EP API; an entry that does
not fit the headers or the schema (documented at the top of the TOML) raises PolicyError naming
the file and the entry. Python (render/policy_python.py) and Rust (render/policy_rust.py) render
their EP layers from the EpPolicy this returns."""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from .common import check_keys
from ..ir.types import int_range
from .vocabulary import data_type_names

TOP_KEYS = {"owners", "dtypes", "symbols", "limits", "row_bytes", "tensors", "records", "configs", "preconditions",
            "methods", "enum_aliases"}
OWNER_KEYS = {"handle", "destroy", "doc"}
SYMBOL_SOURCES = {"nranks", "group_config", "quotient", "handle", "call"}
SYMBOL_KEYS = {"source", "field", "of", "doc"}
LIMIT_KINDS = ("at_most", "at_least", "multiple_of")
ROW_BYTES_KEYS = {"method", "recipe", "at_most", "doc", "recipes"}
ROW_TERM_KEYS = {"tensor", "per", "dtype"}
RULE_KEYS = {"dtypes", "shape", "required", "modes", "doc"}
RECORD_KEYS = {"class", "doc", "fields", "values"}
CONFIG_KEYS = {"class", "doc", "hidden", "nested", "positive", "enums", "python", "booleans"}
NESTED_ROLES = {"alloc": "ncclEpAllocConfig_t"}
METHOD_KEYS = {"function", "owner", "doc", "kind", "params", "binds", "requires"}
PRECONDITION_KEYS = {"algorithms", "config", "set_by", "doc"}
METHOD_KINDS = ("method", "create")
SCALAR_ROLES = {"self", "comm", "stream"}
TABLE_ROLES = {"out": {"role", "makes"}, "enum": {"role", "name"}, "int": {"role", "name", "default"},
               "tensor": {"role", "name", "rule", "optional"}, "tensors": {"role", "name", "optional"},
               "config": {"role", "name", "optional", "default"}, "device_array": {"role", "name", "rule"},
               "host_array": {"role", "name", "length"}}
# A mode: the group's algorithm and the handle's layout. Shape and dtype tables may also use
# the algorithm alone or "any".
MODES = ("ll_expert_major", "ll_rank_major", "ht_flat", "ht_expert_major")
ALGORITHMS = ("ll", "ht")
SHAPE_KEYS = set(MODES) | set(ALGORITHMS) | {"any"}
# ncclbind's element type names (NcclDataType.dtype_name): the vocabulary of `dtypes`, as
# policy/vocabulary.toml names the types (checked against ncclDataType_t where the nccl
# API is rendered).
DTYPE_NAMES = data_type_names()
ALWAYS_HIDDEN = re.compile(r"^(size|magic|version|padding.*)$")
_PYTHON_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TENSOR_RECORD = "ncclEpTensor_t"
COMM_HANDLE = "ncclComm_t"
STREAM_TYPE = "cudaStream_t"
GROUP_CONFIG = "ncclEpGroupConfig_t"
_DIM = re.compile(r"^\s*(\w+|\*)\s*(?:\*\s*(\w+)\s*)?$")


class PolicyError(Exception):
    """A policy entry that does not fit the headers or the schema; names the file and entry."""


@dataclass(frozen=True)
class Owner:
    name: str
    handle: str | None      # the C handle type, None for a module of functions
    destroy: str | None
    doc: str


@dataclass(frozen=True)
class Symbol:
    name: str
    source: str             # nranks | group_config | quotient | handle | call
    field: str | None = None
    of: tuple[str, ...] = ()
    doc: str = ""


@dataclass(frozen=True)
class Limit:
    symbol: str
    kind: str               # at_most | at_least | multiple_of
    bound: str | int        # a symbol, or an integer (at_least; multiple_of may take either)
    doc: str
    # where it holds: None = everywhere; else the modes / the method names it is checked in (a
    # call outside them, or whose mode is not known, skips it)
    modes: tuple[str, ...] | None = None
    methods: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RowTerm:
    """Bytes of one part of a token row in transit: the last extent of a tensor of a tensor-set
    argument, divided by `per` (rounded up), in elements of `dtype` (None: the tensor's own)."""
    argument: str           # a "tensors" argument of the method (inputs)
    field: str              # its tensor field (tokens)
    per: int = 1            # source elements per transported element (a scale per 128 elements)
    dtype: str | None = None

    @property
    def tensor(self) -> str:
        return f"{self.argument}.{self.field}"


@dataclass(frozen=True)
class RowBytes:
    """[[row_bytes]]: a method's token row in transit, as its config's recipe field says it is
    made, against a group symbol (the budget). A recipe not in `recipes` is not checked."""
    method: str
    config: str             # the method's config argument
    field: str              # that config's enum field selecting the recipe
    enum: str               # the field's enum C type
    at_most: str            # a symbol of source group_config
    doc: str
    recipes: tuple[tuple[str, int, tuple[RowTerm, ...]], ...]   # (C enumerator, its value, terms)

    @property
    def tensors(self) -> tuple[str, ...]:
        """The tensors the terms read (argument.field), each once, in order; the first is the one
        a refusal names."""
        return tuple(dict.fromkeys(t.tensor for _, _, terms in self.recipes for t in terms))


@dataclass(frozen=True)
class TensorRule:
    """What one tensor must be: its element types and its shape, each by mode. A dimension is
    a symbol, an int, "*" or "a * b" (dims() parses it)."""
    name: str
    dtypes: dict            # mode key (a mode, ll, ht, any) -> tuple of element type names
    shapes: dict            # mode key (a mode, ll, ht, any) -> tuple of dimensions
    required: bool = False
    modes: tuple[str, ...] | None = None
    doc: str = ""

    def shape_for(self, mode: str) -> tuple | None:
        """The shape in `mode`: by the mode, then its algorithm, then any; None: unchecked."""
        return _by_mode(self.shapes, mode)

    def dtypes_for(self, mode: str | None) -> tuple[str, ...]:
        """The element types in `mode`: by the mode, then its algorithm, then any; no mode (a call
        without a layout) or a mode the table lacks: every type the table names."""
        found = None if mode is None else _by_mode(self.dtypes, mode)
        return self.all_dtypes if found is None else found

    @property
    def all_dtypes(self) -> tuple[str, ...]:
        """Every element type of the table, in its order, each once."""
        return tuple(dict.fromkeys(d for names in self.dtypes.values() for d in names))

    @property
    def by_mode(self) -> bool:
        """The element types depend on the mode (the table has a key other than any)."""
        return set(self.dtypes) != {"any"}

    def dtypes_text(self) -> str:
        """The element types as a sentence: "int32 or int64", or for a table by mode
        "ll_rank_major: int32; ht_flat: int64" (`any` said as "otherwise")."""
        if not self.by_mode:
            return " or ".join(self.all_dtypes)
        return "; ".join(f"{'otherwise' if key == 'any' else key}: {' or '.join(names)}"
                         for key, names in self.dtypes.items())

    def allowed_in(self, mode: str) -> bool:
        return self.modes is None or mode in self.modes

    @property
    def refused_modes(self) -> tuple[str, ...]:
        """The modes the tensor may not be given in (a check refuses it first, naming the modes
        it is for)."""
        return tuple(m for m in MODES if not self.allowed_in(m))

    def cases(self) -> tuple[RuleCase, ...]:
        """The rule resolved for every mode it is allowed in and for a call whose mode is not
        known, modes with the same element types and shape together: one branch each of the
        check the renderers write for it (no lookup by mode is left for run time). The case of
        the unknown mode comes last."""
        found: dict = {}
        for mode in (*(m for m in MODES if self.allowed_in(m)), None):
            dtypes = self.dtypes_for(mode)
            shape = self.shapes.get("any") if mode is None else self.shape_for(mode)
            parsed = None if shape is None else tuple(parse_dim(d) for d in shape)
            found.setdefault((dtypes, parsed), []).append(mode)
        return tuple(RuleCase(tuple(m for m in modes if m is not None), None in modes, dtypes, shape)
                     for (dtypes, shape), modes in sorted(found.items(), key=lambda kv: None in kv[1]))


@dataclass(frozen=True)
class RuleCase:
    """One branch of a tensor rule's check: the element types and shape it requires in `modes`
    (and, where `unknown_mode`, in a call whose mode is not known)."""
    modes: tuple[str, ...]
    unknown_mode: bool
    dtypes: tuple[str, ...]
    shape: tuple | None     # parse_dim() of each dimension; None: the shape is not checked

    @property
    def shape_text(self) -> str:
        """The shape as errors say it: [num_tokens, hidden]."""
        return "[" + ", ".join(dim_text(d) for d in self.shape or ()) + "]"

    @property
    def symbols(self) -> list[str]:
        """The symbols the shape names, each once, in order."""
        return list(dict.fromkeys(s for d in self.shape or () for s in dim_symbols(d)))


def dim_text(parsed: tuple) -> str:
    """A parsed dimension as errors say it: 512, hidden, *, num_ranks * max_dispatch_tokens_per_rank."""
    kind = parsed[0]
    if kind == "int":
        return str(parsed[1])
    if kind == "sym":
        return parsed[1]
    if kind == "any":
        return "*"
    return f"{dim_text(parsed[1])} * {dim_text(parsed[2])}"


def _by_mode(table: dict, mode: str):
    for key in (mode, mode.split("_", 1)[0], "any"):
        if key in table:
            return table[key]
    return None


@dataclass(frozen=True)
class TensorRecord:
    c_name: str
    class_name: str
    doc: str
    fields: tuple[tuple[str, TensorRule], ...]     # ncclEpTensor_t * fields, in the record's order
    values: tuple[tuple[str, str], ...] = ()       # (field, enum C type)


@dataclass(frozen=True)
class ConfigField:
    name: str
    kind: str                # int | enum | alloc
    c_type: str
    signed: bool = False
    size: int = 0
    enum: str | None = None
    positive: bool = False
    doc: str = ""
    python_name: str = ""    # the Python keyword and attribute ([configs] python; default: name)
    boolean: bool = False    # an on/off int field: Python takes a bool ([configs] booleans)

    @property
    def keyword(self) -> str:
        """The Python keyword and attribute (the C field name stays an alias where they differ)."""
        return self.python_name or self.name

    @property
    def bounds(self) -> tuple[int, int]:
        """The C type's range (kind int)."""
        return int_range(self.size, self.signed)


@dataclass(frozen=True)
class ConfigRecord:
    c_name: str
    class_name: str
    doc: str
    fields: tuple[ConfigField, ...]                # the ones the class takes
    initializer: str | None = None                 # the NCCL_EP_*_INIT macro that stamps it


@dataclass(frozen=True)
class Precondition:
    """A state of the group a method needs (NCCL EP asserts it, ending the process): it holds
    when the group's algorithm is one of `algorithms` (None: any) and, where `config` or `set_by`
    is given, the config field was non-zero at creation or a `set_by` method has succeeded on
    the group since."""
    name: str
    algorithms: tuple[str, ...] | None     # ll / ht
    config: str | None                      # an integer field of ncclEpGroupConfig_t
    set_by: tuple[str, ...]                 # [methods] names
    doc: str

    @property
    def holds_from_creation(self) -> bool:
        """Neither config nor set_by: the algorithm alone decides."""
        return self.config is None and not self.set_by


@dataclass(frozen=True)
class Param:
    param: str               # the header's name
    role: str                # self | comm | stream | out | enum | int | tensor | tensors | config |
                             # device_array | host_array
    position: int
    name: str = ""           # the argument's name ('' for self, comm, stream, out)
    optional: bool = False
    default: object = None
    makes: str | None = None          # out: the owner a new handle becomes
    rule: str | None = None           # tensor, device_array: the [tensors] rule
    record: str | None = None         # tensors, config: the C record
    length: str | None = None         # host_array: the symbol of its length
    c_type: str = ""                  # int / enum / out / host_array element: the C type
    signed: bool = False
    size: int = 0

    @property
    def is_argument(self) -> bool:
        return bool(self.name)


@dataclass(frozen=True)
class Method:
    name: str
    function: str
    owner: str
    doc: str
    kind: str
    params: tuple[Param, ...]
    binds: tuple[tuple[str, str, int], ...] = ()   # (symbol, argument, dimension index)
    source: str = ""
    requires: tuple[str, ...] = ()                 # [preconditions] names, checked in order

    @property
    def arguments(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.is_argument)

    @property
    def output(self) -> Param | None:
        return next((p for p in self.params if p.role == "out"), None)

    def role(self, role: str) -> Param | None:
        return next((p for p in self.params if p.role == role), None)


@dataclass
class EpPolicy:
    owners: dict = field(default_factory=dict)       # name -> Owner
    dtypes: dict = field(default_factory=dict)       # group -> tuple of names
    symbols: dict = field(default_factory=dict)      # name -> Symbol
    limits: list = field(default_factory=list)
    row_bytes: list = field(default_factory=list)    # RowBytes, in the file's order
    tensors: dict = field(default_factory=dict)      # rule -> TensorRule
    records: dict = field(default_factory=dict)      # C name -> TensorRecord
    configs: dict = field(default_factory=dict)      # C name -> ConfigRecord
    # C enum -> ((alias, C enumerator), ...): more names of its members (nccl-extensions' spellings)
    enum_aliases: dict = field(default_factory=dict)
    preconditions: dict = field(default_factory=dict)  # name -> Precondition
    methods: list = field(default_factory=list)
    # what nccl.toml's Policy has, for the code that reads either
    calls: list = field(default_factory=list)

    def for_owner(self, owner: str) -> list[Method]:
        return [m for m in self.methods if m.owner == owner]

    def limits_involving(self, symbols) -> list[Limit]:
        """The limits a check must test once `symbols` are newly known, in the file's order: those
        of a symbol among them, or bounded by one (an integer bound involves only its symbol)."""
        new = set(symbols)
        return [limit for limit in self.limits
                if limit.symbol in new or (type(limit.bound) is not int and limit.bound in new)]

    def check_plan(self) -> CheckPlan:
        """The generated checks both languages write, named once: a check per tensor rule
        (tensor_<rule> of a [tensors] rule, <record>_<field> of a record's field) and the limit
        checks of every set of symbols that becomes known together (a symbol a shape binds, the
        group's at creation, a method's routing), limits_<symbols> (limits_group for the group's)."""
        rules: list[RuleCheck] = [RuleCheck(f"tensor_{name}", name, rule) for name, rule in self.tensors.items()]
        for record in self.records.values():
            for field_name, rule in record.fields:
                rules.append(RuleCheck(f"{snake(record.class_name)}_{field_name}", f"{record.class_name}.{field_name}",
                                       rule, record.c_name, field_name))
        names = [r.function for r in rules]
        if len(set(names)) != len(names):
            raise PolicyError(f"two tensor rules' checks have one name: {sorted(n for n in names if names.count(n) > 1)}")
        plan = CheckPlan(rules)
        for rule in rules:
            for case in rule.rule.cases():
                for d in case.shape or ():
                    if d[0] == "sym":
                        plan.limits_of((d[1],), self)
        plan.group = tuple(s.name for s in self.symbols.values() if s.source in ("nranks", "group_config"))
        plan.group_limits = plan.limits_of(plan.group, self, "limits_group")
        plan.bind_limits = {m.name: plan.limits_of(tuple(dict.fromkeys(s for s, _, _ in m.binds)), self)
                            for m in self.methods if m.binds}
        return plan

    def satisfies(self, method: str) -> tuple[str, ...]:
        """The preconditions a success of `method` meets on its group (their set_by)."""
        return tuple(p.name for p in self.preconditions.values() if method in p.set_by)

    def generated_functions(self) -> dict[str, tuple[str, str]]:
        """Every function the policy binds -> (Python name, Rust name)."""
        out = {}
        for m in self.methods:
            python = f"ep.{m.name}" if self.owners[m.owner].handle is None else f"ep.{m.owner}.{m.name}"
            rust = f"ep::{m.name}" if self.owners[m.owner].handle is None else f"ep::{m.owner}::{m.name}"
            out[m.function] = (python, rust)
        return out


def snake(class_name: str) -> str:
    """DispatchInputs -> dispatch_inputs."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", class_name).lower()


@dataclass(frozen=True)
class RuleCheck:
    """One tensor rule's generated check: its function's name, what errors call the rule, the rule,
    and for a record's field the record (C name) and the field."""
    function: str
    label: str
    rule: TensorRule
    record: str | None = None
    field: str | None = None


@dataclass
class CheckPlan:
    """EpPolicy.check_plan: the generated checks' names, stated once for both languages."""
    rules: list                                          # RuleCheck, [tensors] first, then each record's fields
    limit_sets: dict = field(default_factory=dict)      # function -> (symbols, the limits they involve)
    group: tuple = ()                                    # the group's symbols at creation
    group_limits: str | None = None
    bind_limits: dict = field(default_factory=dict)     # method -> the limit check of its routing's symbols

    def limits_for(self, symbols: tuple) -> str | None:
        """The limit check a shape's or a routing's `symbols` call (None: no limit involves them)."""
        name = "limits_" + "_".join(symbols)
        return name if name in self.limit_sets else None

    def limits_of(self, symbols: tuple, policy: EpPolicy, name: str | None = None) -> str | None:
        """The limit check of `symbols` becoming known together (None: they involve no limit)."""
        involved = policy.limits_involving(symbols)
        if not involved:
            return None
        name = name or "limits_" + "_".join(symbols)
        self.limit_sets.setdefault(name, (tuple(symbols), involved))
        return name


def parse_dim(dim) -> tuple:
    """A shape dimension as ("int", n) | ("any",) | ("sym", name) | ("mul", a, b) (a, b parsed)."""
    if type(dim) is int:
        return ("int", dim)
    m = _DIM.match(dim) if isinstance(dim, str) else None
    if m is None:
        raise ValueError(f"dimension {dim!r} is not a symbol, an int, '*' or 'a * b'")
    a, b = m.group(1), m.group(2)

    def one(text):
        return ("any",) if text == "*" else ("int", int(text)) if text.isdigit() else ("sym", text)
    return one(a) if b is None else ("mul", one(a), one(b))


def dim_symbols(parsed: tuple) -> list[str]:
    if parsed[0] == "sym":
        return [parsed[1]]
    if parsed[0] == "mul":
        return dim_symbols(parsed[1]) + dim_symbols(parsed[2])
    return []


def load_ep_policy(api, path: Path) -> EpPolicy:
    """Read the EP policy at `path` and check it against `api` (the merged nccl_ep LibraryAPI)."""
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    return build_ep_policy(raw, api, path.name)


def build_ep_policy(raw: dict, api, filename: str = "nccl_ep.toml") -> EpPolicy:
    """The EpPolicy of an already parsed TOML document (tests feed broken ones here)."""
    def fail(where, message):
        raise PolicyError(f"{filename}:{where}: {message}")

    unknown = set(raw) - TOP_KEYS
    if unknown:
        fail("", f"unknown section(s) {sorted(unknown)} (known: {sorted(TOP_KEYS)})")
    functions = {fn.name: fn for fn in api.functions}
    records = {r.name: r for r in api.records}
    enums = {e.name: e for e in api.enums}
    policy = EpPolicy()

    for name, t in raw.get("owners", {}).items():
        where = f"[owners.{name}]"
        _keys(t, OWNER_KEYS, where, fail, required=("doc",))
        handle, destroy = t.get("handle"), t.get("destroy")
        if (handle is None) != (destroy is None):
            fail(where, "a handle and its destroy function go together (a module has neither)")
        if destroy is not None and destroy not in functions:
            fail(where, f"destroy function {destroy} is not in the headers")
        policy.owners[name] = Owner(name, handle, destroy, t["doc"])

    for group, names in raw.get("dtypes", {}).items():
        policy.dtypes[group] = _dtype_list(names, f"[dtypes].{group}", fail)

    for name, t in raw.get("symbols", {}).items():
        where = f"[symbols.{name}]"
        _keys(t, SYMBOL_KEYS, where, fail, required=("source", "doc"))
        source = t["source"]
        if source not in SYMBOL_SOURCES:
            fail(where, f"unknown source {source!r} (sources: {sorted(SYMBOL_SOURCES)})")
        if source == "group_config":
            config = records.get("ncclEpGroupConfig_t")
            if "field" not in t or config is None or t["field"] not in {f.name for f in config.fields}:
                fail(where, f"field {t.get('field')!r} is not a field of ncclEpGroupConfig_t")
        if source == "quotient" and (not isinstance(t.get("of"), list) or len(t["of"]) != 2):
            fail(where, "a quotient takes of = [dividend, divisor]")
        policy.symbols[name] = Symbol(name, source, t.get("field"), tuple(t.get("of", ())), t["doc"])
    for s in policy.symbols.values():
        for other in s.of:
            if other not in policy.symbols:
                fail(f"[symbols.{s.name}]", f"of names {other!r}, not a symbol")

    for i, t in enumerate(raw.get("limits", [])):
        where = f"[[limits]] #{i + 1}"
        kinds = [k for k in LIMIT_KINDS if k in t]
        _keys(t, {"symbol", "doc", "modes", "methods", *LIMIT_KINDS}, where, fail, required=("symbol", "doc"))
        if len(kinds) != 1:
            fail(where, f"needs exactly one of {list(LIMIT_KINDS)}")
        kind, bound = kinds[0], t[kinds[0]]
        for s in ([t["symbol"]] + ([bound] if type(bound) is not int else [])):
            if s not in policy.symbols:
                fail(where, f"{s!r} is not a symbol")
        if kind == "at_least" and type(bound) is not int:
            fail(where, f"at_least takes an integer, not {bound!r}")
        if kind == "at_most" and type(bound) is int:
            fail(where, f"at_most takes a symbol, not {bound!r}")
        if kind == "multiple_of" and type(bound) is int and bound < 1:
            fail(where, f"multiple_of takes a symbol or an integer >= 1, not {bound!r}")
        scope = {}
        for key in ("modes", "methods"):
            if key in t and (not isinstance(t[key], list) or not t[key]
                             or not all(isinstance(x, str) for x in t[key])):
                fail(where, f"{key} takes a non-empty list of names")
            scope[key] = tuple(t[key]) if key in t else None
        for mode in scope["modes"] or ():
            if mode not in MODES:
                fail(where, f"modes: {mode!r} is not a mode ({', '.join(MODES)})")
        policy.limits.append(Limit(t["symbol"], kind, bound, t["doc"], scope["modes"], scope["methods"]))

    for name, t in raw.get("tensors", {}).items():
        policy.tensors[name] = _rule(name, t, f"[tensors.{name}]", policy, fail)

    for c_name, t in raw.get("records", {}).items():
        where = f"[records.{c_name}]"
        _keys(t, RECORD_KEYS, where, fail, required=("class", "doc", "fields"))
        record = records.get(c_name)
        if record is None:
            fail(where, "not a record of the headers")
        tensor_fields = [f.name for f in record.fields if f.type.kind == "pointer"
                         and f.type.pointee.kind == "record" and f.type.pointee.name == TENSOR_RECORD]
        for fname in t["fields"]:
            if fname not in tensor_fields:
                fail(where, f"{c_name} has no tensor field {fname!r} (it has {', '.join(tensor_fields)})")
        missing = [f for f in tensor_fields if f not in t["fields"]]
        if missing:
            fail(where, f"no tensor rule for {c_name}'s field(s) {', '.join(missing)}")
        rules = tuple((f, _rule(f, t["fields"][f], f"{where}.fields.{f}", policy, fail)) for f in tensor_fields)
        values = []
        by_name = {f.name: f for f in record.fields}
        for fname, enum in t.get("values", {}).items():
            f = by_name.get(fname)
            if f is None or f.type.kind != "enum" or f.type.name != enum or enum not in enums:
                fail(where, f"values.{fname}: not an {enum} field of {c_name}")
            values.append((fname, enum))
        policy.records[c_name] = TensorRecord(c_name, t["class"], t["doc"], rules, tuple(values))

    initializers = {init.record: init.name for init, _ in api.initializers}
    for c_name, t in raw.get("configs", {}).items():
        where = f"[configs.{c_name}]"
        _keys(t, CONFIG_KEYS, where, fail, required=("class", "doc"))
        record = records.get(c_name)
        if record is None:
            fail(where, "not a record of the headers")
        names = {f.name for f in record.fields}
        for key in ("hidden", "positive"):
            for fname in t.get(key, []):
                if fname not in names:
                    fail(where, f"{key}: {c_name} has no field {fname!r}")
        nested, config_enums = t.get("nested", {}), t.get("enums", {})
        for fname, role in nested.items():
            f = next((f for f in record.fields if f.name == fname), None)
            if role not in NESTED_ROLES or f is None or f.type.kind != "record" or f.type.name != NESTED_ROLES[role]:
                fail(where, f"nested.{fname}: not a {NESTED_ROLES.get(role, role)} field (roles: {sorted(NESTED_ROLES)})")
        for fname, enum in config_enums.items():
            if fname not in names or enum not in enums:
                fail(where, f"enums.{fname}: {c_name} has no such field, or {enum} is not an enum of the headers")
        python_names, booleans = t.get("python", {}), t.get("booleans", [])
        if not isinstance(python_names, dict) or not isinstance(booleans, list):
            fail(where, "python is a table { <field> = \"<Python name>\" }, booleans a list of fields")
        for fname, pname in python_names.items():
            if fname not in names or not isinstance(pname, str) or not _PYTHON_NAME.match(pname) or pname in names:
                fail(where, f"python.{fname}: {c_name} has no such field, or {pname!r} is not a Python name "
                            f"apart from the record's fields")
        fields = []
        for f in record.fields:
            if ALWAYS_HIDDEN.match(f.name) or f.name in t.get("hidden", []):
                continue
            positive = f.name in t.get("positive", [])
            if f.name in booleans and (f.type.kind != "int" or f.name in nested or f.name in config_enums):
                fail(where, f"booleans: {f.name} is not an integer field")
            if f.name in nested:
                fields.append(ConfigField(f.name, nested[f.name], f.type.name, doc=f.doc or ""))
            elif f.type.kind == "enum" or f.name in config_enums:
                enum = f.type.name if f.type.kind == "enum" else config_enums[f.name]
                fields.append(ConfigField(f.name, "enum", f.type.name, enum=enum, size=f.type.size,
                                          doc=f.doc or ""))
            elif f.type.kind == "int":
                fields.append(ConfigField(f.name, "int", f.type.name, bool(f.type.signed), f.type.size,
                                          positive=positive, doc=f.doc or "", boolean=f.name in booleans))
            else:
                fail(where, f"field {f.name} ({f.type.name or f.type.kind}) has no config role: hide it")
        fields = [replace(f, python_name=python_names.get(f.name, "")) for f in fields]
        for fname in python_names:
            if fname not in {f.name for f in fields}:
                fail(where, f"python.{fname}: the field is hidden")
        for fname in booleans:
            if fname not in {f.name for f in fields}:
                fail(where, f"booleans: {c_name} has no such field (or it is hidden)")
        policy.configs[c_name] = ConfigRecord(c_name, t["class"], t["doc"], tuple(fields), initializers.get(c_name))

    for c_enum, t in raw.get("enum_aliases", {}).items():
        where = f"[enum_aliases.{c_enum}]"
        enum = enums.get(c_enum)
        if enum is None:
            fail(where, "not an enum of the headers")
        if not isinstance(t, dict) or not t:
            fail(where, "a table { <alias> = \"<C enumerator>\" }")
        enumerators = {v.name for v in enum.values if not getattr(v, "sentinel", False)}
        pairs = []
        for alias, enumerator in t.items():
            if not _PYTHON_NAME.match(alias) or alias.startswith("_"):
                fail(where, f"{alias!r} is not a public Python name")
            if enumerator not in enumerators:
                fail(where, f"{alias}: {enumerator!r} is not an enumerator of {c_enum} "
                            f"({', '.join(sorted(enumerators))})")
            pairs.append((alias, enumerator))
        policy.enum_aliases[c_enum] = tuple(pairs)

    for name, t in raw.get("preconditions", {}).items():
        policy.preconditions[name] = _precondition(name, t, policy, f"[preconditions.{name}]", fail)

    for name, t in raw.get("methods", {}).items():
        policy.methods.append(_method(name, t, functions, enums, policy, f"[methods.{name}]", fail))
    seen = {}
    for m in policy.methods:
        if m.function in seen:
            fail(f"[methods.{m.name}]", f"{m.function} is already bound by {seen[m.function]}")
        seen[m.function] = m.name
    names = {m.name for m in policy.methods}
    group_methods = {m.name for m in policy.methods if m.kind != "create" and policy.owners[m.owner].handle}
    for p in policy.preconditions.values():
        for method in p.set_by:
            if method not in group_methods:
                fail(f"[preconditions.{p.name}]", f"set_by: {method!r} is not a [methods] entry of a Group or Handle "
                                                  f"(not a create)")
    for i, limit in enumerate(policy.limits):
        for method in limit.methods or ():
            if method not in names:
                fail(f"[[limits]] #{i + 1}", f"methods: {method!r} is not a [methods] entry")
    for i, t in enumerate(raw.get("row_bytes", [])):
        policy.row_bytes.append(_row_bytes(t, policy, enums, f"[[row_bytes]] #{i + 1}", fail))
    return policy


def _row_bytes(t, policy, enums, where, fail) -> RowBytes:
    _keys(t, ROW_BYTES_KEYS, where, fail, required=tuple(sorted(ROW_BYTES_KEYS)))
    method = next((m for m in policy.methods if m.name == t["method"]), None)
    if method is None:
        fail(where, f"method: {t['method']!r} is not a [methods] entry")
    config_name, _, field_name = str(t["recipe"]).partition(".")
    config = next((p for p in method.params if p.role == "config" and p.name == config_name), None)
    field = None if config is None else next(
        (f for f in policy.configs[config.record].fields if f.name == field_name), None)
    if field is None or field.kind != "enum":
        fail(where, f"recipe: {t['recipe']!r} is not <config argument of {method.name}>.<its enum field>")
    budget = policy.symbols.get(t["at_most"])
    if budget is None or budget.source != "group_config":
        fail(where, f"at_most: {t['at_most']!r} is not a symbol of source \"group_config\"")
    if not isinstance(t["doc"], str) or not t["doc"]:
        fail(where, "doc: a non-empty sentence")
    values = {v.name: v.value for v in enums[field.enum].values if not getattr(v, "sentinel", False)}
    tensor_sets = {p.name: policy.records[p.record] for p in method.params if p.role == "tensors"}
    if not isinstance(t["recipes"], dict) or not t["recipes"]:
        fail(where, f"recipes: a table {{ <{field.enum} enumerator> = [term, ...] }}")
    recipes = []
    for enumerator, terms in t["recipes"].items():
        at = f"recipes.{enumerator}"
        if enumerator not in values:
            fail(where, f"{at}: not an enumerator of {field.enum} ({', '.join(values)})")
        if not isinstance(terms, list) or not terms:
            fail(where, f"{at}: a non-empty list of terms {{ tensor = \"<argument>.<field>\", per = N, dtype = T }}")
        parsed = []
        for term in terms:
            _keys(term, ROW_TERM_KEYS, f"{where} {at}", fail, required=("tensor",))
            argument, _, tensor_field = str(term["tensor"]).partition(".")
            record = tensor_sets.get(argument)
            if record is None or tensor_field not in {f for f, _ in record.fields}:
                fail(where, f"{at}: tensor {term['tensor']!r} is not <tensors argument of {method.name}>."
                            f"<tensor field>")
            per = term.get("per", 1)
            if type(per) is not int or per < 1:
                fail(where, f"{at}: per takes an integer >= 1, not {per!r}")
            dtype = term.get("dtype")
            if dtype is not None:
                _dtype_list([dtype], f"{where} {at}", fail)
            parsed.append(RowTerm(argument, tensor_field, per, dtype))
        recipes.append((enumerator, values[enumerator], tuple(parsed)))
    return RowBytes(method.name, config_name, field_name, field.enum, t["at_most"], t["doc"], tuple(recipes))


def _keys(t, known, where, fail, required=()):
    check_keys(t, known, lambda message: fail(where, message), required)


def _dtype_list(names, where, fail) -> tuple[str, ...]:
    if not isinstance(names, list) or not names:
        fail(where, "a dtype group is a non-empty list of element type names")
    for n in names:
        if n not in DTYPE_NAMES:
            fail(where, f"{n!r} is not an element type name (names: {sorted(DTYPE_NAMES)})")
    return tuple(names)


def _rule(name, t, where, policy, fail) -> TensorRule:
    _keys(t, RULE_KEYS, where, fail, required=("dtypes", "doc"))
    modes = t.get("modes")
    if modes is not None:
        for mode in modes:
            if mode not in MODES:
                fail(where, f"modes: {mode!r} is not a mode ({', '.join(MODES)})")
        modes = tuple(modes)
    dtypes = t["dtypes"]
    table = dtypes if isinstance(dtypes, dict) else {"any": dtypes}
    if not table:
        fail(where, "dtypes: a table by mode needs at least one entry")
    dtypes = {}
    for key, value in table.items():
        at = "dtypes" if key == "any" and not isinstance(t["dtypes"], dict) else f"dtypes.{key}"
        if key not in SHAPE_KEYS:
            fail(where, f"{at}: not a mode (modes: {', '.join(MODES)}; or ll, ht, any)")
        if isinstance(value, str):
            if value not in policy.dtypes:
                fail(where, f"{at} {value!r} is not a [dtypes] group (groups: {sorted(policy.dtypes)})")
            dtypes[key] = policy.dtypes[value]
        else:
            dtypes[key] = _dtype_list(value, where, lambda w, message: fail(w, f"{at}: {message}"))
    # every mode the tensor may be given in needs its element types (a table by mode: or `any`)
    for mode in modes or MODES:
        if _by_mode(dtypes, mode) is None:
            fail(where, f"dtypes: no element types for mode {mode} (give dtypes.{mode}, "
                        f"dtypes.{mode.split('_', 1)[0]} or dtypes.any)")
    shape = t.get("shape", {})
    shapes = {"any": shape} if isinstance(shape, list) else shape
    for key, dims in shapes.items():
        if key not in SHAPE_KEYS:
            fail(where, f"shape.{key}: not a mode (modes: {', '.join(MODES)}; or ll, ht, any)")
        if not isinstance(dims, list) or not dims:
            fail(where, f"shape.{key}: a shape is a non-empty list of dimensions")
        for d in dims:
            try:
                parsed = parse_dim(d)
            except ValueError as e:
                fail(where, f"shape.{key}: {e}")
            for s in dim_symbols(parsed):
                if s not in policy.symbols:
                    fail(where, f"shape.{key}: {s!r} is not a symbol (symbols: {', '.join(sorted(policy.symbols))})")
    return TensorRule(name, dtypes, {k: tuple(v) for k, v in shapes.items()},
                      bool(t.get("required", False)), modes, t["doc"])


def _precondition(name, t, policy, where, fail) -> Precondition:
    _keys(t, PRECONDITION_KEYS, where, fail, required=("doc",))
    if not {"algorithms", "config", "set_by"} & set(t):
        fail(where, "needs at least one of algorithms, config, set_by")
    for key in ("algorithms", "set_by"):
        if key in t and (not isinstance(t[key], list) or not t[key] or not all(isinstance(x, str) for x in t[key])):
            fail(where, f"{key} takes a non-empty list of names")
    for algorithm in t.get("algorithms", ()):
        if algorithm not in ALGORITHMS:
            fail(where, f"algorithms: {algorithm!r} is not an algorithm ({', '.join(ALGORITHMS)})")
    config = t.get("config")
    if config is not None:
        group = policy.configs.get(GROUP_CONFIG)
        fields = {f.name: f for f in group.fields} if group else {}
        if not isinstance(config, str) or config not in fields or fields[config].kind != "int":
            fail(where, f"config: {config!r} is not an integer field of {GROUP_CONFIG} (GroupConfig)")
    if not isinstance(t["doc"], str) or not t["doc"]:
        fail(where, "doc: a non-empty sentence")
    algorithms = tuple(t["algorithms"]) if "algorithms" in t else None
    return Precondition(name, algorithms, config, tuple(t.get("set_by", ())), t["doc"])


def _method(name, t, functions, enums, policy, where, fail) -> Method:
    _keys(t, METHOD_KEYS, where, fail, required=("function", "owner", "doc", "params"))
    owner = policy.owners.get(t["owner"])
    if owner is None:
        fail(where, f"owner {t['owner']!r} is not an [owners] entry ({', '.join(policy.owners)})")
    kind = t.get("kind", "method")
    if kind not in METHOD_KINDS:
        fail(where, f"kind must be one of {list(METHOD_KINDS)}, not {kind!r}")
    fn = functions.get(t["function"])
    if fn is None:
        fail(where, f"function {t['function']} is not in the headers")
    if fn.result.name != "ncclResult_t":
        fail(where, f"{fn.name} returns {fn.result.name or fn.result.kind}, not ncclResult_t")
    header = [p.name for p in fn.params]
    given = t["params"]
    for p in given:
        if p not in header:
            fail(where, f"{fn.name} has no parameter {p!r} (it has {', '.join(header)})")
    missing = [p for p in header if p not in given]
    if missing:
        fail(where, f"no role for {fn.name}'s parameter(s) {', '.join(missing)}")
    params = tuple(_param(p, given[p.name], i, owner, enums, policy, f"{where}.params.{p.name}", fail)
                   for i, p in enumerate(fn.params))
    roles = [p.role for p in params]
    if kind == "create":
        out = next((p for p in params if p.role == "out"), None)
        if out is None or out.makes != owner.name or "self" in roles:
            fail(where, f"a create method returns a new {owner.name} (out, makes = \"{owner.name}\") and takes no self")
    elif roles.count("self") != (0 if owner.handle is None else 1):
        fail(where, "a module's functions take no 'self'" if owner.handle is None else "needs exactly one 'self'")
    if roles.count("out") > 1:
        fail(where, "at most one 'out' parameter (the method returns it)")
    if "comm" in roles and kind != "create":
        fail(where, "'comm' is for a create method")
    names = [p.name for p in params if p.name]
    if len(set(names)) != len(names):
        fail(where, f"argument names repeat: {names}")
    binds = []
    for symbol, target in t.get("binds", {}).items():
        s = policy.symbols.get(symbol)
        if s is None or s.source != "handle":
            fail(where, f"binds.{symbol}: not a symbol of source \"handle\"")
        argument, _, index = str(target).partition(".")
        p = next((p for p in params if p.name == argument and p.role == "tensor"), None)
        shape = policy.tensors[p.rule].shape_for("any") if p else None
        if p is None or not index.isdigit() or shape is None or int(index) >= len(shape):
            fail(where, f"binds.{symbol}: {target!r} is not <tensor argument>.<dimension index>")
        binds.append((symbol, argument, int(index)))
    requires = t.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        fail(where, "requires takes a list of [preconditions] names")
    for r in requires:
        if r not in policy.preconditions:
            fail(where, f"requires: {r!r} is not a [preconditions] entry ({', '.join(policy.preconditions) or 'none'})")
    if len(set(requires)) != len(requires):
        fail(where, f"requires names a precondition twice: {requires}")
    if requires and (kind == "create" or owner.handle is None):
        fail(where, "requires: only a method of a Group or a Handle has a group to check")
    return Method(name, fn.name, owner.name, t["doc"], kind, params, tuple(binds), where, tuple(requires))


def _param(p, value, position, owner, enums, policy, where, fail) -> Param:
    t = p.type
    if isinstance(value, str):
        if value not in SCALAR_ROLES:
            fail(where, f"unknown role {value!r} (roles: {sorted(SCALAR_ROLES | set(TABLE_ROLES))})")
        if value == "self" and (owner.handle is None or t.name != owner.handle):
            fail(where, f"'self' is {owner.handle} for a {owner.name}, not {t.name or t.kind}")
        if value == "comm" and t.name != COMM_HANDLE:
            fail(where, f"'comm' is an {COMM_HANDLE}, not {t.name or t.kind}")
        if value == "stream" and t.name != STREAM_TYPE:
            fail(where, f"'stream' is a {STREAM_TYPE}, not {t.name or t.kind}")
        return Param(p.name, value, position)
    if not isinstance(value, dict) or value.get("role") not in TABLE_ROLES:
        fail(where, f"unknown role {value!r} (roles: {sorted(SCALAR_ROLES | set(TABLE_ROLES))})")
    role = value["role"]
    _keys(value, TABLE_ROLES[role], where, fail,
          required=tuple(k for k in ("name", "rule", "length") if k in TABLE_ROLES[role]))
    name = value.get("name", "")
    pointee = t.pointee if t.kind == "pointer" else None
    if role == "out":
        if pointee is None or t.const:
            fail(where, f"'out' needs an out-pointer, not {t.name or t.kind}")
        makes = value.get("makes")
        if makes is not None:
            made = policy.owners.get(makes)
            if made is None or made.handle is None or pointee.name != made.handle:
                fail(where, f"makes = {makes!r}: the out-pointer is to {pointee.name}, not that owner's handle")
            return Param(p.name, "out", position, makes=makes, c_type=pointee.name)
        if pointee.kind != "int":
            fail(where, f"'out' without makes returns an integer, not {pointee.name or pointee.kind}")
        return Param(p.name, "out", position, c_type=pointee.name, signed=bool(pointee.signed), size=pointee.size)
    if role == "enum":
        if t.kind != "enum" or t.name not in enums:
            fail(where, f"'enum' needs an enum of the headers, not {t.name or t.kind}")
        return Param(p.name, "enum", position, name, c_type=t.name)
    if role == "int":
        if t.kind != "int":
            fail(where, f"'int' needs an integer, not {t.name or t.kind}")
        default = value.get("default")
        if default is not None and type(default) is not int:
            fail(where, f"default {default!r} is not an int")
        return Param(p.name, "int", position, name, default=default, c_type=t.name, signed=bool(t.signed),
                     size=t.size)
    if role in ("tensor", "device_array"):
        rule = value["rule"]
        if rule not in policy.tensors:
            fail(where, f"rule {rule!r} is not a [tensors] rule ({', '.join(policy.tensors)})")
        if role == "tensor" and (pointee is None or pointee.kind != "record" or pointee.name != TENSOR_RECORD):
            fail(where, f"'tensor' needs an {TENSOR_RECORD} *, not {t.name or t.kind}")
        if role == "device_array" and (pointee is None or pointee.kind != "int" or t.const):
            fail(where, f"'device_array' needs a writable pointer to integers, not {t.name or t.kind}")
        return Param(p.name, role, position, name, optional=bool(value.get("optional", False)), rule=rule,
                     c_type=pointee.name)
    if role in ("tensors", "config"):
        table = policy.records if role == "tensors" else policy.configs
        section = "[records]" if role == "tensors" else "[configs]"
        if pointee is None or pointee.kind != "record" or pointee.name not in table:
            fail(where, f"'{role}' needs a pointer to a {section} record, not {pointee.name if pointee else t.kind}")
        default = value.get("default")
        if default is not None and (type(default) is not int or default != 0 or not value.get("optional")):
            fail(where, f"default {default!r}: an optional config's default may only be 0 (NULL, as None)")
        return Param(p.name, role, position, name, optional=bool(value.get("optional", False)), default=default,
                     record=pointee.name, c_type=pointee.name)
    # host_array
    length = value["length"]
    if length not in policy.symbols:
        fail(where, f"length {length!r} is not a symbol")
    if pointee is None or pointee.kind != "int" or not t.const:
        fail(where, f"'host_array' needs a const pointer to integers, not {t.name or t.kind}")
    return Param(p.name, "host_array", position, name, length=length, c_type=pointee.name,
                 signed=bool(pointee.signed), size=pointee.size)


EP_LIBRARIES = ("nccl_ep",)


def ep_policies(apis):
    """(api, its EpPolicy) for each NCCL EP library of `apis` that has a policy file: what the
    Python and Rust renderers of NCCL EP each render."""
    from .nccl import load_policy  # it dispatches NCCL EP's file here (load_ep_policy)
    for api in apis:
        if api.library in EP_LIBRARIES:
            ep = load_policy(api)
            if isinstance(ep, EpPolicy):
                yield api, ep
