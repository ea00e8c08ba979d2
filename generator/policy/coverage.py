"""Coverage: for every function of a merged API, how the idiomatic layers cover it, from data
only: the policy (<library>.toml: generated methods) and <library>_coverage.toml (hand-written
names, or why a function stays raw-only). `python -m generator coverage` prints it; generation
writes it as bindings/ir/coverage/<library>.json (what the tests check against the package)."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from .common import POLICY_DIR, PolicyError
from .nccl import load_policy

# The Python class or module of each policy owner (Rust: the owner's name).
PYTHON_OWNERS = {"Communicator": "Communicator", "Window": "RegisteredWindowHandle", "Param": "Param",
                 "params": "params", "dev_comm": "dev_comm"}
ENTRY_KEYS = {"python", "rust", "raw"}


@dataclass(frozen=True)
class Coverage:
    function: str
    python: str | None      # ncclbind.<python> covers it, or None
    rust: str | None        # ncclbind::<rust>, or None
    raw: str | None         # why a language (or both) has no idiomatic cover
    generated: bool         # from the policy
    pending: bool = False   # in neither the policy nor the coverage file yet (a new function)

    @property
    def line(self) -> str:
        if self.python and self.rust:
            how = "generated" if self.generated else "hand-written"
            return f"idiomatic in Python and Rust ({how}): {self.python} / {self.rust}"
        if self.python or self.rust:
            language, name = ("Python", self.python) if self.python else ("Rust", self.rust)
            return f"idiomatic in {language} only: {name}; raw otherwise: {self.raw}"
        return f"raw only: {self.raw}"


def pending_reason(fn) -> str:
    return (f"new in {fn.since}: not yet in the policy or the coverage file (raw only until one of them "
            f"names it)")


def load_coverage(api, path: Path | None = None) -> list[Coverage]:
    """One Coverage per function of `api`, in the API's order. A function in neither the policy
    nor the coverage file (a release added one) is raw only, with the reason pending_reason
    gives (`pending` lists them, and generation prints one warning line); a function in both,
    or a coverage entry without a function, stops the run."""
    path = path or POLICY_DIR / f"{api.library}_coverage.toml"
    policy = load_policy(api)
    generated = policy.generated_functions()
    with open(path, "rb") as f:
        entries = tomllib.load(f).get("functions", {})
    names = {fn.name for fn in api.functions}
    out = []
    for function, entry in entries.items():
        where = f"{path.name}:{function}"
        if function not in names:
            raise PolicyError(f"{where}: not a function of the {api.library} headers")
        if function in generated:
            raise PolicyError(f"{where}: the policy already binds it ({generated[function][0]})")
        unknown = set(entry) - ENTRY_KEYS
        if unknown:
            raise PolicyError(f"{where}: unknown key(s) {sorted(unknown)} (known: {sorted(ENTRY_KEYS)})")
        if not (entry.get("python") and entry.get("rust")) and not entry.get("raw"):
            raise PolicyError(f"{where}: a language without a name needs raw = why")
    for fn in api.functions:
        if fn.name in generated:
            python, rust = generated[fn.name]
            out.append(Coverage(fn.name, python, rust, None, True))
        elif fn.name in entries:
            e = entries[fn.name]
            out.append(Coverage(fn.name, e.get("python"), e.get("rust"), e.get("raw"), False))
        else:
            out.append(Coverage(fn.name, None, None, pending_reason(fn), False, pending=True))
    return out


def coverage_json(api) -> dict:
    return {"library": api.library,
            "functions": [{"name": c.function, "python": c.python, "rust": c.rust, "raw": c.raw,
                           "generated": c.generated, "summary": c.line} for c in load_coverage(api)]}
