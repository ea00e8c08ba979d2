"""Python rendering of the semantic policy (policy): the methods of each owner class, each
as its own code (templates/python/methods.py.j2 with _method_body.j2 and _call_body.j2), their
rows (what prepare() reads), and the same rows as the C fast path's table
(templates/python/method_table.c.j2), with one trampoline per NCCL function that puts a
call's values in the function's order."""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

from . import RenderContext, environment, render_files
from .c import PREFIX, CTypes
from .python import enum_class_name, enum_member_names, py_docstring
from ..ir.types import int_range
from ..policy.nccl import CallPolicy, MethodPolicy, load_policy
from ..policy.coverage import coverage_json
from ..policy.python_api import load_python_api
from ..policy.variable_count import load_variable_count
from ..policy.vocabulary import load_vocabulary
from ..policy.ep import EP_LIBRARIES, MODES as EP_MODES, EpPolicy, Method as EpMethod, dim_text, ep_policies, snake

# The owner classes and the module each one's generated base class lives in.
OWNERS = {"Communicator": "communicator_methods", "Window": "window_methods", "Param": "param_methods"}
# The module owners (process-wide functions) and the generated module of each one's functions.
MODULE_OWNERS = {"params": "params_functions", "dev_comm": "dev_comm_functions"}
# The ncclbind module (under ncclbind.) of each owner class a call returns (its annotation; the call makes one
# through the generated base class: <Owner>Methods.owner_class).
CLASS_MODULES = {"Communicator": "core.communicator", "Param": "params"}
# The Python class of an owner where its name differs.
PYTHON_CLASSES = {"Window": "RegisteredWindowHandle"}
SPEC_LIBRARIES = ("nccl",)


@dataclass
class PythonMethod:
    policy: MethodPolicy
    low_level: str
    config_low_level: str | None
    blocking: bool
    trampoline: str            # C function name
    config_trampoline: str | None
    c_args: list[str]          # the trampoline's arguments, in the C function's order
    c_function: str            # the prefixed C wrapper
    config_function: str | None = None   # the config variant's NCCL name
    config_c_type: str | None = None     # the C type of its trailing config parameter
    config_class: str | None = None      # the record class the fast path takes as that config

    @property
    def signature(self) -> str:
        """The def line's parameters, annotated with core/argument_types' names by role."""
        positional, keywords = self.policy.python_signature

        def part(name, default):
            annotation = self.annotation(name) + (" | None" if default == "None" and name != "stream" else "")
            return f"{name}: {annotation}" + ("" if default is None else f" = {default}")
        return ", ".join(["self", *(part(n, d) for n, d in positional), "*", *(part(n, d) for n, d in keywords)])

    def annotation(self, argument: str) -> str:
        if argument == "op":
            return "RedOpLike"
        if argument == "stream":
            return "StreamLike"
        if argument == "config":
            return "CollConfigLike"
        rank = self.policy.rank_arg
        if rank is not None and argument == rank.python_name:
            return "int"
        return "BufferLike"

    @property
    def arguments(self) -> list[str]:
        return self.policy.python_arguments

    def default_code(self, argument: str) -> str:
        positional, keywords = self.policy.python_signature
        default = dict(positional + keywords)[argument]
        return {None: "NBPY_REQUIRED", "None": "NBPY_DEFAULT_NONE", "SUM": "NBPY_DEFAULT_SUM"}[default]

    def index(self, argument: str) -> int:
        return self.arguments.index(argument) if argument in self.arguments else -1

    @property
    def order(self) -> list[str]:
        """The C call's parameters as calls.py names them: roles, or buffer arguments."""
        return [p.python_name if p.is_buffer else p.role for p in self.policy.params]


@dataclass
class PythonCall:
    """A `kind = "call"` entry as its Python method: positional arguments in the policy's
    python.order (default: the C call's; config by keyword), its own checks and call
    (templates/python/_call_body.j2)."""
    policy: CallPolicy
    low_level: str
    result_class: str | None = None  # nccl4py's class of a returned struct (NCCLTeam), made from_struct

    @property
    def signature(self) -> str:
        """The def line's parameters, annotated by kind."""
        parts = [] if self.policy.module else ["self"]
        for p in self.policy.python_inputs:
            default = "None" if p.optional and p.default is None else (None if p.default is None else repr(p.default))
            if p.kind == "comm_config":
                parts.append("*")
            annotation = self.parameter_annotation(p) + (" | None" if default == "None" else "")
            parts.append(f"{p.name}: {annotation}" + ("" if default is None else f" = {default}"))
        return ", ".join(parts)

    @staticmethod
    def parameter_annotation(p) -> str:
        return {"int": "int", "capacity": "int", "enum": "int", "string": "str",
                "unique_id": "UniqueId | bytes", "comm_config": "_nccl.ncclConfig_t | dict",
                "record": f"_nccl.{p.c_type}"}[p.kind]

    @property
    def checked_inputs(self) -> list:
        """The inputs in the order the method checks them: a rank of a record argument after
        that record's own check."""
        return sorted(self.policy.inputs, key=lambda p: p.rank_of is not None)

    def argument_of(self, param: str) -> str:
        """The Python argument of the C parameter `param`."""
        return next(p.name for p in self.policy.inputs if p.param == param)

    @property
    def order(self) -> list[str]:
        """The low-level call's arguments: "self", an argument's name, or "@buffer" (the
        buffer the method makes for an out_buffer); NCCL's out-pointers are the low-level
        function's results."""
        names = {"self": "self", "out_buffer": "@buffer"}
        return [names.get(p.role, p.name) for p in self.policy.params if p.role not in ("out", "out_length")]

    @property
    def returns(self) -> str | None:
        return self.policy.output.kind if self.policy.output else None

    @property
    def makes(self) -> str | None:
        """The owner class a returned handle becomes, when it is not the method's own."""
        out = self.policy.output
        return out.makes if out and out.kind == "owner" and out.makes != self.policy.owner else None

    @property
    def capacity(self) -> str | None:
        out = self.policy.output
        return self.policy.params[[p.param for p in self.policy.params].index(out.of)].name \
            if out and out.role == "out_buffer" else None

    @property
    def annotation(self) -> str:
        kind = self.returns
        out = self.policy.output
        owner = PYTHON_CLASSES.get(self.policy.owner, self.policy.owner)
        return {None: "None", "int": "int", "pointer": "int | None" if self.policy.none_if_null else "int",
                "unique_id": "UniqueId", "string": "str", "string_table": "list[str]", "bytes": "bytes",
                "owner": out.makes if self.makes else owner,
                "record": self.result_class or f"_nccl.{out.c_type if kind else ''}",
                "result_record": out.c_type if kind else ""}[kind]

    @property
    def docstring(self) -> str:
        notes = []
        names = {p.param: p.name for p in self.policy.inputs}
        for p in self.policy.python_inputs:
            if p.kind == "int" and p.rank_of:
                notes.append(f"{p.name}: a rank of {names[p.rank_of]}, 0..{names[p.rank_of]}.nRanks - 1.")
            elif p.kind == "int":
                low, high = p.bounds
                notes.append(f"{p.name}: an int in the range of {p.c_type} ({low}..{high}).")
            elif p.kind == "enum":
                notes.append(f"{p.name}: an {enum_class_name(p.c_type)} ({p.c_type}: "
                             f"{', '.join(n for n, _ in p.enum_values)}).")
            elif p.kind == "unique_id":
                notes.append(f"{p.name}: a UniqueId or its bytes{', or None' if p.optional else ''}.")
            elif p.kind == "string":
                notes.append(f"{p.name}: a str (without NUL).")
            elif p.kind == "record":
                notes.append(f"{p.name}: an ncclbind._nccl.{p.c_type}.")
            elif p.kind == "capacity":
                notes.append(f"{p.name}: an int, 0 or more (up to {p.bounds[1]}).")
            else:
                notes.append(f"{p.name}: an ncclConfig_t, a dict of its fields{', or None' if p.optional else ''}.")
        out = self.policy.output
        returned = {None: "", "int": f" Returns the {out.c_type if out else ''} as an int.",
                    "pointer": " Returns the address as an int" + (", or None when NCCL gives none (NULL)."
                                                                    if self.policy.none_if_null else "."),
                    "record": f" Returns {'an ' + self.result_class + ' (from its ' if self.result_class else 'an '}"
                              f"{out.c_type if out else ''}{')' if self.result_class else ''}.",
                    "result_record": f" Returns a {out.c_type if out else ''} of "
                                     f"{', '.join(p.name for p in self.policy.outs)}.",
                    "unique_id": " Returns a UniqueId.", "owner": f" Returns a new {self.annotation}.",
                    "string": " Returns the string (a copy; \"\" when NCCL gives none).",
                    "string_table": " Returns the strings (copies).",
                    "bytes": " Returns the bytes NCCL wrote."}[self.returns]
        missing = (" It returns no ncclResult_t: a library or function that is missing raises "
                   "NcclLibraryNotFoundError / NcclSymbolNotFoundError.") if self.policy.returns_value else ""
        return "\n\n".join(filter(None, [self.policy.doc, " ".join(notes),
                                          f"Calls {self.policy.function}.{returned}{missing}"]))


def _c_args(policy: MethodPolicy, fn, ct: CTypes) -> list[str]:
    buffer_index = {p.param: i for i, p in enumerate(policy.buffers)}
    out = []
    for p in fn.params[: len(policy.params)]:
        role = policy.param(p.name)
        c_type = ct.type(p.type)
        value = {"count": "values->count", "dtype": "values->datatype", "op": "values->op",
                 "root": "values->rank", "peer": "values->rank", "comm": "values->comm",
                 "stream": "values->stream"}.get(role.role)
        if role.is_buffer:
            value = f"(uintptr_t)values->buffer[{buffer_index[p.name]}]"
        out.append(f"({c_type}){value}")
    return out


def plan(ctx: RenderContext) -> dict[str, list[PythonMethod]]:
    """{owner: [PythonMethod]} over the libraries that have a policy."""
    ct = CTypes(ctx.conventions, {n: vs for a in ctx.apis for n, vs in a.record_variants.items()})
    owners: dict[str, list[PythonMethod]] = {}
    for api in ctx.apis:
        if api.library not in SPEC_LIBRARIES:
            continue
        functions = {fn.name: fn for fn in api.functions}
        for policy in load_policy(api).methods:
            fn = functions[policy.function]
            variant = functions.get(policy.config_variant) if policy.config_variant else None
            method = PythonMethod(policy, fn.snake_name, variant.snake_name if variant else None, fn.blocking,
                                  f"call_{fn.name}", None, _c_args(policy, fn, ct), PREFIX + fn.name)
            if variant:
                config = variant.params[-1].type
                method.config_trampoline = f"call_{variant.name}"
                method.config_function = variant.name
                method.config_c_type = ct.type(config)
                method.config_class = f"nbpy_class_{config.pointee.name}"
            owners.setdefault(policy.owner, []).append(method)
    return owners


def plan_calls(ctx: RenderContext) -> dict[str, list[PythonCall]]:
    """{owner: [PythonCall]} over the libraries that have a policy."""
    owners: dict[str, list[PythonCall]] = {}
    for api in ctx.apis:
        if api.library not in SPEC_LIBRARIES:
            continue
        functions = {fn.name: fn for fn in api.functions}
        # nccl4py's value classes (python_api.toml [records]): what a call returning their struct returns
        values = {r.c_record: r.class_name for r in load_python_api(api, enum_member_names, enum_class_name).records
                  if r.kind == "value"}
        for policy in load_policy(api).calls:
            out = policy.output
            result_class = values.get(out.c_type) if out is not None and out.kind == "record" else None
            owners.setdefault(policy.owner, []).append(
                PythonCall(policy, functions[policy.function].snake_name, result_class))
    return owners


@dataclass
class PythonRecord:
    """A record class of the policy: a kind = "record" entry over a C struct (fields renamed,
    checked, made into the C record), or the record record-returning calls make of their outs."""
    name: str
    doc: str
    fields: list[dict]         # name, c_field, c_type, low, high, default (a source or None), doc
    c_record: str | None = None


def plan_records(ctx: RenderContext) -> list[PythonRecord]:
    out = []
    for api in ctx.apis:
        if api.library not in SPEC_LIBRARIES:
            continue
        policy = load_policy(api)
        for r in policy.result_records():
            functions = ", ".join(c.function for c in policy.calls if c.record == r.name)
            fields = [{"name": p.name, "c_field": p.param, "c_type": p.c_type, "low": p.bounds[0],
                       "high": p.bounds[1], "default": None, "doc": f"NCCL's {p.param} ({p.c_type})."}
                      for p in r.fields]
            out.append(PythonRecord(r.name, f"What {functions} return.", fields))
        for r in policy.records:
            fields = [{"name": f.name, "c_field": f.c_field, "c_type": f.c_type, "low": f.bounds[0],
                       "high": f.bounds[1], "default": None if f.default is None else repr(f.default),
                       "doc": f"{f.doc} ({r.c_record}.{f.c_field}, {f.c_type}).".strip()}
                      for f in r.fields]
            out.append(PythonRecord(r.name, r.doc, fields, r.c_record))
    return out


def outputs(ctx: RenderContext):
    owners = plan(ctx)
    calls = plan_calls(ctx)
    sources = ctx.source_line(ctx.api("nccl").header_sets)
    out = []
    records = plan_records(ctx)
    if records:
        out.append(("bindings/python/ncclbind/_generated/policy_records.py", "python/policy_records.py.j2",
                    {"records": records, "sources": sources}))
    for owner in OWNERS:
        if owner in owners or owner in calls:
            out.append((f"bindings/python/ncclbind/_generated/{OWNERS[owner]}.py", "python/methods.py.j2",
                        {"owner": owner, "methods": owners.get(owner, []), "calls": calls.get(owner, []),
                         "sources": sources}))
    for owner, module in MODULE_OWNERS.items():
        if owner in calls:
            out.append((f"bindings/python/ncclbind/_generated/{module}.py", "python/functions.py.j2",
                        {"owner": owner, "calls": calls[owner], "sources": sources}))
    for api in ctx.apis:  # NCCL's data types (policy/vocabulary.toml), for base/dtypes.py and the bench
        data_types = load_vocabulary(api) if api.library == "nccl" else ()
        if data_types:
            out.append(("bindings/python/ncclbind/_generated/vocabulary.py", "python/vocabulary.py.j2",
                        {"data_types": data_types, "sources": ctx.source_line(api.header_sets)}))
    # the variable-count collectives (policy/variable_count.toml), a base class of Communicator
    if any(api.library == "nccl" and load_vocabulary(api) for api in ctx.apis):
        out.append(("bindings/python/ncclbind/_generated/variable_count_methods.py",
                    "python/variable_count_methods.py.j2",
                    {"collectives": load_variable_count(), "sources": sources}))
    every = [m for methods in owners.values() for m in methods]
    out.append(("bindings/python/src/generated/method_table.c", "python/method_table.c.j2",
                {"methods": every, "sources": sources}))
    interface = comm_interface()
    out.append(("bindings/python/src/generated/comm_interface.h", "python/comm_interface.h.j2",
                {"slots": interface["SLOTS"], "fast_path_method": interface["FAST_PATH_METHOD"],
                 "sources": sources}))
    return out


COMM_INTERFACE = Path(__file__).resolve().parents[2] / "bindings" / "python" / "ncclbind" / "base" / "comm_interface.py"


def comm_interface(path: Path = COMM_INTERFACE) -> dict:
    """The Communicator's internal interface, declared once in base/comm_interface.py: its
    top-level literal assignments (SLOTS, METHODS, FAST_PATH_METHOD), read with ast, never
    imported (the generator does not import the package)."""
    values = {}
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = ast.literal_eval(node.value)
    missing = {"SLOTS", "METHODS", "FAST_PATH_METHOD"} - set(values)
    if missing:
        raise SystemExit(f"{path}: no {', '.join(sorted(missing))} (the Communicator's internal interface)")
    if values["FAST_PATH_METHOD"] not in {name for name, _ in values["METHODS"]}:
        raise SystemExit(f"{path}: FAST_PATH_METHOD {values['FAST_PATH_METHOD']!r} is not one of METHODS")
    return values


def render(ctx: RenderContext) -> dict[str, str]:
    env = environment({"py_docstring": py_docstring, "py_literal": repr, "rstrip": str.rstrip})
    env.globals["python_doc"] = variable_count_doc
    env.globals["python_name"] = lambda p: p.python_name
    env.globals["python_modules"] = CLASS_MODULES
    env.globals["owner_modules"] = OWNERS
    env.globals["P"] = PREFIX
    files = render_files(env, outputs(ctx) + ep_outputs(ctx))
    # The coverage of both languages (generator/policy/coverage.py), as data the tests check
    # against the package; written here, with the Python layer it names.
    for api in ctx.apis:
        if api.library in SPEC_LIBRARIES + EP_LIBRARIES:
            files[f"bindings/ir/coverage/{api.library}.json"] = \
                json.dumps(coverage_json(api), indent=1) + "\n"
    return files


# ---- NCCL EP (policy/nccl_ep.toml) -> ncclbind.ep ------------------------------------
# Three generated modules under ncclbind/_generated/: ep_checks.py (each rule of the policy its own
# check: tensor rules, records, limits, preconditions, token rows; ep_check_plan), ep_classes.py
# (the config and tensor-set classes) and ep_methods.py (the methods of Group and Handle and the
# module functions, each its own code: signature, docstring, its checks in order, the call and what
# it makes; dispatch-like methods, whose arguments are all immutable records, first compare them
# with the last call's by identity, and get the C step path).
# Python annotations of the argument roles (the classes a role names come from the policy).
EP_ANNOTATIONS = {"enum": "{enum} | int | str", "int": "int", "tensor": "TensorLike", "device_array": "TensorLike",
                  "host_array": "Sequence[int]", "comm": "Communicator"}


@dataclass
class PythonEpMethod:
    """One [methods] entry of nccl_ep.toml as its Python method."""
    policy: EpMethod
    ep: EpPolicy
    low_level: str             # the ncclbind._nccl_ep function
    enums: dict                # enum C type -> its NcclEp* class name

    @property
    def module(self) -> bool:
        return self.ep.owners[self.policy.owner].handle is None

    @property
    def arguments(self) -> list:
        """The Python arguments, in the C call's order (comm first for a create method)."""
        return [p for p in self.policy.params if p.name or p.role == "comm"]

    def argument_name(self, p) -> str:
        return "comm" if p.role == "comm" else p.name

    def optional(self, p) -> bool:
        return p.optional or p.default is not None

    @property
    def hot(self) -> bool:
        """Every argument an immutable record (tensor set or config): the last call's checks hold
        while the same objects come again on the same routing."""
        return self.policy.owner == "Handle" and all(p.role in ("tensors", "config") for p in self.arguments)

    def annotation(self, p) -> str:
        if p.role in ("tensors", "config"):
            table = self.ep.records if p.role == "tensors" else self.ep.configs
            return table[p.record].class_name
        return EP_ANNOTATIONS[p.role].format(enum=self.enums.get(p.c_type, ""))

    @property
    def signature(self) -> str:
        first = [] if self.module else ["cls" if self.policy.kind == "create" else "self"]
        required = [p for p in self.arguments if not self.optional(p)]
        keyword = [p for p in self.arguments if self.optional(p)]
        parts = first + [f"{self.argument_name(p)}: {self.annotation(p)}" for p in required]
        stream = self.policy.role("stream") is not None
        if keyword or stream:
            parts.append("*")
        for p in keyword:
            default = "None" if p.default is None else repr(p.default)
            raw = " | int" if p.role == "config" and p.default is not None else ""  # 0: nccl.ep's NULL
            parts.append(f"{p.name}: {self.annotation(p)}{raw}{' | None' if p.optional else ''} = {default}")
        if stream:
            parts.append("stream: StreamLike = None")
        return ", ".join(parts)

    @property
    def returns(self) -> str:
        out = self.policy.output
        if out is None:
            return "None"
        return out.makes or "int"

    def class_of(self, p) -> str:
        """The generated class a tensors or config argument takes."""
        return (self.ep.records if p.role == "tensors" else self.ep.configs)[p.record].class_name

    def record_check(self, p) -> str:
        """The generated check (ep/_generated/checks.py) of a tensors argument's record."""
        return snake(self.class_of(p))

    @property
    def bind_limits(self) -> str | None:
        """The generated limits of the routing's symbols this method binds (None: none involved)."""
        return self.ep.check_plan().bind_limits.get(self.policy.name)

    def int_bounds(self, p) -> tuple[int, int]:
        return int_range(p.size, p.signed)

    @property
    def bound(self) -> dict:
        """argument -> ((symbol, dimension index), ...): the routing's symbols a tensor argument gives."""
        out: dict = {}
        for symbol, argument, index in self.policy.binds:
            out.setdefault(argument, []).append((symbol, index))
        return {argument: tuple(dims) for argument, dims in out.items()}

    @property
    def satisfies(self) -> tuple[str, ...]:
        return self.ep.satisfies(self.policy.name)

    @property
    def row_bytes_arguments(self) -> list[str]:
        """The arguments the method's [[row_bytes]] rules read (their config and tensor sets)."""
        names: list[str] = []
        for r in self.ep.row_bytes:
            if r.method == self.policy.name:
                names += [r.config] + [t.argument for _, _, terms in r.recipes for t in terms]
        return list(dict.fromkeys(names))

    @property
    def layout(self) -> str | None:
        """The enum argument that gives the call's mode (a layout), if the method takes one."""
        return next((p.name for p in self.arguments if p.role == "enum" and p.name == "layout"), None)

    @property
    def fast_path(self) -> bool:
        """A per-step method that the C step path (bindings/python/src/ep_steps.c) can bind: its
        required arguments, then keyword-only ones defaulting to None or 0, stream last."""
        return self.hot and self.policy.role("stream") is not None and all(
            p.default in (None, 0) for p in self.arguments if self.optional(p))

    @property
    def resolves(self) -> bool:
        """Whether the checks resolve anything against the group (a tensor, a record, a host array,
        a layout): else they are the owner's state and the preconditions alone."""
        return bool(self.layout or self.bound) or any(
            p.role in ("tensor", "device_array", "tensors", "config", "host_array", "int") for p in self.arguments)

    @property
    def required_count(self) -> int:
        return sum(not self.optional(p) for p in self.arguments)

    @property
    def argument_names(self) -> list[str]:
        return [self.argument_name(p) for p in self.arguments]

    @property
    def docstring(self) -> str:
        notes = []
        for p in self.arguments:
            name = self.argument_name(p)
            if p.role == "comm":
                notes.append(f"{name}: an ncclbind.Communicator (its rank count and device are the group's).")
            elif p.role == "enum":
                notes.append(f"{name}: an {self.enums[p.c_type]} ({p.c_type}), its value or its name.")
            elif p.role == "int":
                notes.append(f"{name}: an int in the range of {p.c_type}" +
                             (f", default {p.default}." if p.default is not None else "."))
            elif p.role in ("tensor", "device_array"):
                rule = self.ep.tensors[p.rule]
                dims = ", ".join(str(d) for d in rule.shape_for("any") or ())
                notes.append(f"{name}: {rule.doc}; a tensor of {rule.dtypes_text()}, shape [{dims}]"
                             f"{', or None' if p.optional else ''} (torch, CuPy, DLPack, an ep.Tensor or ep.DevTensor).")
            elif p.role == "host_array":
                notes.append(f"{name}: a sequence of {p.length} ints (host memory).")
            else:
                table = self.ep.records if p.role == "tensors" else self.ep.configs
                null = ", or 0 or None (the library's defaults)" if p.default is not None else \
                    ", or None" if p.optional else ""
                notes.append(f"{name}: an ep.{table[p.record].class_name}{null}.")
        for symbol, argument, index in self.policy.binds:
            notes.append(f"{argument}'s extent {index} is the routing's {symbol} ({self.ep.symbols[symbol].doc}).")
        if self.policy.role("stream") is not None:
            notes.append("stream: a CUDA stream (None: the legacy default stream).")
        out = self.policy.output
        returned = "" if out is None else (f" Returns a new ep.{out.makes}." if out.makes else
                                          f" Returns the {out.c_type} NCCL EP wrote, as an int.")
        checks = ("Arguments are checked (types, dtypes, ranks, shapes, devices, limits) before NCCL EP is called; "
                  "a refusal raises NcclInvalid naming the argument.")
        needs = " ".join(f"Needs {self.ep.preconditions[name].doc} (precondition {name}: else NcclInvalid "
                         f"naming the group)." for name in self.policy.requires)
        return "\n\n".join(filter(None, [self.policy.doc, needs, " ".join(notes),
                                          f"Calls {self.policy.function}.{returned} {checks}"]))


def variable_count_doc(v) -> str:
    """A variable-count collective's doc with Python's buffer names (sendbuf, recvbuf)."""
    return re.sub(r"\b(send|recv)\b(?!_)", r"\1buf", v.doc)


def _mode_test(case, last: bool) -> str | None:
    """The condition on `mode` under which a rule case holds (None: the last case, an else)."""
    if last:
        return None
    if not case.modes:
        return "mode is None"
    modes = f"mode == {case.modes[0]!r}" if len(case.modes) == 1 else f"mode in {tuple(case.modes)!r}"
    return f"mode is None or {modes}" if case.unknown_mode else modes


def ep_check_plan(ep: EpPolicy) -> dict:
    """What templates/python/ep_checks.py.j2 writes, over EpPolicy.check_plan (the checks' names and
    limit sets, which Rust's checks share): each tensor rule's check with its mode cases resolved by
    the generator (TensorRule.cases); each record's check; each limit set's check, with the
    symbols it reads; each precondition's requirement; each method's token-row rule."""
    checks = ep.check_plan()

    def rule_plan(function: str, label: str, rule) -> dict:
        cases = []
        all_cases = rule.cases()
        for i, case in enumerate(all_cases):
            dims = []
            for index, d in enumerate(case.shape or ()):
                dims.append({"index": index, "kind": d[0], "text": dim_text(d),
                             "value": d[1] if d[0] in ("int", "sym") else None,
                             "factors": [dim_text(d[1]), dim_text(d[2])] if d[0] == "mul" else None,
                             "limits": checks.limits_for((d[1],)) if d[0] == "sym" else None})
            cases.append({"test": _mode_test(case, i == len(all_cases) - 1), "explicit": _mode_test(case, False),
                          "dtypes": case.dtypes,
                          "dtypes_text": " or ".join(case.dtypes), "shape": case.shape is not None,
                          "rank": len(case.shape or ()), "wanted": case.shape_text, "dims": dims,
                          "in_mode": rule.by_mode and bool(case.modes),
                          "only_in_mode": rule.by_mode and not case.unknown_mode})
        # the element types the same in every case: checked once, before the cases
        same = len({(c["dtypes"], c["in_mode"], c["only_in_mode"]) for c in cases}) == 1
        return {"function": function, "label": label, "doc": rule.doc, "required": rule.required,
                "dtypes_first": cases[0] if same else None,
                "refused": rule.refused_modes, "modes_text": ", ".join(rule.modes or ()), "cases": cases}

    rules = [rule_plan(r.function, r.label, r.rule) for r in checks.rules]
    records = []
    for record in ep.records.values():
        fields = [{"name": r.field, "function": r.function, "required": r.rule.required, "doc": r.rule.doc}
                  for r in checks.rules if r.record == record.c_name]
        records.append({"class": record.class_name, "function": snake(record.class_name), "c_name": record.c_name,
                        "fields": fields})
    limit_sets = {name: (symbols, involved, list(dict.fromkeys(
        s for l in involved for s in (l.symbol, l.bound) if type(s) is str)))
        for name, (symbols, involved) in checks.limit_sets.items()}
    row_bytes = {}
    for r in ep.row_bytes:
        row_bytes.setdefault(r.method, []).append({
            "config": r.config, "field": r.field, "at_most": r.at_most, "doc": r.doc,
            "arguments": list(dict.fromkeys(t.argument for _, _, terms in r.recipes for t in terms)),
            "recipes": [{"name": name, "value": value,
                         "terms": [{"argument": t.argument, "field": t.field, "per": t.per, "dtype": t.dtype}
                                   for t in terms]} for name, value, terms in r.recipes]})
    return {"rules": rules, "records": records, "limit_sets": limit_sets, "group_limits": checks.group_limits,
            "group_symbols": [s for s in ep.symbols.values() if s.source in ("nranks", "group_config")],
            "quotients": [s for s in ep.symbols.values() if s.source == "quotient"],
            "bind_limits": checks.bind_limits, "row_bytes": row_bytes}


def ep_outputs(ctx: RenderContext):
    out = []
    for api, ep in ep_policies(ctx.apis):
        functions = {fn.name: fn for fn in api.functions}
        enums = {e.name: enum_class_name(e.name) for e in api.enums}
        # each enum's member of value 0 (the records' zero-init), the Python default of its fields
        enum_zero = {}
        for e in api.enums:
            names = enum_member_names(e)
            zero = next((v for v in e.values if v.value == 0 and not v.sentinel), None)
            if zero is not None:
                enum_zero[e.name] = f"{enums[e.name]}.{names[zero.name]}"
        methods = [PythonEpMethod(m, ep, functions[m.function].snake_name, enums) for m in ep.methods]
        sources = ctx.source_line(api.header_sets)
        owners = {name: [m for m in methods if m.policy.owner == name] for name in ep.owners}
        data = {"ep": ep, "methods": methods, "owners": owners, "enums": enums, "enum_zero": enum_zero,
                "modes": list(EP_MODES), "sources": sources,
                "initializers": {init.record: init.name for init, _ in api.initializers}}
        data.update(ep_check_plan(ep))
        out.append(("bindings/python/ncclbind/ep/_generated/checks.py", "python/ep_checks.py.j2", data))
        out.append(("bindings/python/ncclbind/ep/_generated/classes.py", "python/ep_classes.py.j2", data))
        out.append(("bindings/python/ncclbind/ep/_generated/methods.py", "python/ep_methods.py.j2", data))
    return out
