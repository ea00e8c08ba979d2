"""What every policy loader shares: the policy folder, the error a bad entry raises, and the
check of a table's keys."""
from __future__ import annotations

import os
from pathlib import Path

# The binding policy as data (the TOML files binding maintainers edit), at the repository's top:
# policy/; this package holds what reads and checks it.
POLICY_DIR = Path(os.path.abspath(__file__)).parent.parent.parent / "policy"


class PolicyError(Exception):
    """A policy entry that does not fit the headers or the roles; names the file and entry."""


def check_keys(table, known, fail, required=()) -> None:
    """A policy table's keys: a table, none unknown, every required one there; fail(message)
    otherwise (it raises, naming the file and the entry)."""
    if not isinstance(table, dict):
        fail("must be a table")
    unknown = set(table) - set(known)
    if unknown:
        fail(f"unknown key(s) {sorted(unknown)} (known: {sorted(known)})")
    for key in required:
        if key not in table:
            fail(f"missing key {key!r}")
