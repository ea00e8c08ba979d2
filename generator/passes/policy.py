"""The binding policy of policy/conventions.toml on one header set's extracted IR, after the
cache: blocking and throwing calls, sentinels, then the directions and naming passes."""
from __future__ import annotations

import fnmatch

from ..policy.conventions import Conventions
from . import directions, naming


def _names_stream(t) -> bool:
    return t is not None and (t.name == "cudaStream_t" or _names_stream(t.pointee))


def apply_conventions(ir, conv: Conventions) -> None:
    """Binding policy on one header set's extracted IR (in place)."""
    for fn in ir.functions:
        # a call that takes a CUDA stream enqueues work there and may wait for room: it blocks,
        # whatever its name (a new collective is one without an entry here)
        fn.blocking = any(_names_stream(p.type) for p in fn.params) or \
            any(fnmatch.fnmatchcase(fn.name, pat) for pat in conv.blocking)
        fn.throws = any(fnmatch.fnmatchcase(fn.name, pat) for pat in conv.throws)
        directions.infer(fn, conv)
    for enum in ir.enums:
        for value in enum.values:
            value.sentinel = value.name in conv.sentinels
    naming.apply(ir, conv)
