"""Python rendering of the semantic spec (generator/spec): the methods of each owner class,
as signatures, docstrings and one call of ncclbind.core.calls.call_method with their row
(templates/python/methods.py.j2), and the same rows as the C fast path's table
(templates/python/method_table.c.j2), with one trampoline per NCCL function that puts a
call's values in the function's order."""
from __future__ import annotations

from dataclasses import dataclass

from . import RenderContext, environment, render_files
from .c import PREFIX, CTypes
from .python import py_docstring
from ..spec import MethodSpec, load_spec

# The owner classes and the module each one's generated base class lives in.
OWNERS = {"Communicator": "communicator_methods"}
SPEC_LIBRARIES = ("nccl",)


@dataclass
class PythonMethod:
    spec: MethodSpec
    low_level: str
    config_low_level: str | None
    blocking: bool
    trampoline: str            # C function name
    config_trampoline: str | None
    c_args: list[str]          # the trampoline's arguments, in the C function's order
    c_function: str            # the prefixed C wrapper

    @property
    def signature(self) -> str:
        positional, keywords = self.spec.python_signature
        parts = [n if d is None else f"{n}={d}" for n, d in positional]
        parts.append("*")
        parts += [f"{n}={d}" for n, d in keywords]
        return ", ".join(["self", *parts])

    @property
    def arguments(self) -> list[str]:
        return self.spec.python_arguments

    def default_code(self, argument: str) -> str:
        positional, keywords = self.spec.python_signature
        default = dict(positional + keywords)[argument]
        return {None: "NBPY_REQUIRED", "None": "NBPY_DEFAULT_NONE", "SUM": "NBPY_DEFAULT_SUM"}[default]

    def index(self, argument: str) -> int:
        return self.arguments.index(argument) if argument in self.arguments else -1

    @property
    def order(self) -> list[str]:
        """The C call's parameters as calls.py names them: roles, or buffer arguments."""
        return [p.python_name if p.is_buffer else p.role for p in self.spec.params]


def _c_args(spec: MethodSpec, fn, ct: CTypes) -> list[str]:
    buffer_index = {p.param: i for i, p in enumerate(spec.buffers)}
    out = []
    for p in fn.params[: len(spec.params)]:
        role = spec.param(p.name)
        c_type = ct.type(p.type)
        value = {"count": "values->count", "dtype": "values->datatype", "op": "values->op",
                 "root": "values->rank", "peer": "values->rank", "comm": "values->comm",
                 "stream": "values->stream"}.get(role.role)
        if role.is_buffer:
            value = f"(uintptr_t)values->buffer[{buffer_index[p.name]}]"
        out.append(f"({c_type}){value}")
    return out


def plan(ctx: RenderContext) -> dict[str, list[PythonMethod]]:
    """{owner: [PythonMethod]} over the libraries that have a spec."""
    ct = CTypes(ctx.conventions, {n: vs for a in ctx.apis for n, vs in a.record_variants.items()})
    owners: dict[str, list[PythonMethod]] = {}
    for api in ctx.apis:
        if api.library not in SPEC_LIBRARIES:
            continue
        functions = {fn.name: fn for fn in api.functions}
        for spec in load_spec(api).methods:
            fn = functions[spec.function]
            variant = functions.get(spec.config_variant) if spec.config_variant else None
            owners.setdefault(spec.owner, []).append(PythonMethod(
                spec, fn.snake_name, variant.snake_name if variant else None, fn.blocking,
                f"call_{fn.name}", None, _c_args(spec, fn, ct), PREFIX + fn.name))
    return owners


def outputs(ctx: RenderContext):
    owners = plan(ctx)
    sources = ctx.source_line(ctx.api("nccl").header_sets)
    out = []
    for owner, methods in owners.items():
        out.append((f"bindings/python/ncclbind/_generated/{OWNERS[owner]}.py", "python/methods.py.j2",
                    {"owner": owner, "methods": methods, "sources": sources}))
    every = [m for methods in owners.values() for m in methods]
    out.append(("bindings/python/src/generated/method_table.c", "python/method_table.c.j2",
                {"methods": every, "sources": sources}))
    return out


def render(ctx: RenderContext) -> dict[str, str]:
    env = environment({"py_docstring": py_docstring})
    env.globals["python_name"] = lambda p: p.python_name
    return render_files(env, outputs(ctx))
