"""NCCL's vocabulary beyond its headers (policy/vocabulary.toml): each ncclDataType_t
type's element size and its spellings in the libraries and tools users pass types from, stated
once, checked against the merged IR, and read by every renderer that needs a type's name or
width (the Python vocabulary module, the shim's byte counts, the EP policy's dtype names); and each
collective as nccl-tests lays it out and judges its bandwidth (load_collectives: the bench, its C
and Rust workers, the shim's bus bandwidth), its layout and received data as small integer
expressions that render_expression writes in each language."""
from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..ir.serialize import to_json
from .common import POLICY_DIR, PolicyError

VOCABULARY = POLICY_DIR / "vocabulary.toml"
DATA_TYPE_KEYS = {"name", "bytes", "aliases", "nccl_tests", "avg_tolerance", "dlpack", "typestr", "c_element",
                  "cute"}
DATA_TYPE_ENUM = "ncclDataType_t"


@dataclass(frozen=True)
class DataType:
    enumerator: str               # the canonical C enumerator (ncclFloat32)
    value: int                    # its ncclDataType_t value, from the IR
    names: tuple[str, ...]        # every C enumerator of that value, the canonical one first
    name: str                     # NumPy's / torch's name: ncclbind's canonical one
    bytes: int
    aliases: tuple[str, ...]
    nccl_tests: str | None
    dlpack: tuple[int, int]
    typestr: str | None
    c_element: str                # the C type of an element in device code (float, __nv_bfloat16)
    cute: tuple[str, ...]         # the CuTe DSL's numeric type names (Float32)
    avg_tolerance: tuple[float, float] | None = None  # with nccl_tests: (absolute, relative) for avg

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every name a user may write for it: the canonical name, the aliases, nccl-tests'."""
        return tuple(dict.fromkeys((self.name, *self.aliases, *((self.nccl_tests,) if self.nccl_tests else ()))))


def data_type_names(path: Path = VOCABULARY) -> frozenset[str]:
    """The canonical names of the data types (for a policy that names types without the nccl API at
    hand: NCCL EP's); load_vocabulary checks them against the headers."""
    with open(path, "rb") as f:
        return frozenset(t["name"] for t in tomllib.load(f).get("data_types", {}).values())


def load_vocabulary(api, path: Path = VOCABULARY) -> tuple[DataType, ...]:
    """The data types of `api` (the merged nccl LibraryAPI), in value order; none for headers
    without ncclDataType_t (a synthetic set; every NCCL release has it)."""
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    return build_vocabulary(raw, api, path.name)


def build_vocabulary(raw: dict, api, where: str = "vocabulary.toml") -> tuple[DataType, ...]:
    def fail(message: str):
        raise PolicyError(f"{where}: {message}")

    unknown = set(raw) - {"data_types", "collectives"}
    if unknown:
        fail(f"unknown table(s) {sorted(unknown)} (known: data_types, collectives)")
    enum = next((e for e in api.enums if e.name == DATA_TYPE_ENUM), None)
    if enum is None:
        return ()  # headers without data types (a synthetic set): nothing to name
    by_value: dict[int, list[str]] = {}
    for v in enum.values:
        if not v.sentinel and not v.name.startswith("ncclNum"):
            by_value.setdefault(v.value, []).append(v.name)
    value_of = {name: value for value, names in by_value.items() for name in names}
    tables = raw.get("data_types", {})
    out: dict[int, DataType] = {}
    seen: dict[str, str] = {}
    for enumerator, t in tables.items():
        where_t = f"[data_types.{enumerator}]"
        if enumerator not in value_of:
            fail(f"{where_t}: {enumerator} is no {DATA_TYPE_ENUM} enumerator of the headers")
        value = value_of[enumerator]
        if value in out:
            fail(f"{where_t}: {enumerator} is the same type as {out[value].enumerator} (value {value})")
        keys = set(t)
        if keys - DATA_TYPE_KEYS:
            fail(f"{where_t}: unknown key(s) {sorted(keys - DATA_TYPE_KEYS)} (known: {sorted(DATA_TYPE_KEYS)})")
        for key in ("name", "bytes", "aliases", "dlpack", "c_element", "cute"):
            if key not in t:
                fail(f"{where_t}: {key} is required")
        if type(t["bytes"]) is not int or t["bytes"] <= 0:
            fail(f"{where_t}: bytes must be an int > 0, not {t['bytes']!r}")
        dlpack = t["dlpack"]
        if not (isinstance(dlpack, list) and len(dlpack) == 2 and all(type(x) is int and x >= 0 for x in dlpack)):
            fail(f"{where_t}: dlpack must be [type code, bits], not {dlpack!r}")
        if dlpack[1] != 8 * t["bytes"]:
            fail(f"{where_t}: dlpack's {dlpack[1]} bits are not bytes = {t['bytes']}")
        names = [t["name"], *t["aliases"]] + ([t["nccl_tests"]] if "nccl_tests" in t else [])
        for name in names:
            if not isinstance(name, str) or not name:
                fail(f"{where_t}: a name must be a non-empty string, not {name!r}")
            if seen.get(name, enumerator) != enumerator:
                fail(f"{where_t}: {name!r} already names {seen[name]}")
            seen[name] = enumerator
        if not isinstance(t["c_element"], str) or not t["c_element"]:
            fail(f"{where_t}: c_element must be a C type name, not {t['c_element']!r}")
        if not (isinstance(t["cute"], list) and all(isinstance(c, str) and c for c in t["cute"])):
            fail(f"{where_t}: cute must be a list of the CuTe DSL's type names, not {t['cute']!r}")
        for kind, name in [("c_element", t["c_element"])] + [("cute", c) for c in t["cute"]]:
            if seen.get((kind, name), enumerator) != enumerator:
                fail(f"{where_t}: {kind} {name!r} already names {seen[(kind, name)]}")
            seen[(kind, name)] = enumerator
        tolerance = t.get("avg_tolerance")
        if ("nccl_tests" in t) != (tolerance is not None):
            fail(f"{where_t}: avg_tolerance goes with nccl_tests (the bench checks avg in the types it runs)")
        if tolerance is not None and not (isinstance(tolerance, list) and len(tolerance) == 2 and all(
                type(x) in (int, float) and x >= 0 for x in tolerance)):
            fail(f"{where_t}: avg_tolerance must be [absolute, relative], two numbers >= 0, not {tolerance!r}")
        names_of_value = by_value[value]
        out[value] = DataType(enumerator, value, (enumerator, *(n for n in names_of_value if n != enumerator)),
                              t["name"], t["bytes"], tuple(t["aliases"]), t.get("nccl_tests"), tuple(dlpack),
                              t.get("typestr"), t["c_element"], tuple(t["cute"]),
                              None if tolerance is None else (float(tolerance[0]), float(tolerance[1])))
    missing = [names[0] for value, names in sorted(by_value.items()) if value not in out]
    if missing:
        fail(f"no [data_types] entry for {', '.join(missing)} (a data type of the headers): add one")
    _check_device_elements(out.values(), api, fail)
    return tuple(out[value] for value in sorted(out))


def _check_device_elements(types, api, fail) -> None:
    """Where the headers have a device API: each type's c_element is an element type of its per-type
    functions, and each element type of those (a pointer parameter beside a `count`) is a type's."""
    families: dict[str, list[list]] = {}  # family (the name less its _TYPE) -> each member's pointees
    for fn in to_json(getattr(api, "device_functions", None) or []):
        params = fn.get("params", ())
        if any(p["name"] == "count" for p in params) and "_" in fn["name"]:
            families.setdefault(fn["name"].rsplit("_", 1)[0], []).append(
                [p["type"]["pointee"].get("name") if p["type"]["kind"] == "pointer"
                 and p["type"]["pointee"]["kind"] != "record" else None for p in params])
    elements = set()
    for members in families.values():
        # an element parameter is one whose type changes with the member (a `char *` scratch
        # buffer that every member takes alike, ncclIrLsaCopyTma_*'s smemPtr, is none)
        for position in zip(*members):
            if len(members) == 1 or len(set(position)) > 1:
                elements.update(position)
    elements.discard(None)
    if not elements:
        return  # no device API in these headers (before NCCL 2.28, or a synthetic set)
    named = {t.c_element: t.enumerator for t in types}
    for t in types:
        if t.c_element not in elements:
            fail(f"[data_types.{t.enumerator}]: c_element {t.c_element!r} is no element type of the device API's "
                 f"per-type functions (those are {', '.join(sorted(elements))})")
    unnamed = sorted(elements - set(named) - {"size_t", "void"})
    if unnamed:
        fail(f"the device API's per-type functions take {', '.join(unnamed)}, which no [data_types] entry's "
             "c_element names: add it to the type's entry")


# ---- [collectives]: nccl-tests' layouts, received data and bus factors --------------------------

COLLECTIVE_KEYS = {"method", "nccl_tests", "op", "root", "in_place_checked", "bus_factor", "count", "send", "recv",
                   "send_in_place", "recv_in_place", "received", "root_only"}
LAYOUT_KEYS = ("count", "send", "recv", "send_in_place", "recv_in_place")
BUS_FACTORS = ("2(n-1)/n", "(n-1)/n", "1")
LAYOUT_NAMES = frozenset({"total", "per", "n"})
RECEIVED_NAMES = frozenset({"i", "per", "n", "rank"})  # and root, for a collective with one
RECEIVED_CALLS = {"value": 2, "reduced": 1}
_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "/", ast.Div: "/", ast.Mod: "%"}


@dataclass(frozen=True)
class Collective:
    name: str                     # ncclbind's method name (all_reduce)
    method: str | None            # the nccl.toml method the shim judges by bus_factor
    nccl_tests: str               # all_reduce_perf
    op: bool
    root: bool
    in_place_checked: bool
    bus_factor: str               # one of BUS_FACTORS
    layout: dict                  # LAYOUT_KEYS -> parsed expression (ast node)
    received: ast.expr
    root_only: bool

    def evaluate_layout(self, total: int, n: int) -> dict:
        """The layout's numbers at `total` elements on `n` ranks (a check and the shim's use)."""
        names = {"total": total, "n": n, "per": total // n}
        return {key: evaluate(expr, names) for key, expr in self.layout.items()}

    @property
    def whole_operation(self) -> bool:
        """The operation's bytes are n times one rank's count (all-gather, reduce-scatter,
        all-to-all): the shim's algbw counts them so, as nccl-tests' size column does."""
        at = self.evaluate_layout(12, 3)
        return max(at["send"], at["recv"]) == 3 * at["count"] != at["count"]


def _parse(text, names: frozenset, calls: dict, where: str, fail) -> ast.expr:
    """An expression of `names`, integers, + - * / % and `calls` (name -> arity), or a named failure."""
    if not isinstance(text, str):
        fail(f"{where}: an expression (a string), not {text!r}")
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        fail(f"{where}: {text!r} does not parse")

    def check(node):
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            check(node.left)
            check(node.right)
        elif isinstance(node, ast.Name):
            if node.id not in names:
                fail(f"{where}: {text!r} names {node.id!r} (names: {', '.join(sorted(names))})")
        elif isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 0:
            pass
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in calls:
            if len(node.args) != calls[node.func.id] or node.keywords:
                fail(f"{where}: {node.func.id} takes {calls[node.func.id]} argument(s)")
            for a in node.args:
                check(a)
        else:
            fail(f"{where}: {text!r}: only {', '.join(sorted(names))}, integers, + - * / %"
                 + (f" and {', '.join(f'{c}()' for c in sorted(calls))}" if calls else ""))
    check(tree)
    return tree


def evaluate(node: ast.expr, names: dict, calls: dict | None = None):
    """An expression's value (integer arithmetic; / rounds down)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.Call):
        return calls[node.func.id](*(evaluate(a, names, calls) for a in node.args))
    a, b = evaluate(node.left, names, calls), evaluate(node.right, names, calls)
    return {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
            ast.FloorDiv: lambda: a // b, ast.Div: lambda: a // b, ast.Mod: lambda: a % b}[type(node.op)]()


_PRECEDENCE = {ast.Add: 1, ast.Sub: 1, ast.Mult: 2, ast.FloorDiv: 2, ast.Div: 2, ast.Mod: 2}


def render_expression(node: ast.expr, names: dict, calls: dict, divide: str = "/") -> str:
    """An expression in a target language: `names` maps a name to its spelling there, `calls` a
    function to a format string of its arguments ("value({0}, {1})"), `divide` is the language's
    integer division. C, Rust and Python rank + - * / % alike (left to right within a level), so
    an operand is parenthesised only where that order needs it."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.Call):
        return calls[node.func.id].format(*(render_expression(a, names, calls, divide) for a in node.args))
    level = _PRECEDENCE[type(node.op)]

    def operand(child, right: bool) -> str:
        text = render_expression(child, names, calls, divide)
        inner = _PRECEDENCE.get(type(child.op)) if isinstance(child, ast.BinOp) else None
        return f"({text})" if inner is not None and (inner < level or (right and inner == level)) else text
    op = divide if type(node.op) in (ast.FloorDiv, ast.Div) else _OPERATORS[type(node.op)]
    return f"{operand(node.left, False)} {op} {operand(node.right, True)}"


def load_collectives(path: Path = VOCABULARY) -> tuple[Collective, ...]:
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    return build_collectives(raw, path.name)


def build_collectives(raw: dict, where: str = "vocabulary.toml") -> tuple[Collective, ...]:
    def fail(message: str):
        raise PolicyError(f"{where}: {message}")

    out = []
    for name, t in raw.get("collectives", {}).items():
        at = f"[collectives.{name}]"
        unknown = set(t) - COLLECTIVE_KEYS
        if unknown:
            fail(f"{at}: unknown key(s) {sorted(unknown)} (known: {sorted(COLLECTIVE_KEYS)})")
        missing = sorted(COLLECTIVE_KEYS - {"method", "root_only"} - set(t))
        if missing:
            fail(f"{at}: {', '.join(missing)} required")
        for key in ("op", "root", "in_place_checked", "root_only"):
            if type(t.get(key, False)) is not bool:
                fail(f"{at}: {key} must be true or false, not {t[key]!r}")
        if t["bus_factor"] not in BUS_FACTORS:
            fail(f"{at}: bus_factor must be one of {', '.join(BUS_FACTORS)}, not {t['bus_factor']!r}")
        if t.get("root_only") and not t["root"]:
            fail(f"{at}: root_only needs root = true")
        layout = {key: _parse(t[key], LAYOUT_NAMES, {}, f"{at} {key}", fail) for key in LAYOUT_KEYS}
        received = _parse(t["received"], RECEIVED_NAMES | ({"root"} if t["root"] else set()), RECEIVED_CALLS,
                          f"{at} received", fail)
        collective = Collective(name, t.get("method"), t["nccl_tests"], t["op"], t["root"], t["in_place_checked"],
                                t["bus_factor"], layout, received, t.get("root_only", False))
        for total, n in ((12, 3), (8, 1), (0, 2)):
            sizes = collective.evaluate_layout(total, n)
            if sizes["count"] > max(sizes["send"], sizes["recv"]):
                fail(f"{at}: count {sizes['count']} exceeds both buffers at total={total}, n={n}")
        out.append(collective)
    return tuple(out)
