"""The API contract log of a library: append-only, checked in as
bindings/contract/<library>.log.json.

The log is a list of entries, one per header set in the order they joined:
{header_set, version, version_code, base, events}, where `events` turn the
surface of `base` (the previous entry; none for the first, so everything is
"added") into the surface of `header_set`. Replaying the log from empty
gives every header set's surface.

Extending the log never rewrites an entry: it checks that each entry whose
header set is at hand still replays to that header set's surface (failing
loudly if not), keeps entries of header sets no longer at hand as they are,
and appends one entry per new header set, diffed against the replayed state
of the last entry. Rewriting history is `contract-log --rebuild`, on purpose.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from .describe import grouped
from .diff import diff_surfaces, replay
from .events import Event, event_from_json
from .surface import api_surface, empty_surface
from ..ir import HeaderSetIR

LOG_DIR = "bindings/contract"
FORMAT = "ncclbind API contract log, v1"
ABOUT = ("Append-only. Written by `python -m generator generate` (generator/contract/log.py); "
         "replaying the entries in order gives each header set's API surface. Do not edit.")


def log_path(library: str) -> str:
    return f"{LOG_DIR}/{library}.log.json"


class ContractLogError(SystemExit):
    """The checked-in log no longer describes a header set it covers."""


@dataclass
class LogEntry:
    header_set: str
    version: str
    version_code: int
    base: str | None      # the header set of the previous entry
    events: list[Event]

    def to_json(self) -> dict:
        return {"header_set": self.header_set, "version": self.version, "version_code": self.version_code,
                "base": self.base, "events": [e.to_json() for e in self.events]}

    @classmethod
    def from_json(cls, raw: dict) -> "LogEntry":
        keys = {"header_set", "version", "version_code", "base", "events"}
        if set(raw) != keys:
            raise ValueError(f"log entry: expected keys {sorted(keys)}, got {sorted(raw)}")
        return cls(raw["header_set"], raw["version"], raw["version_code"], raw["base"],
                   [event_from_json(e) for e in raw["events"]])


def entry_text(entry: LogEntry) -> str:
    """An entry as it is written in the log: one event per line."""
    head = json.dumps({k: v for k, v in entry.to_json().items() if k != "events"}, indent=1)[:-2]
    lines = ",\n".join("    " + json.dumps(e.to_json()) for e in entry.events)
    body = "\n" + lines + "\n   " if lines else ""
    return "  " + head.replace("\n", "\n  ") + f',\n   "events": [{body}]\n  }}'


def log_text(library: str, entries: list[LogEntry]) -> str:
    body = ",\n".join(entry_text(e) for e in entries)
    return (f'{{\n "format": {json.dumps(FORMAT)},\n "about": {json.dumps(ABOUT)},\n'
            f' "library": {json.dumps(library)},\n "entries": [\n{body}\n ]\n}}\n')


def parse_log(text: str) -> tuple[str, list[LogEntry]]:
    raw = json.loads(text)
    if raw.get("format") != FORMAT:
        raise ValueError(f"not a contract log ({FORMAT!r}): format is {raw.get('format')!r}")
    return raw["library"], [LogEntry.from_json(e) for e in raw["entries"]]


def replay_log(entries: list[LogEntry]) -> dict[str, dict]:
    """header set -> its surface, replaying every entry in order."""
    states, current = {}, empty_surface()
    for entry in entries:
        if entry.base != (next(reversed(states)) if states else None):
            raise ValueError(f"log entry {entry.header_set}: base {entry.base} is not the previous entry")
        current = replay(entry.events, current)
        states[entry.header_set] = current
    return states


def _mismatch_text(header_set: str, logged: dict, actual: dict) -> str:
    lines = [f"{header_set}: the contract log no longer matches this header set's API surface.",
             "What the log says -> what the IR says now:"]
    for title, items in grouped(diff_surfaces(logged, actual)):
        lines.append(f"  {title}")
        lines += [f"    {line}" for line in items[:20]] + (["    ..."] if len(items) > 20 else [])
    lines.append("The log is append-only. If the extraction changed on purpose, rewrite it with "
                 "`python -m generator contract-log --rebuild` and say why in the commit.")
    return "\n".join(lines)


def extend_log(entries: list[LogEntry], irs: list[HeaderSetIR]) -> list[LogEntry]:
    """`entries` checked against the IRs at hand, plus one entry per new header set
    (oldest version first)."""
    from ..passes.merge import version_key
    by_name = {ir.name: ir for ir in irs}
    states = replay_log(entries)
    for name, logged in states.items():
        if name in by_name:
            actual = api_surface(by_name[name])
            if logged != actual:
                raise ContractLogError(_mismatch_text(name, logged, actual))
    out = list(entries)
    current = next(reversed(states.values())) if states else empty_surface()
    for ir in sorted((ir for ir in irs if ir.name not in states), key=lambda ir: version_key(ir.version)):
        surface = api_surface(ir)
        out.append(LogEntry(ir.name, ir.version, ir.version_code, out[-1].header_set if out else None,
                            diff_surfaces(current, surface)))
        current = surface
    return out
