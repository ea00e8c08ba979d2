"""Rust rendering of the semantic spec (generator/spec): the safe methods of each owner type
(templates/rust/methods.rs.j2), with the same checks as the Python layer's
ncclbind.core.calls, in the roles' words: ranks in range, the count from one buffer, every
other buffer exactly the length the call needs, a root-only buffer required on the root."""
from __future__ import annotations

from . import RenderContext, environment, render_files
from .rust import VERSIONED_RECORDS, doc_comment, rustfmt
from ..spec import load_spec

OWNERS = {"Communicator": "communicator_methods"}
SPEC_LIBRARIES = ("nccl",)


def outputs(ctx: RenderContext):
    out = []
    for api in ctx.apis:
        if api.library not in SPEC_LIBRARIES:
            continue
        functions = {fn.name: fn for fn in api.functions}
        by_owner = {}
        for spec in load_spec(api).methods:
            variant = functions[spec.config_variant] if spec.config_variant else None
            by_owner.setdefault(spec.owner, []).append((spec, functions[spec.function], variant))
        for owner, methods in by_owner.items():
            out.append((f"bindings/rust/src/generated/{OWNERS[owner]}.rs", "rust/methods.rs.j2",
                        {"owner": owner, "methods": methods, "sources": ctx.source_line(api.header_sets)}))
    return out


# Each owner's Rust type, the generated file of its host calls (kind = "call"), and its
# handle for a call: a communicator only while it is live (not aborted through an
# AbortHandle), a window only while its communicator is.
# A module owner (process-wide functions) has no type and no handle: its calls are functions of
# its module (crate::params, crate::device_api).
CALL_OWNERS = {"Communicator": ("Communicator", "communicator_calls", "self.live_raw()?"),
               "Window": ("crate::registration::Window", "window_calls",
                          "{ self.communicator().live_raw()?; self.as_raw() }"),
               "Param": ("Param", "param_calls", "self.as_raw()"),
               "params": (None, "params_calls", None),
               "device_api": (None, "device_api_calls", None)}
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
    def __init__(self, spec, initializers):
        self.spec = spec
        self.initializers = initializers

    @property
    def doc(self) -> str:
        notes = []
        for p in self.spec.inputs:
            if p.kind == "enum":
                notes.append(f"`{p.name}` must be a value the headers define ([`Error::UnknownEnumValue`] if not).")
            if p.optional:
                notes.append(f"`{p.name}`: None passes NULL.")
        if self.spec.output and self.spec.output.kind == "owner" and self.comm_config:
            notes.append(f"With a non-blocking `{self.comm_config.name}` (`blocking: Some(false)`) this waits "
                         f"until the new communicator is ready, at most its `init_timeout` ([`Error::Timeout`] "
                         f"after it, the half-made communicator aborted).")
        if self.raw_layout:
            notes.append(f"NCCL fills the `{self.spec.output.c_type}` layout of the loaded libnccl; it is "
                         f"returned in the newest layout, the fields the loaded one lacks at the initializer's "
                         f"values (`version` says which layout NCCL filled).")
        for p in self.spec.inputs:
            if p.kind == "string":
                notes.append(f"`{p.name}` must not hold a NUL byte ([`Error::NulInString`]).")
            if p.rank_of:
                notes.append(f"`{p.name}` must be in `0..{self.argument(p.rank_of)}.nRanks` "
                             "([`Error::TeamRankOutOfRange`] if not).")
            if p.kind == "capacity":
                notes.append(f"`{p.name}` must fit a C int ([`Error::CountOverflow`] if not).")
        if self.spec.returns_value:
            notes.append(f"`{self.spec.function}` returns no `ncclResult_t`: only a missing library or function is "
                         "reported ([`crate::Error::LibraryNotFound`], [`crate::Error::SymbolNotFound`]), never a "
                         "zeroed value.")
        return " ".join([self.spec.doc, *notes, f"Calls `{self.spec.function}`."])

    @property
    def comm_config(self):
        """The communicator config argument, if the call takes one."""
        return next((p for p in self.spec.inputs if p.kind == "comm_config"), None)

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
        out = self.spec.output
        if not out or out.c_type not in VERSIONED_RECORDS:
            return None
        module, prefix, _user, upgrade = VERSIONED_RECORDS[out.c_type]
        return f"crate::sys::{module}::Raw{prefix}Layout" if upgrade else None

    def argument(self, param: str) -> str:
        """The Rust argument of header parameter `param`."""
        return next(p.name for p in self.spec.params if p.param == param)

    @property
    def safety(self) -> str:
        out = self.spec.output
        parts = [] if self.spec.module else [HANDLE_SAFETY.get(self.spec.owner, HANDLE_SAFETY[None])]
        if out and out.role == "out_buffer":
            parts.append(f"`value` holds the `{self.argument(out.of)}` bytes NCCL may write")
        elif out and out.role == "out":
            parts.append("`value` is a valid out-pointer")
        if self.spec.length:
            parts.append("`length` is a valid out-pointer")
        if any(p.kind == "string" for p in self.spec.inputs):
            parts.append("the strings are NUL-terminated copies that outlive the call")
        if not parts:
            parts.append("plain values in and out")
        if any(p.optional for p in self.spec.inputs):
            parts.append("optional pointers are null or point at values that outlive the call")
        return "; ".join(parts) + "."


def out_init(call, initializers) -> str:
    out = call.spec.output
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
        spec = load_spec(api)
        for owner, (owner_type, module, handle) in CALL_OWNERS.items():
            calls = [RustCall(c, initializers) for c in spec.calls_for(owner)]
            out.append((f"bindings/rust/src/generated/{module}.rs", "rust/calls.rs.j2",
                        {"owner": owner, "owner_type": owner_type, "calls": calls, "handle": handle,
                         "sources": ctx.source_line(api.header_sets)}))
    return out, initializers


def render(ctx: RenderContext) -> dict[str, str]:
    env = environment({"rs_doc": doc_comment})
    env.globals["rust_name"] = lambda p: f"`{p.rust_name}`"
    env.globals["int_type"] = int_type
    env.globals["owner_types"] = OWNER_TYPES
    calls, initializers = call_outputs(ctx)
    env.globals["out_init"] = lambda call: out_init(call, initializers)
    files = render_files(env, outputs(ctx) + calls)
    return {path: rustfmt(text, path) for path, text in files.items()}
