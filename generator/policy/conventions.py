"""The loader of policy/conventions.toml: per-symbol conventions as one object (passes/policy.py
applies its binding policy to an extracted IR).

Two kinds of data live in conventions.toml. Header facts the extraction needs
(which outside types NCCL uses and how big they are, which record an initializer
macro fills) are part of the cached IR's digest. Binding policy (blocking calls,
sentinels, parameter directions, snake_case names, ownership) is applied after the
cache by passes/policy.py's apply_conventions, so editing it never parses a header again.
"""
from __future__ import annotations

import tomllib
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from .common import POLICY_DIR


@dataclass(frozen=True)
class Conventions:
    external_types: dict
    blocking: tuple[str, ...]
    sentinels: frozenset
    initializers: dict
    directions: dict
    rename: dict
    ownership: dict
    addresses: frozenset = frozenset()  # "function.param": an address only, never a buffer or record
    non_null: frozenset = frozenset()   # "function.param": NULL crashes the library
    throws: tuple[str, ...] = ()        # functions whose C++ library may throw out of them
    result_descriptions: dict = dataclasses.field(default_factory=dict)  # ncclResult_t value -> words

    def header_facts(self) -> dict:
        """The part of conventions that passes/extract.py and passes/macros.py read."""
        return {"external_types": self.external_types, "initializers": self.initializers}


def load_conventions(path: Path | None = None) -> Conventions:
    path = path or POLICY_DIR / "conventions.toml"
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    known = {"external_types", "blocking", "sentinels", "initializers", "directions", "rename", "ownership",
             "addresses", "non_null", "throws", "result_descriptions"}
    if set(raw) - known:
        raise ValueError(f"{path}: unknown keys {sorted(set(raw) - known)}")
    for name, policy in raw.get("external_types", {}).items():
        # A top-level key written after the [external_types] header lands here: fail, don't drop it.
        if not isinstance(policy, dict) or set(policy) != {"kind", "c", "size"}:
            raise ValueError(f"{path}: [external_types] {name} must be {{ kind, c, size }}, got {policy!r}")
    return Conventions(raw.get("external_types", {}), tuple(raw.get("blocking", [])),
                       frozenset(raw.get("sentinels", [])), raw.get("initializers", {}),
                       raw.get("directions", {}), raw.get("rename", {}), raw.get("ownership", {}),
                       frozenset(raw.get("addresses", [])), frozenset(raw.get("non_null", [])),
                       tuple(raw.get("throws", [])), dict(raw.get("result_descriptions", {})))
