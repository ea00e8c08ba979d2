"""The collectives as nccl-tests lays them out and judges them (policy/vocabulary.toml
[collectives]), rendered for every program of ncclbind.bench: the Python driver and worker
(ncclbind/bench/_generated/collectives.py, read by ncclbind/bench/collectives.py), the C worker
(bench/cli/generated/collectives.h) and the Rust worker (bench/cli/generated/collectives.rs). Each
collective's layout and received data are its own code in each language, written from the
policy's expressions by render_expression; the reduction ops' names (nccl-tests' -o) come from the
headers' ncclRedOp_t."""
from __future__ import annotations

from . import RenderContext, environment, render_files
from .rust import rustfmt
from ..policy.vocabulary import LAYOUT_KEYS, load_collectives, load_vocabulary, render_expression

# How each language spells the expressions' names and calls (value, reduced: the program's own).
PYTHON = ({n: n for n in ("total", "per", "n", "i", "rank", "root")},
          {"value": "value({0}, {1})", "reduced": "reduced({0})"}, "//")
C = ({n: n for n in ("total", "per", "n", "i", "rank", "root")},
     {"value": "value((long)({0}), {1}, rep)", "reduced": "reduced({0}, rep)"}, "/")
RUST = ({n: n for n in ("total", "per", "n", "i", "rank", "root")},
        {"value": "value({0}, {1})", "reduced": "reduced({0})"}, "/")
# busbw = algbw x factor, as an expression of n (a float) in each language
BUS = {"python": {"2(n-1)/n": "2 * (n - 1) / n", "(n-1)/n": "(n - 1) / n", "1": "1.0"}}


def _plan(collectives, language) -> list[dict]:
    names, calls, divide = language
    return [{"name": c.name, "upper": c.name.upper(), "c": c, "bus": BUS["python"][c.bus_factor],
             "layout": {key: render_expression(c.layout[key], names, calls, divide) for key in LAYOUT_KEYS},
             "received": render_expression(c.received, names, calls, divide)} for c in collectives]


def reduction_ops(api) -> list[tuple[str, int]]:
    """(nccl-tests' -o name, ncclRedOp_t value) of each built-in op of the headers: the
    enumerator's name without its "nccl" prefix, lower case (ncclSum: sum)."""
    enum = next(e for e in api.enums if e.name == "ncclRedOp_t")
    return [(v.name.removeprefix("nccl").lower(), v.value) for v in enum.values if not v.sentinel]


def render(ctx: RenderContext) -> dict[str, str]:
    nccl = next((a for a in ctx.apis if a.library == "nccl"), None)
    if nccl is None or not load_vocabulary(nccl):
        return {}  # synthetic headers: no NCCL to bench
    collectives = load_collectives()
    ops = reduction_ops(nccl)
    if [value for _, value in ops] != list(range(len(ops))):
        raise ValueError(f"ncclRedOp_t's built-in ops are not 0..n-1 ({ops}): the workers index their names by value")
    sources = ctx.source_line(nccl.header_sets)
    # the types the bench runs (nccl-tests' -d names), with avg's tolerance
    types = [t for t in load_vocabulary(nccl) if t.nccl_tests]
    env = environment({"py_literal": repr})
    files = render_files(env, [
        ("bindings/python/ncclbind/bench/_generated/collectives.py", "bench/collectives.py.j2",
         {"collectives": _plan(collectives, PYTHON), "ops": ops, "types": types, "sources": sources}),
        ("bench/cli/generated/collectives.h", "bench/collectives.h.j2",
         {"collectives": _plan(collectives, C), "ops": ops, "types": types, "sources": sources}),
        ("bench/cli/generated/collectives.rs", "bench/collectives.rs.j2",
         {"collectives": _plan(collectives, RUST), "ops": ops, "types": types, "sources": sources}),
    ])
    return {path: rustfmt(text, path) if path.endswith(".rs") else text for path, text in files.items()}
