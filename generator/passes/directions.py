"""Parameter directions: in, out, inout, and arrays sized by another parameter.

Rules, in order: conventions.toml [directions]; const pointee -> in; T** -> out;
void* -> in (a buffer); pointer to an opaque type (incomplete, or a record not mirrored) or to a
function pointer -> in (an address the caller has); pointer to a scalar, handle or record -> out.
"""
from __future__ import annotations

import re

from ..policy.conventions import Conventions
from ..ir import Function

_SPEC = re.compile(r"^(in|out|inout)(?:\[(\w+)\])?$")


def infer(fn: Function, conv: Conventions) -> None:
    names = {p.name for p in fn.params}
    for p in fn.params:
        policy = conv.directions.get(f"{fn.name}.{p.name}")
        if policy is not None:
            m = _SPEC.match(policy)
            if not m or (m.group(2) and m.group(2) not in names):
                raise ValueError(f"conventions.toml: bad direction {policy!r} for {fn.name}.{p.name}")
            p.direction, p.length_param = m.group(1), m.group(2)
            continue
        t = p.type
        if t.kind != "pointer":
            p.direction = "in"
        elif t.const:
            p.direction = "in"
        elif t.pointee.kind == "pointer":
            p.direction = "out"
        elif t.pointee.kind in ("void", "opaque", "function_pointer"):
            p.direction = "in"
        else:
            p.direction = "out"
