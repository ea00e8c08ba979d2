"""The API contract log of a library: append-only, checked in as
bindings/contract/<library>.log.json.

The log is a list of entries, one per header set in the order they joined:
{header_set, version, version_code, base, events}, where `events` turn the
surface of `base` (the previous entry; none for the first, so everything is
"added") into the surface of `header_set`. Replaying the log from empty
gives every header set's surface.

The entries are in version order, so each entry's events are what changed
from the release before it. Extending the log never changes a header set's
surface: it checks that each entry whose header set is at hand still replays
to that header set's surface (failing loudly if not), keeps entries of header
sets no longer at hand with the surface the log gives them, and adds one entry
per new header set in its version's place. A new release newer than every
logged one is appended and no entry changes; a back-filled older release is
inserted, and only the entries after it are diffed again (against it), so the
log stays in version order and every surface replays as before. Rewriting
history is `contract-log --rebuild`, on purpose.
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
    """`entries` checked against the IRs at hand, with one entry per new header set
    put in its version's place (see the module's docstring)."""
    from ..passes.merge import version_key
    by_name = {ir.name: ir for ir in irs}
    states = replay_log(entries)
    for name, logged in states.items():
        if name in by_name:
            actual = api_surface(by_name[name])
            if logged != actual:
                raise ContractLogError(_mismatch_text(name, logged, actual))
    # (version, header set, surface) of every logged and every new header set, in version order.
    releases = [(e.version, e.version_code, e.header_set, states[e.header_set]) for e in entries]
    releases += [(ir.version, ir.version_code, ir.name, api_surface(ir)) for ir in irs if ir.name not in states]
    releases.sort(key=lambda r: (version_key(r[0]), r[2]))
    kept = 0
    while kept < len(entries) and entries[kept].header_set == releases[kept][2]:
        kept += 1
    out = list(entries[:kept])
    current = states[out[-1].header_set] if out else empty_surface()
    for version, version_code, name, surface in releases[kept:]:
        out.append(LogEntry(name, version, version_code, out[-1].header_set if out else None,
                            diff_surfaces(current, surface)))
        current = surface
    return out
