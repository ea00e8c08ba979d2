"""Rust rendering of the semantic policy (policy): the safe methods of each owner type
(templates/rust/methods.rs.j2), with the same checks as the Python layer's
ncclbind.base.calls, in the roles' words: ranks in range, the count from one buffer, every
other buffer exactly the length the call needs, a root-only buffer required on the root."""
from __future__ import annotations

import json
import re

from . import RenderContext, environment, render_files
from .rust import VERSIONED_RECORDS, doc_comment, rustfmt
from ..policy.nccl import load_policy
from ..policy.variable_count import load_variable_count
from ..policy.vocabulary import load_vocabulary

OWNERS = {"Communicator": "communicator_methods"}
SPEC_LIBRARIES = ("nccl",)


def outputs(ctx: RenderContext):
    out = []
    for api in ctx.apis:
        if api.library not in SPEC_LIBRARIES:
            continue
        functions = {fn.name: fn for fn in api.functions}
        by_owner = {}
        for policy in load_policy(api).methods:
            variant = functions[policy.config_variant] if policy.config_variant else None
            by_owner.setdefault(policy.owner, []).append((policy, functions[policy.function], variant))
        for owner, methods in by_owner.items():
            out.append((f"bindings/rust/src/generated/{OWNERS[owner]}.rs", "rust/methods.rs.j2",
                        {"owner": owner, "methods": methods, "sources": ctx.source_line(api.header_sets)}))
    return out


# Each owner's Rust type, the generated file of its host calls (kind = "call"), its handle for a
# call, and the guard that counts the call as under way (the communicator's enter(): an abort
# handle lets a counted call return before it frees the communicator, abort.rs): a communicator
# only while it is live (not aborted through an AbortHandle), a window only while its
# communicator is. A module owner (process-wide functions) has no type and no handle: its calls
# are functions of its module (crate::params, crate::dev_comm).
CALL_OWNERS = {"Communicator": ("Communicator", "communicator_calls", "_inside.raw()", "self.enter()?"),
               "Window": ("crate::registration::Window", "window_calls", "self.as_raw()",
                          "self.communicator().enter()?"),
               "Param": ("Param", "param_calls", "self.as_raw()", None),
               "params": (None, "params_calls", None, None),
               "dev_comm": (None, "dev_comm_calls", None, None)}
# Why the owner's handle is valid for the call (the SAFETY comment).
HANDLE_SAFETY = {None: "`handle` is live (checked, and borrowed for the call)",
                 "Param": "`handle` is NCCL's parameter handle, which lives as long as the process"}
# The Rust type a returned handle becomes (an out of an owner's handle type).
OWNER_TYPES = {"Communicator": "Communicator", "Param": "Param"}
RUST_INTS = {"size_t": "usize"}


def int_type(p) -> str:
    """The Rust integer of a C integer parameter (its range is the C type's)."""
    return RUST_INTS.get(p.c_type) or f"{'i' if p.signed else 'u'}{p.size * 8}"


class RustCall:
    def __init__(self, policy, initializers):
        self.policy = policy
        self.initializers = initializers

    @property
    def doc(self) -> str:
        notes = []
        for p in self.policy.inputs:
            if p.kind == "enum":
                notes.append(f"`{p.name}` must be a value the headers define ([`Error::UnknownEnumValue`] if not).")
            if p.optional:
                notes.append(f"`{p.name}`: None passes NULL.")
        if self.policy.output and self.policy.output.kind == "owner" and self.comm_config:
            notes.append(f"With a non-blocking `{self.comm_config.name}` (`blocking: Some(false)`) this waits "
                         f"until the new communicator is ready, at most its `init_timeout` ([`Error::Timeout`] "
                         f"after it, the half-made communicator aborted).")
        if self.raw_layout:
            notes.append(f"NCCL fills the `{self.policy.output.c_type}` layout of the loaded libnccl; it is "
                         f"returned in the newest layout, the fields the loaded one lacks at the initializer's "
                         f"values (`version` says which layout NCCL filled).")
        for p in self.policy.inputs:
            if p.kind == "string":
                notes.append(f"`{p.name}` must not hold a NUL byte ([`Error::NulInString`]).")
            if p.rank_of:
                notes.append(f"`{p.name}` must be in `0..{self.argument(p.rank_of)}.nRanks` "
                             "([`Error::TeamRankOutOfRange`] if not).")
            if p.kind == "capacity":
                notes.append(f"`{p.name}` must fit a C int ([`Error::CountOverflow`] if not).")
        if self.policy.returns_value:
            notes.append(f"`{self.policy.function}` returns no `ncclResult_t`: only a missing library or function is "
                         "reported ([`crate::Error::LibraryNotFound`], [`crate::Error::SymbolNotFound`]), never a "
                         "zeroed value.")
        return " ".join([self.policy.doc, *notes, f"Calls `{self.policy.function}`."])

    @property
    def comm_config(self):
        """The communicator config argument, if the call takes one."""
        return next((p for p in self.policy.inputs if p.kind == "comm_config"), None)

    @property
    def timeout(self) -> str:
        """How long to wait for a non-blocking new communicator: the config's init_timeout."""
        p = self.comm_config
        if p is None:
            return "None"
        return f"{p.name}.and_then(|config| config.init_timeout)" if p.optional else f"{p.name}.init_timeout"

    @property
    def raw_layout(self) -> str | None:
        """The out record's layouts type (sys::*_layouts::Raw*Layout) when NCCL reads the
        record by its size and version stamp: it is filled in the loaded library's layout."""
        out = self.policy.output
        if not out or out.c_type not in VERSIONED_RECORDS:
            return None
        module, prefix, _user, upgrade = VERSIONED_RECORDS[out.c_type]
        return f"crate::sys::{module}::Raw{prefix}Layout" if upgrade else None

    def argument(self, param: str) -> str:
        """The Rust argument of header parameter `param`."""
        return next(p.name for p in self.policy.params if p.param == param)

    @property
    def safety(self) -> str:
        out = self.policy.output
        parts = [] if self.policy.module else [HANDLE_SAFETY.get(self.policy.owner, HANDLE_SAFETY[None])]
        if out and out.role == "out_buffer":
            parts.append(f"`value` holds the `{self.argument(out.of)}` bytes NCCL may write")
        elif out and out.kind == "result_record":
            parts.append(f"{', '.join(f'`{p.name}`' for p in self.policy.outs)} are valid out-pointers")
        elif out and out.role == "out":
            parts.append("`value` is a valid out-pointer")
        if self.policy.length:
            parts.append("`length` is a valid out-pointer")
        if any(p.kind == "string" for p in self.policy.inputs):
            parts.append("the strings are NUL-terminated copies that outlive the call")
        if not parts:
            parts.append("plain values in and out")
        if any(p.optional for p in self.policy.inputs):
            parts.append("optional pointers are null or point at values that outlive the call")
        return "; ".join(parts) + "."


def out_init(call, initializers) -> str:
    out = call.policy.output
    if call.raw_layout:
        return f"crate::config::loaded_layout::<{call.raw_layout}>()?"
    if out.kind == "int":
        return "0"
    if out.kind == "pointer":
        return "core::ptr::null_mut()"
    if out.kind == "owner":
        return f"{out.c_type}::NULL"
    if out.kind == "string":
        return "core::ptr::null()"
    if out.kind == "string_table":
        return "core::ptr::null_mut()"
    if out.kind == "unique_id":
        return "ncclUniqueId::default()"
    made = initializers.get(out.c_type)
    return f"{made}()" if made else f"{out.c_type}::default()"


def call_outputs(ctx: RenderContext):
    out = []
    for api in ctx.apis:
        if api.library not in SPEC_LIBRARIES:
            continue
        # the newest layout's initializer of each record (what the sys module names plainly)
        initializers = {i.record: i.name for i, _ in api.initializers}
        policy = load_policy(api)
        owner_of = {c.name: c.owner for c in policy.calls}
        for owner, (owner_type, module, handle, guard) in CALL_OWNERS.items():
            calls = [RustCall(c, initializers) for c in policy.calls_for(owner)]
            # a record the calls make of their outs, defined beside the first call that returns it
            records = [r for r in policy.result_records() if owner_of[r.calls[0]] == owner]
            out.append((f"bindings/rust/src/generated/{module}.rs", "rust/calls.rs.j2",
                        {"owner": owner, "owner_type": owner_type, "calls": calls, "handle": handle, "guard": guard,
                         "records": records, "sources": ctx.source_line(api.header_sets)}))
            if owner in EXERCISED_OWNERS:
                out.append((f"bindings/rust/src/generated/{module}_exercise.rs", "rust/calls_exercise.rs.j2",
                            {"owner": owner, "calls": calls, "sources": ctx.source_line(api.header_sets)}))
    return out, initializers


# The owners whose calls tests/rust/call_methods.rs runs, every one, from <module>_exercise.rs.
EXERCISED_OWNERS = {"Communicator"}


def exercise_argument(p, inputs) -> str:
    """A valid Rust argument for input `p` of a call, from its kind alone (calls_exercise.rs.j2)."""
    if p.kind in ("int", "capacity"):
        return "grow_to" if p.name == "nranks" else "0"
    if p.kind == "enum":
        return f"{p.c_type}::{p.enum_values[0][0]}"
    if p.kind == "unique_id":
        return f"Some(&{p.name})" if p.optional else f"&{p.name}"
    if p.kind == "comm_config":
        return "None" if p.optional else "&ncclbind::CommConfig::default()"
    if p.kind == "string":
        return '""'
    if p.kind == "record":  # a record another argument is a rank of holds one rank
        ranked = any(q.rank_of == p.name for q in inputs)
        return f"{p.c_type} {{ nRanks: 1, ..Default::default() }}" if ranked else f"{p.c_type}::default()"
    raise ValueError(f"calls_exercise: no argument of kind {p.kind!r} ({p.name})")


def exercise_bad_argument(p, inputs) -> str | None:
    """An argument the call itself refuses (calls.rs.j2's checks), or None where it checks none."""
    if p.kind == "enum":
        return f"{p.c_type}({max(v for _, v in p.enum_values) + 1})"
    if p.kind == "int" and p.rank_of:
        return "1"  # the team of one rank that exercise_argument makes: 1 is outside it
    if p.kind == "string":
        return '"a\\0b"'
    return None


def render(ctx: RenderContext) -> dict[str, str]:
    env = environment({"rs_doc": doc_comment})
    env.globals["rust_name"] = lambda p: f"`{p.rust_name}`"
    env.globals["int_type"] = int_type
    env.globals["owner_types"] = OWNER_TYPES
    env.filters["rs_str"] = rust_string
    calls, initializers = call_outputs(ctx)
    env.globals["out_init"] = lambda call: out_init(call, initializers)
    env.globals["exercise_argument"] = exercise_argument
    env.globals["exercise_bad_argument"] = exercise_bad_argument
    files = render_files(env, outputs(ctx) + calls + ep_outputs(ctx) + vocabulary_outputs(ctx)
                         + config_outputs(ctx) + variable_count_outputs(ctx))
    return {path: rustfmt(text, path) for path, text in files.items()}


# The config records the crate renders from python_api.toml's [records] (as Python's classes):
# C struct -> (generated file, template).
CONFIG_RECORDS = {"ncclConfig_t": ("comm_config", "rust/comm_config.rs.j2"),
                  "ncclCollConfig_t": ("coll_config", "rust/coll_config.rs.j2")}


def config_fields(record, typedefs: dict) -> list[dict]:
    """A config record's fields as the crate's struct holds them (templates/rust/_config_fields.j2):
    int switches (on_off) as bool, other 32-bit ints and enums as i32, 64-bit unsigned as u64,
    char * as CString, a cudaEvent_t as an event its unsafe setter takes; a C list (a sequence,
    Python's vendor_options) is left out."""
    fields = []
    for f in record.fields:
        if f.form != "field":
            continue
        t = f.field.type
        if t.name == "cudaEvent_t":  # a CUDA type (kind external), not NCCL's
            rust_type = "event"
        else:
            while t.kind == "typedef" and t.name in typedefs:
                t = typedefs[t.name].type
            if t.kind in ("int", "enum") and t.size == 4:
                rust_type = "bool" if f.on_off else "i32"
            elif t.kind == "int" and t.size == 8 and not t.signed:
                rust_type = "u64"
            elif t.kind == "pointer" and t.pointee is not None and t.pointee.name in ("char", "const char"):
                rust_type = "CString"
            else:
                raise ValueError(f"{record.c_record}.{f.c_name}: no Rust config type for a {t.kind} {t.name or ''}")
        fields.append({"name": f.name, "c_name": f.c_name, "since": f.since, "doc": f.doc, "rust_type": rust_type,
                       "range": f.range, "flag_mask": f.flag_mask, "flag_text": f.flag_text if f.flags else ""})
    return fields


def config_outputs(ctx: RenderContext) -> list:
    """The crate's CommConfig and CollConfig (generated/comm_config.rs, coll_config.rs, included
    by bindings/rust/src/config.rs and coll_config.rs): a field per field of the IR's struct,
    named, switched (on_off: bool) and documented by policy/python_api.toml's [records],
    as Python's NCCLConfig and NCCLCollConfig are."""
    from ..policy.python_api import load_python_api
    from .python import enum_class_name, enum_member_names
    nccl = next((a for a in ctx.apis if a.library == "nccl"), None)
    if nccl is None:
        return []
    typedefs = {t.name: t for t in nccl.typedefs}
    out = []
    for record in load_python_api(nccl, enum_member_names, enum_class_name).records:
        if record.c_record in CONFIG_RECORDS:
            name, template = CONFIG_RECORDS[record.c_record]
            out.append((f"bindings/rust/src/generated/{name}.rs", template,
                        {"fields": config_fields(record, typedefs), "sources": ctx.source_line(nccl.header_sets)}))
    return out


def variable_count_outputs(ctx: RenderContext) -> list:
    """policy/variable_count.toml's collectives as methods of Communicator
    (generated/variable_count_methods.rs, included by bindings/rust/src/variable_count.rs)."""
    nccl = next((a for a in ctx.apis if a.library == "nccl"), None)
    if nccl is None or not load_vocabulary(nccl):
        return []
    return [("bindings/rust/src/generated/variable_count_methods.rs", "rust/variable_count_methods.rs.j2",
             {"collectives": load_variable_count(), "sources": ctx.source_line(nccl.header_sets)})]


def vocabulary_outputs(ctx: RenderContext) -> list:
    """policy/vocabulary.toml's data types as Rust data (generated/data_types.rs, included
    by bindings/rust/src/data_type.rs)."""
    nccl = next((a for a in ctx.apis if a.library == "nccl"), None)
    if nccl is None or not load_vocabulary(nccl):
        return []
    return [("bindings/rust/src/generated/data_types.rs", "rust/data_types.rs.j2",
             {"data_types": load_vocabulary(nccl), "sources": ctx.source_line(nccl.header_sets)})]


# ---- NCCL EP (policy/nccl_ep.toml) -> ncclbind::ep --------------------------------------
# Four files under bindings/rust/src/generated/, included by the hand-written bindings/rust/src/ep/mod.rs
# (which holds the types they use and the helpers that word a refusal): ep_policy.rs (what is no
# rule: the symbols' names, the element types' names and sizes, the modes), ep_checks.rs (every
# rule as literal code, no rule looked up at run time: a function per tensor rule and per set of
# limits, the group's symbols, a check per precondition and those a new group meets, each method's
# token-row rule), ep_classes.rs (the tensor-set records and the config records)
# and ep_methods.rs (the methods of Group and Handle and the module's functions, each its
# arguments by role, checked before the call, and the preconditions its success meets). Python's
# ncclbind.ep is rendered from the same policy.
# Each algorithm prefix of a mode (the policy's ll_*/ht_*) and its ncclEpAlgorithm_t enumerator.
EP_ALGORITHMS = {"ll": "NCCL_EP_ALGO_LOW_LATENCY", "ht": "NCCL_EP_ALGO_HIGH_THROUGHPUT"}
EP_LAYOUT_ENUM = "ncclEpLayout_t"
# A device array's C element type as the sys layer spells it.
EP_C_INTS = {"int": "c_int", "unsigned int": "core::ffi::c_uint"}


def rust_string(text: str) -> str:
    """A Rust string literal of text: JSON's escapes (quote, backslash, control characters) are Rust's too."""
    return json.dumps(text, ensure_ascii=False)


def camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def ep_data_type(name: str, data_types) -> str:
    """The ncclDataType_t enumerator of a policy element type name (ncclbind's canonical names, as
    policy/vocabulary.toml states them: float8_e4m3fn is ncclFloat8e4m3)."""
    found = [t.enumerator for t in data_types if t.name == name]
    if len(found) != 1:
        raise ValueError(f"nccl_ep.toml: element type {name!r} is no data type of vocabulary.toml")
    return found[0]


def mode_pattern(modes) -> str:
    """A Rust pattern of Mode variants: Mode::HtFlat | Mode::HtExpertMajor."""
    return " | ".join(f"Mode::{camel(m)}" for m in modes)


def ep_dim_check(index: int, parsed: tuple, limits) -> dict | None:
    """One dimension of a case's shape as ep/generated/checks.rs checks it (None: "*", nothing):
    an int compared; a symbol compared when known, else bound (`limits`: the function of the
    limits it involves, None where it involves none); a product compared when both sides are
    known (each side an Option<usize> expression; "*" on a side: never checked)."""
    from ..policy.ep import dim_text
    kind = parsed[0]
    if kind == "any" or (kind == "mul" and "any" in (parsed[1][0], parsed[2][0])):
        return None
    dim = {"index": index, "kind": kind, "text": dim_text(parsed)}
    if kind == "int":
        dim["value"] = parsed[1]
    elif kind == "sym":
        dim.update(symbol=camel(parsed[1]), limits=limits((parsed[1],)))
    else:
        dim["factors"] = [f"Some({d[1]}usize)" if d[0] == "int" else f"call.symbols.get(Sym::{camel(d[1])})"
                          for d in parsed[1:]]
    return dim


def ep_tensor_check(function: str, rule, data_types, limits) -> dict:
    """A tensor rule as ep/generated/checks.rs's function `function` checks it: the modes it is
    refused in, then one match arm per case of TensorRule.cases() (its modes as a pattern, its
    element types, its shape's rank and dimensions)."""
    cases = []
    for case in rule.cases():
        pattern = [f"Some({mode_pattern(case.modes)})"] if case.modes else []
        if case.unknown_mode:
            pattern.append("None")
        dims = [ep_dim_check(i, d, limits) for i, d in enumerate(case.shape or ())]
        cases.append({"pattern": " | ".join(pattern),
                      "dtypes": [ep_data_type(d, data_types) for d in case.dtypes],
                      "dtype_names": " or ".join(case.dtypes), "shape": case.shape is not None,
                      "rank": len(case.shape or ()), "shape_text": case.shape_text,
                      "dims": [d for d in dims if d is not None]})
    refused = mode_pattern(rule.refused_modes)
    return {"function": function, "doc": rule.doc, "required": rule.required, "by_mode": rule.by_mode,
            "refused": f"({refused})" if len(rule.refused_modes) > 1 else refused,
            "modes_text": ", ".join(rule.modes or ()), "cases": cases}


def ep_limit(limit) -> dict:
    """One [[limits]] entry as literal code (ep/generated/checks.rs): its sides, its test and its
    message, and its scope as matches! on the call's mode and method (None: everywhere)."""
    constant = type(limit.bound) is int
    scope = []
    if limit.modes is not None:
        scope.append(f"matches!(mode, Some({mode_pattern(limit.modes)}))")
    if limit.methods is not None:
        scope.append(f"matches!(method, Some({' | '.join(rust_string(m) for m in limit.methods)}))")
    out = {"symbol": camel(limit.symbol), "name": limit.symbol, "kind": limit.kind, "constant": constant,
           "doc": limit.doc, "scope": " && ".join(scope) or None, "uses_mode": limit.modes is not None,
           "uses_method": limit.methods is not None}
    if constant:
        out["bound"] = limit.bound
    else:
        out.update(bound=camel(limit.bound), bound_name=limit.bound)
    return out


def ep_check_plan(ep, data_types) -> dict:
    """What templates/rust/ep_checks.rs.j2 writes, over EpPolicy.check_plan (the checks' names and
    limit sets, which Python's checks share): a check per tensor rule, and each limit set as a
    method of Symbols (an at_least of 0 or less is left out: it always holds, a usize is never
    below 0); with the functions each record field, group creation and method's binds call."""
    checks = ep.check_plan()
    limit_sets = {}
    for name, (symbols, involved) in checks.limit_sets.items():
        involved = [ep_limit(l) for l in involved if not (l.kind == "at_least" and l.bound <= 0)]
        if involved:
            limit_sets[name] = {"function": name, "symbols": list(symbols), "limits": involved,
                                "uses_mode": any(l["uses_mode"] for l in involved),
                                "uses_method": any(l["uses_method"] for l in involved)}

    def limits(symbols) -> str | None:
        name = checks.limits_for(tuple(symbols))
        return name if name in limit_sets else None

    def kept(name: str | None) -> str | None:
        return name if name in limit_sets else None

    return {"checks": [ep_tensor_check(r.function, r.rule, data_types, limits) for r in checks.rules],
            "fields": {(r.record, r.field): r.function for r in checks.rules if r.record is not None},
            "group_limits": kept(checks.group_limits),
            "bind_limits": {method: kept(name) for method, name in checks.bind_limits.items()},
            "limit_sets": list(limit_sets.values())}


def ep_element_types(data_types) -> list[dict]:
    """Every element type name of the EP policy's vocabulary with its ncclDataType_t enumerator and
    bytes per element, from policy/vocabulary.toml: the sizes [[row_bytes]] checks read."""
    return [{"name": t.name, "variant": t.enumerator, "bytes": t.bytes}
            for t in sorted(data_types, key=lambda t: t.name)]


def ep_row_bytes(ep, data_types, argument_types) -> list[dict]:
    """Each method's [[row_bytes]] rules as ep/generated/checks.rs's row_bytes_<method> writes
    them out: its parameters (the config and tensor-set arguments the rules read, typed as the
    method takes them: `argument_types`), and per rule its budget, the Rust expression of its
    recipe and, per recipe, the value its match arm tests and each term's tensor (a read of the
    argument), `per` and element type."""
    by_method: dict = {}
    for r in ep.row_bytes:
        method = next(m for m in ep.methods if m.name == r.method)
        params = {p.name: p for p in method.params if p.name}
        budget = ep.symbols[r.at_most]
        recipe = (f"{r.config}.map_or(0, |config| config.{r.field}.0 as i64)" if params[r.config].optional
                  else f"{r.config}.{r.field}.0 as i64")
        recipes = []
        for name, value, terms in r.recipes:
            rows = []
            for t in terms:
                read = (f"{t.argument}.and_then(|tensors| tensors.{t.field})" if params[t.argument].optional
                        else f"{t.argument}.{t.field}")
                rows.append({"tensor": t.tensor, "read": read, "per": t.per,
                             "data_type": None if t.dtype is None else ep_data_type(t.dtype, data_types)})
            recipes.append({"value": value, "text": f"{r.config}.{r.field} {name}", "terms": rows})
        plan = by_method.setdefault(r.method, {"method": r.method, "arguments": [], "budgets": {}, "rules": []})
        for argument in (r.config, *(t.argument for _, _, terms in r.recipes for t in terms)):
            if argument not in plan["arguments"]:
                plan["arguments"].append(argument)
        plan["budgets"][budget.name] = camel(budget.name)
        plan["rules"].append({"budget": budget.name, "recipe": recipe, "argument": r.tensors[0], "doc": r.doc,
                              "recipes": recipes})
    for plan in by_method.values():
        plan["params"] = [{"name": a, "type": argument_types[(plan["method"], a)]} for a in plan["arguments"]]
        for index, rule in enumerate(plan["rules"]):
            rule["doc_name"] = "DOC" if len(plan["rules"]) == 1 else f"DOC_{index + 1}"
    return list(by_method.values())


def ep_preconditions(ep) -> list[dict]:
    """Each [preconditions] entry as generated code writes it: its variant, the match pattern of
    the algorithms whose groups can meet it (None: any), why a group lacks it (`state`, for a
    group of such an algorithm: the config field 0 at creation, no set_by method succeeded;
    `others`: each other algorithm's pattern and "is <LL|HT>"), and the test of a new group's
    config that meets it at creation (None: never met at creation)."""
    if len(ep.preconditions) > 32:
        raise ValueError("nccl_ep.toml: more than 32 [preconditions] (Group::met holds a bit per precondition)")
    out = []
    for p in ep.preconditions.values():
        pattern = None if p.algorithms is None else " | ".join(
            f"ncclEpAlgorithm_t::{EP_ALGORITHMS[a]}" for a in p.algorithms)
        state = []
        if p.config is not None:
            state.append(f"has GroupConfig.{p.config} = 0")  # else it would be met
        if p.set_by:
            state.append(f"no {' or '.join(p.set_by)} has succeeded on it")
        others = [{"pattern": f"ncclEpAlgorithm_t::{enumerator}", "state": f"is {prefix.upper()}"}
                  for prefix, enumerator in EP_ALGORITHMS.items() if p.algorithms is not None
                  and prefix not in p.algorithms]
        at_creation = []
        if pattern is not None:
            at_creation.append(f"matches!(config.algorithm, {pattern})")
        if p.config is not None:
            at_creation.append(f"config.{p.config} != 0")
        out.append({"name": p.name, "variant": camel(p.name), "doc": p.doc, "pattern": pattern,
                    "algorithms_text": None if p.algorithms is None else " or ".join(a.upper() for a in p.algorithms),
                    "state": " and ".join(state), "others": others,
                    "met_at_creation": None if not (p.config or p.holds_from_creation)
                    else " && ".join(at_creation)})
    return out


def ep_int_type(size: int, signed: bool, c_type: str = "") -> str:
    return RUST_INTS.get(c_type) or f"{'i' if signed else 'u'}{size * 8}"


def ep_outputs(ctx: RenderContext):
    from ..policy.ep import MODES, ep_policies
    files = []
    for api, ep in ep_policies(ctx.apis):
        nccl = next((a for a in ctx.apis if a.library != api.library), None)
        data_types = load_vocabulary(nccl or api)  # policy/vocabulary.toml, checked against the headers
        enums = {e.name: [v.name for v in e.values] for e in api.enums}
        layouts = enums[EP_LAYOUT_ENUM]
        initializers = {i.record: i.name for i, _ in api.initializers}
        symbols = [{"name": s.name, "variant": camel(s.name), "source": s.source, "field": s.field,
                    "of": [camel(o) for o in s.of], "doc": s.doc} for s in ep.symbols.values()]
        plan = ep_check_plan(ep, data_types)
        modes = []
        for mode in MODES:
            algorithm, layout = mode.split("_", 1)
            layout_value = f"NCCL_EP_LAYOUT_{layout.upper()}"
            if layout_value not in layouts:
                raise ValueError(f"mode {mode}: {EP_LAYOUT_ENUM} has no {layout_value}")
            modes.append({"name": mode, "variant": camel(mode), "algorithm": EP_ALGORITHMS[algorithm],
                          "layout": layout_value})
        records = []
        for c_name, record in ep.records.items():
            fields = [{"name": fname, "check": plan["fields"][(c_name, fname)], "required": rule.required,
                       "doc": rule.doc} for fname, rule in record.fields]
            values = [{"name": f, "type": e, "known": enums[e]} for f, e in record.values]
            records.append({"class": record.class_name, "c_name": c_name, "doc": record.doc,
                            "init": initializers[c_name], "fields": fields, "value_fields": values})
        configs = []
        for c_name, config in ep.configs.items():
            fields = []
            for f in config.fields:
                field = {"name": f.name, "kind": f.kind, "doc": f.doc, "positive": f.positive}
                if f.kind == "enum":
                    field.update(type=f.enum, known=enums[f.enum], cast=f.c_type != f.enum)
                elif f.kind == "int":
                    field.update(type=ep_int_type(f.size, f.signed, f.c_type))
                else:
                    field.update(type=f.c_type)
                fields.append(field)
            configs.append({"class": config.class_name, "c_name": c_name, "doc": config.doc,
                            "init": config.initializer or initializers[c_name], "fields": fields})
        record_classes = {r.c_name: r.class_name for r in ep.records.values()}
        config_classes = {c.c_name: c.class_name for c in ep.configs.values()}
        methods = []
        for m in ep.methods:
            owner = ep.owners[m.owner]
            params = []
            for p in m.params:
                param = {"role": p.role, "name": p.name, "param": p.param, "optional": p.optional}
                if p.role == "enum":
                    param.update(type=p.c_type, known=enums[p.c_type], is_layout=p.c_type == EP_LAYOUT_ENUM)
                elif p.role == "int":
                    param.update(type=ep_int_type(p.size, p.signed, p.c_type), default=p.default)
                elif p.role in ("tensor", "device_array"):
                    rule = ep.tensors[p.rule]
                    param.update(check=f"tensor_{p.rule}", required=rule.required, doc=rule.doc,
                                 pointee=EP_C_INTS.get(p.c_type, p.c_type))
                elif p.role == "tensors":
                    param.update(type=record_classes[p.record])
                elif p.role == "config":
                    param.update(type=config_classes[p.record])
                elif p.role == "host_array":
                    param.update(type=ep_int_type(p.size, p.signed, p.c_type), length=camel(p.length))
                elif p.role == "out":
                    param.update(makes=p.makes, c_type=p.c_type,
                                 type=None if p.makes else ep_int_type(p.size, p.signed, p.c_type))
                params.append(param)
            returned = next((p for p in params if p["role"] == "out"), None)
            methods.append({"name": m.name, "function": m.function, "owner": m.owner, "kind": m.kind,
                            "module": owner.handle is None, "doc": m.doc, "params": params, "out": returned,
                            "requires": [{"name": r, "doc": ep.preconditions[r].doc} for r in m.requires],
                            "arguments": [p for p in params if p["name"]],
                            "binds": [{"symbol": camel(s), "argument": a, "index": i} for s, a, i in m.binds],
                            "bind_limits": plan["bind_limits"].get(m.name)})
        # the Rust type of each tensor-set and config argument, as the method takes it
        lifetimes = {"tensors": "<'_>", "config": ""}
        argument_types = {}
        for method in methods:
            for p in method["params"]:
                if p["role"] in lifetimes:
                    borrowed = f"&{p['type']}{lifetimes[p['role']]}"
                    argument_types[(method["name"], p["name"])] = f"Option<{borrowed}>" if p["optional"] else borrowed
        row_bytes = ep_row_bytes(ep, data_types, argument_types)
        for method in methods:
            method["row_bytes"] = next((r for r in row_bytes if r["method"] == method["name"]), None)
        preconditions = ep_preconditions(ep)
        for method in methods:
            method["satisfies"] = [p for p in preconditions if p["name"] in ep.satisfies(method["name"])]
        variables = {"sources": ctx.source_line(api.header_sets), "symbols": symbols,
                     "group_symbols": [s for s in symbols if s["source"] in ("nranks", "group_config")],
                     "quotients": [s for s in symbols if s["source"] == "quotient"],
                     "preconditions": preconditions, "row_bytes": row_bytes,
                     "element_types": ep_element_types(data_types),
                     "modes": modes, "checks": plan["checks"], "limit_sets": plan["limit_sets"],
                     "group_limits": plan["group_limits"], "records": records, "configs": configs,
                     "methods": methods, "group_config": "ncclEpGroupConfig_t"}
        for name in ("policy", "checks", "classes", "methods"):  # included by the crate's ep/mod.rs
            files.append((f"bindings/rust/src/ep/generated/{name}.rs", f"rust/ep_{name}.rs.j2", variables))
    return files
