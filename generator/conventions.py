"""Per-symbol conventions (conventions.toml) as one object."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Conventions:
    external_types: dict
    blocking: tuple[str, ...]
    sentinels: frozenset
    initializers: dict
    directions: dict
    rename: dict
    ownership: dict


def load_conventions(path: Path | None = None) -> Conventions:
    path = path or Path(__file__).with_name("conventions.toml")
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    known = {"external_types", "blocking", "sentinels", "initializers", "directions", "rename", "ownership"}
    if set(raw) - known:
        raise ValueError(f"{path}: unknown keys {sorted(set(raw) - known)}")
    for name, spec in raw.get("external_types", {}).items():
        # A top-level key written after the [external_types] header lands here: fail, don't drop it.
        if not isinstance(spec, dict) or set(spec) != {"kind", "c", "size"}:
            raise ValueError(f"{path}: [external_types] {name} must be {{ kind, c, size }}, got {spec!r}")
    return Conventions(raw.get("external_types", {}), tuple(raw.get("blocking", [])),
                       frozenset(raw.get("sentinels", [])), raw.get("initializers", {}),
                       raw.get("directions", {}), raw.get("rename", {}), raw.get("ownership", {}))
