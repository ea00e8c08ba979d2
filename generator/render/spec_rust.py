"""Rust rendering of the semantic spec (generator/spec): the safe methods of each owner type
(templates/rust/methods.rs.j2), with the same checks as the Python layer's
ncclbind.core.calls, in the roles' words: ranks in range, the count from one buffer, every
other buffer exactly the length the call needs, a root-only buffer required on the root."""
from __future__ import annotations

from . import RenderContext, environment, render_files
from .rust import doc_comment, rustfmt
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
            by_owner.setdefault(spec.owner, []).append((spec, functions[spec.function]))
        for owner, methods in by_owner.items():
            out.append((f"bindings/rust/src/generated/{OWNERS[owner]}.rs", "rust/methods.rs.j2",
                        {"owner": owner, "methods": methods, "sources": ctx.source_line(api.header_sets)}))
    return out


def render(ctx: RenderContext) -> dict[str, str]:
    env = environment({"rs_doc": doc_comment})
    env.globals["rust_name"] = lambda p: f"`{p.rust_name}`"
    return {path: rustfmt(text, path) for path, text in render_files(env, outputs(ctx)).items()}
