"""The variable-count collectives (policy/variable_count.toml): collectives with a count
per rank, which NCCL does not have, each described once as its arguments, its checks and the NCCL
calls it makes per rank in one group. Python (render/policy_python.py) and Rust
(render/policy_rust.py) render their methods from what load_variable_count returns; a mistake in
the file stops generation naming the entry."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from .common import POLICY_DIR, PolicyError, check_keys

VARIABLE_COUNT = POLICY_DIR / "variable_count.toml"
KEYS = {"doc", "arguments", "packed", "blocks", "disjoint", "own", "each_rank"}
BUFFERS = ("send", "recv")
CALLS = ("send", "recv", "reduce")
OWN_RULES = ("equal", "at_least")
# the calls each_rank names: nccl.toml methods every supported release has
METHODS = {"send": "send", "recv": "recv", "reduce": "reduce"}


@dataclass(frozen=True)
class Call:
    call: str                 # send | recv | reduce
    buffer: str               # send | recv
    counts: str | None        # None: the whole buffer
    displs: str | None

    @property
    def whole(self) -> bool:
        return self.counts is None


@dataclass(frozen=True)
class VariableCount:
    name: str
    doc: str
    arguments: tuple[str, ...]
    packed: dict                          # optional displacements list -> the counts it packs
    checks: tuple[tuple, ...]             # ("own", buffer, counts, rule) | ("blocks", buffer, counts, displs)
                                          # | ("disjoint", buffer, counts, displs), in order
    each_rank: tuple[Call, ...]

    @property
    def lists(self) -> tuple[str, ...]:
        """The per-rank int lists, in argument order."""
        return tuple(a for a in self.arguments if a not in BUFFERS and a != "op")

    @property
    def uses_own_rank(self) -> bool:
        """Whether the checks or calls name this rank (an own block, a reduce rooted here)."""
        return any(c[0] == "own" for c in self.checks) or any(c.call == "reduce" for c in self.each_rank)

    @property
    def has_op(self) -> bool:
        return "op" in self.arguments

    def optional(self, argument: str) -> bool:
        return argument in self.packed


def load_variable_count(path: Path = VARIABLE_COUNT) -> tuple[VariableCount, ...]:
    with open(path, "rb") as f:
        return build_variable_count(tomllib.load(f), path.name)


def build_variable_count(raw: dict, where: str = "variable_count.toml") -> tuple[VariableCount, ...]:
    out = []
    for name, t in raw.items():
        def fail(message: str, name=name):
            raise PolicyError(f"{where}: [{name}] {message}")

        check_keys(t, KEYS, fail, required=("doc", "arguments", "blocks", "each_rank"))
        arguments = tuple(t["arguments"])
        if len(set(arguments)) != len(arguments):
            fail("an argument is named twice")
        if tuple(a for a in arguments if a in BUFFERS) != BUFFERS:
            fail(f"arguments must name send and recv, in that order (got {list(arguments)})")
        lists = [a for a in arguments if a not in BUFFERS and a != "op"]
        for a in lists:
            if not a.endswith(("_counts", "_displs")):
                fail(f"argument {a!r} is neither a buffer, op, nor a list ending in _counts or _displs")
        counts = {a for a in lists if a.endswith("_counts")}
        displs = {a for a in lists if a.endswith("_displs")}
        packed = dict(t.get("packed", {}))
        for d, c in packed.items():
            if d not in displs or c not in counts:
                fail(f"packed: {d} = {c!r} must pair a displacements list with a counts list of the arguments")
        if any(arguments.index(d) < arguments.index(a) for d in packed for a in lists if a not in packed):
            fail("packed: an optional displacements list must come after every required list (a default)")

        def block(buffer, c, d, what):
            if buffer not in BUFFERS:
                fail(f"{what}: buffer {buffer!r} is not send or recv")
            if c not in counts:
                fail(f"{what}: {c!r} is no counts list of the arguments")
            if d not in displs:
                fail(f"{what}: {d!r} is no displacements list of the arguments")

        checks = []
        for key in t:  # the file's order of own, blocks and disjoint is the checks' order
            if key == "own":
                own = t["own"]
                if not (isinstance(own, list) and len(own) == 3 and own[0] in BUFFERS and own[1] in counts
                        and own[2] in OWN_RULES):
                    fail(f"own must be [send|recv, a counts list, {' | '.join(OWN_RULES)}], not {own!r}")
                checks.append(("own", *own))
            elif key == "blocks":
                for b in t["blocks"]:
                    if not (isinstance(b, list) and len(b) == 3):
                        fail(f"blocks: {b!r} is not [buffer, counts, displs]")
                    block(*b, "blocks")
                    checks.append(("blocks", *b))
            elif key == "disjoint":
                found = [b for b in t["blocks"] if b[0] == t["disjoint"]]
                if len(found) != 1:
                    fail(f"disjoint: {t['disjoint']!r} is not the buffer of exactly one of blocks")
                checks.append(("disjoint", *found[0]))
        calls = []
        for c in t["each_rank"]:
            if not (isinstance(c, list) and len(c) == 4 and c[0] in CALLS):
                fail(f"each_rank: {c!r} is not [{' | '.join(CALLS)}, buffer, counts, displs]")
            call, buffer, c_counts, c_displs = c
            if (c_counts == "") != (c_displs == ""):
                fail(f"each_rank: {c!r}: counts and displs are both a list, or both \"\" (the whole buffer)")
            if c_counts:
                block(buffer, c_counts, c_displs, "each_rank")
            elif buffer not in BUFFERS:
                fail(f"each_rank: buffer {buffer!r} is not send or recv")
            if call == "reduce" and ("op" not in arguments or buffer != "send" or not c_counts):
                fail("each_rank: a reduce takes a block of send, and the collective an op argument")
            if call in ("send", "recv") and buffer != call:
                fail(f"each_rank: a {call} moves a block of {call}, not of {buffer}")
            calls.append(Call(call, buffer, c_counts or None, c_displs or None))
        if "op" in arguments and not any(c.call == "reduce" for c in calls):
            fail("an op argument, but no reduce among each_rank")
        out.append(VariableCount(name, t["doc"], arguments, packed,
                                 tuple(checks), tuple(calls)))
    return tuple(out)
