"""generator/spec/python_api.toml: ncclbind's module-level Python names that are not one NCCL
call each (nccl4py's data type and op constants, its flag enums, its enum member spellings),
resolved against the merged IR to values for templates/python/enums.py.j2. An entry whose enum or
constants the headers lack renders nothing (a synthetic header set has few); against the real
headers, //tests/conformance:nccl4py_test fails on every name that did not come out."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from . import SpecError

PATH = Path(__file__).parent / "python_api.toml"
KEYS = {"module_constants", "flag_groups", "enum_aliases"}
GROUP_KEYS = {"prefix", "exclude", "doc"}


def pascal(name: str) -> str:
    """COLL_SYMMETRIC -> CollSymmetric (nccl4py's second spelling of each flag)."""
    return "".join(word.capitalize() for word in name.split("_"))


@dataclass(frozen=True)
class FlagGroup:
    class_name: str
    doc: str
    members: tuple[tuple[str, int, str], ...]   # (name, value, C constant), then the aliases
    aliases: tuple[tuple[str, str], ...]        # (alias, member)


@dataclass(frozen=True)
class PythonApi:
    module_constants: tuple[tuple[str, str], ...] = ()   # (name, enum class) for each member
    flag_groups: tuple[FlagGroup, ...] = ()
    enum_aliases: dict[str, tuple[tuple[str, str], ...]] | None = None  # C enum -> (alias, member)


def load_python_api(api, member_names, enum_class_name, path: Path = PATH) -> PythonApi:
    """The names of python_api.toml for the merged `api` (NCCL's); member_names(enum) gives a
    generated enum's member names by C name (render/python.py's enum_member_names)."""
    if api.library != "nccl" or not path.exists():
        return PythonApi()
    raw = tomllib.loads(path.read_text())

    def fail(where, message):
        raise SpecError(f"{path.name}:[{where}]: {message}")

    for key in set(raw) - KEYS:
        fail(key, f"unknown table (known: {sorted(KEYS)})")
    enums = {e.name: e for e in api.enums}
    constants = [(name, enum_class_name(e.name)) for e in map(enums.get, raw.get("module_constants", {}).get("enums", ()))
                 if e for name in _names(e, member_names)]
    groups = []
    for class_name, table in raw.get("flag_groups", {}).items():
        unknown = set(table) - GROUP_KEYS
        if unknown:
            fail(f"flag_groups.{class_name}", f"unknown key(s) {sorted(unknown)}")
        prefix, exclude = table["prefix"], set(table.get("exclude", ()))
        members = tuple((c.name[len(prefix):], c.value, c.name) for c in api.constants
                        if c.name.startswith(prefix) and c.name not in exclude and isinstance(c.value, int))
        if not members:
            continue  # headers without the group (a synthetic set): the conformance test misses the name
        aliases = tuple((pascal(n), n) for n, _, _ in members if pascal(n) != n)
        groups.append(FlagGroup(class_name, table["doc"], members, aliases))
    enum_aliases = {}
    for c_name, table in raw.get("enum_aliases", {}).items():
        if c_name not in enums:
            continue
        strip = table["strip"]
        pairs = []
        for name in _names(enums[c_name], member_names):
            if name.startswith(strip):
                short = name[len(strip):]
                pairs += [(short, name), (pascal(short), name)]
        enum_aliases[c_name] = tuple(pairs)
    return PythonApi(tuple(constants), tuple(groups), enum_aliases)


def _names(enum, member_names) -> list[str]:
    names = member_names(enum)
    return [names[v.name] for v in enum.values if not v.sentinel]
