"""policy/vocabulary.toml, NCCL's data types stated once: the real file against the real
merged IR (every ncclDataType_t value has one entry, every consumer's table is read from it), and
each kind of mistake in a synthetic one stopping the run with the file, the entry and what is wrong."""
import json
import os
import re
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

REPO = Path(os.path.abspath(__file__)).parent.parent.parent
sys.path.insert(0, str(REPO))

import pytest  # noqa: E402

from generator.ir.enum import EnumValue  # noqa: E402
from generator.policy.common import PolicyError  # noqa: E402
from generator.policy.vocabulary import (VOCABULARY, build_collectives, build_vocabulary, evaluate,  # noqa: E402
                                       load_collectives, load_vocabulary, render_expression)

MERGED = REPO / "bindings" / "ir" / "api" / "nccl.json"


def api_of(values, device_functions=()):
    return SimpleNamespace(enums=[SimpleNamespace(name="ncclDataType_t", values=values)],
                           device_functions=list(device_functions))


def real_api():
    """The merged IR's ncclDataType_t and device functions (bindings/ir/api/nccl.json), as
    load_vocabulary reads them."""
    merged = json.loads(MERGED.read_text())
    enum = next(e for e in merged["enums"] if e["name"] == "ncclDataType_t")
    return api_of([EnumValue(v["name"], v["value"], sentinel=v.get("sentinel", False)) for v in enum["values"]],
                  merged.get("device_functions", ()))


def device_function(name, element):
    """A per-type device function as the IR has it: (pointer to element, count)."""
    return {"name": name, "params": [
        {"name": "src", "type": {"kind": "pointer", "pointee": {"kind": "int", "name": element}}},
        {"name": "count", "type": {"kind": "int", "name": "size_t"}}]}


def test_every_data_type_of_the_headers_has_one_entry():
    api = real_api()
    types = load_vocabulary(api)
    values = {v.value for v in api.enums[0].values if not v.sentinel and not v.name.startswith("ncclNum")}
    assert [t.value for t in types] == sorted(values)
    named = {n for t in types for n in t.names}
    assert named == {v.name for v in api.enums[0].values if v.value in values}


def test_the_python_table_is_the_file():
    import runpy
    module = REPO / "bindings" / "python" / "ncclbind" / "_generated" / "vocabulary.py"
    DATA_TYPES = runpy.run_path(str(module))["DATA_TYPES"]  # data only: no package import
    types = load_vocabulary(real_api())
    assert DATA_TYPES == tuple((t.value, t.name, t.bytes, t.aliases, t.nccl_tests, t.dlpack, t.typestr)
                               for t in types)
    DEVICE_ELEMENTS = runpy.run_path(str(module))["DEVICE_ELEMENTS"]
    assert DEVICE_ELEMENTS == tuple((t.name, t.c_element, t.cute) for t in types)


def test_every_element_type_of_the_device_api_is_named():
    """Each per-type device function's element type is one type's c_element, and each c_element is one
    of them (the real merged IR: what ncclbind.device's Numba and CuTe front ends look up). A
    per-type family is the functions named <family>_<suffix>; its element types are the pointees
    of the parameters whose pointee differs between its members (a scratch `char *` that every
    member takes alike, as ncclIrLsaCopyTma's shared memory, is not an element type)."""
    api = real_api()
    families: dict = {}
    for fn in api.device_functions:
        if "_" in fn["name"] and any(p["name"] == "count" for p in fn.get("params", ())):
            families.setdefault(fn["name"].rsplit("_", 1)[0], []).append(fn)
    elements = set()
    for members in families.values():
        for position in range(min(len(m.get("params", ())) for m in members)):
            pointees = {m["params"][position]["type"].get("pointee", {}).get("name") for m in members
                        if m["params"][position]["type"]["kind"] == "pointer"}
            if len(members) > 1 and len(pointees) > 1:
                elements |= pointees
    elements -= {None}
    assert elements, "the merged IR has no per-type device functions"
    assert {t.c_element for t in load_vocabulary(api)} == elements


TWO = [EnumValue("ncclInt8", 0), EnumValue("ncclChar", 0), EnumValue("ncclFloat32", 1),
       EnumValue("ncclNumTypes", 2, sentinel=True)]
GOOD = {"data_types": {"ncclInt8": {"name": "int8", "bytes": 1, "aliases": ["char"], "dlpack": [0, 8],
                                    "c_element": "int8_t", "cute": ["Int8"]},
                       "ncclFloat32": {"name": "float32", "bytes": 4, "aliases": [], "dlpack": [2, 32],
                                       "c_element": "float", "cute": ["Float32"]}}}
DEVICE = [device_function("ncclLsaReduceSum_I8", "int8_t"), device_function("ncclLsaReduceSum_F32", "float")]


def broken(edit):
    raw = json.loads(json.dumps(GOOD))
    edit(raw["data_types"])
    return raw


def test_a_good_file_reads():
    types = build_vocabulary(GOOD, api_of(TWO))
    assert [(t.enumerator, t.names, t.bytes) for t in types] == [("ncclInt8", ("ncclInt8", "ncclChar"), 1),
                                                                   ("ncclFloat32", ("ncclFloat32",), 4)]


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.pop("ncclFloat32"), "no [data_types] entry for ncclFloat32"),
    (lambda d: d.update(ncclFloat99={"name": "x", "bytes": 1, "aliases": [], "dlpack": [0, 8], "c_element": "x",
                                     "cute": []}),
     "ncclFloat99 is no ncclDataType_t enumerator"),
    (lambda d: d.update(ncclChar={"name": "c", "bytes": 1, "aliases": [], "dlpack": [0, 8], "c_element": "c",
                                  "cute": []}),
     "ncclChar is the same type as ncclInt8"),
    (lambda d: d["ncclInt8"].update(bytes=0), "bytes must be an int > 0"),
    (lambda d: d["ncclInt8"].update(dlpack=[0, 16]), "dlpack's 16 bits are not bytes = 1"),
    (lambda d: d["ncclFloat32"].update(aliases=["char"]), "'char' already names ncclInt8"),
    (lambda d: d["ncclInt8"].update(size=1), "unknown key(s) ['size']"),
    (lambda d: d["ncclInt8"].pop("name"), "[data_types.ncclInt8]: name is required"),
    (lambda d: d["ncclInt8"].pop("c_element"), "[data_types.ncclInt8]: c_element is required"),
    (lambda d: d["ncclFloat32"].update(c_element="int8_t"), "c_element 'int8_t' already names ncclInt8"),
    (lambda d: d["ncclFloat32"].update(cute=["Int8"]), "cute 'Int8' already names ncclInt8"),
    (lambda d: d["ncclFloat32"].update(cute="Float32"), "cute must be a list"),
    (lambda d: d["ncclFloat32"].update(c_element="flaot"), "c_element 'flaot' is no element type of the device API"),
    (lambda d: d["ncclFloat32"].update(nccl_tests="float"), "avg_tolerance goes with nccl_tests"),
    (lambda d: d["ncclFloat32"].update(avg_tolerance=[0, 1e-6]), "avg_tolerance goes with nccl_tests"),
    (lambda d: d["ncclFloat32"].update(nccl_tests="float", avg_tolerance=[1e-6]),
     "avg_tolerance must be [absolute, relative]"),
    (lambda d: d["ncclFloat32"].update(nccl_tests="float", avg_tolerance=[0, -1]),
     "avg_tolerance must be [absolute, relative]"),
])
def test_each_mistake_is_named(edit, message):
    with pytest.raises(PolicyError) as error:
        build_vocabulary(broken(edit), api_of(TWO, DEVICE))
    assert message in str(error.value)
    assert str(error.value).startswith("vocabulary.toml: ")


def test_a_device_element_type_no_entry_names_stops_the_run():
    with pytest.raises(PolicyError) as error:
        build_vocabulary(GOOD, api_of(TWO, DEVICE + [device_function("ncclLsaReduceSum_F64", "double")]))
    assert "per-type functions take double, which no [data_types] entry's c_element names" in str(error.value)


def test_headers_without_a_device_api_check_no_element_type():
    assert [t.c_element for t in build_vocabulary(GOOD, api_of(TWO))] == ["int8_t", "float"]


def test_the_file_has_no_table_it_does_not_read():
    assert set(tomllib.loads(VOCABULARY.read_text())) == {"data_types", "collectives"}


def test_headers_without_data_types_have_none():
    """A synthetic header set (the golden and malformed headers) has no ncclDataType_t: nothing is
    rendered from the vocabulary for it, and nothing fails."""
    assert build_vocabulary(GOOD, SimpleNamespace(enums=[])) == ()


# ---- [collectives]: nccl-tests' layouts, received data and bus factors, stated once ----------

def simulate(name: str, n: int, per_rank: list[list[int]], root: int) -> list[list[int] | None]:
    """What each rank receives from `name`, by NCCL's definition of it, with sum as the op:
    an independent model the file's expressions are held to."""
    count = len(per_rank[0]) // (n if name in ("reduce_scatter", "all_to_all") else 1)
    summed = [sum(column) for column in zip(*per_rank)]
    if name == "all_reduce":
        return [summed for _ in range(n)]
    if name == "reduce":
        return [summed if r == root else None for r in range(n)]
    if name == "broadcast":
        return [per_rank[root] for _ in range(n)]
    if name == "all_gather":
        return [[x for rank in per_rank for x in rank] for _ in range(n)]
    if name == "reduce_scatter":
        return [summed[r * count:(r + 1) * count] for r in range(n)]
    if name == "all_to_all":
        return [[x for p in range(n) for x in per_rank[p][r * count:(r + 1) * count]] for r in range(n)]
    if name == "send_recv":
        return [per_rank[(r - 1) % n] for r in range(n)]
    raise AssertionError(name)


def test_each_collective_receives_what_nccl_defines():
    """The file's layout and received expressions, evaluated, give what NCCL's collective does
    (simulate) on 1 to 4 ranks, for every rank, and the shim's derived "whole operation" is the
    collectives whose size column is n x count."""
    collectives = load_collectives()
    assert {c.name for c in collectives} == {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                                             "all_to_all", "send_recv"}
    for c in collectives:
        for n in (1, 2, 3, 4):
            root = n - 1
            sizes = c.evaluate_layout(12 * n, n)
            sent = [[100 * r + j for j in range(sizes["send"])] for r in range(n)]
            want = simulate(c.name, n, sent, root)
            for rank in range(n):
                got = [evaluate(c.received, {"i": i, "per": sizes["count"], "n": n, "rank": rank, "root": root},
                                {"value": lambda r, j: sent[r][j], "reduced": lambda j: sum(s[j] for s in sent)})
                       for i in range(sizes["recv"])]
                assert (None if c.root_only and rank != root else got) == want[rank], (c.name, n, rank)
        assert c.whole_operation == (c.name in ("all_gather", "reduce_scatter", "all_to_all"))


def test_expressions_render_with_the_parentheses_order_needs():
    c = {c.name: c for c in load_collectives()}
    names = {k: k for k in ("i", "per", "n", "rank", "root")}
    calls = {"value": "v({0}, {1})", "reduced": "r({0})"}
    assert render_expression(c["all_to_all"].received, names, calls) == "v(i / per, i % per + rank * per)"
    assert render_expression(c["send_recv"].received, names, calls, "//") == "v((rank + n - 1) % n, i)"
    tree = build_collectives({"collectives": {"x": dict(COLLECTIVE, received="value(i - (per - 1), i * (per % n))")}})
    assert render_expression(tree[0].received, names, calls) == "v(i - (per - 1), i * (per % n))"


COLLECTIVE = {"nccl_tests": "x_perf", "op": True, "root": False, "in_place_checked": True, "bus_factor": "1",
              "count": "total", "send": "total", "recv": "total", "send_in_place": "0", "recv_in_place": "0",
              "received": "reduced(i)"}


@pytest.mark.parametrize("edit, message", [
    ({"colour": 1}, "unknown key(s) ['colour']"),
    ({"bus_factor": "n"}, "bus_factor must be one of"),
    ({"op": "yes"}, "op must be true or false"),
    ({"root_only": True}, "root_only needs root = true"),
    ({"count": "total + rank"}, "names 'rank'"),
    ({"count": "total ** 2"}, "only n, per, total, integers"),
    ({"count": "-1"}, "only n, per, total, integers"),
    ({"received": "value(i)"}, "value takes 2 argument(s)"),
    ({"received": "value(root, i)"}, "names 'root'"),
    ({"received": "max(i, 1)"}, "only i, n, per, rank, integers"),
    ({"count": "total * n"}, "count 36 exceeds both buffers"),
    ({"send": "total +"}, "does not parse"),
])
def test_each_collective_mistake_is_named(edit, message):
    entry = dict(COLLECTIVE)
    entry.update(edit)
    with pytest.raises(PolicyError, match=r"vocabulary.toml: \[collectives.x\].*" + re.escape(message)):
        build_collectives({"collectives": {"x": entry}})
    missing = dict(COLLECTIVE)
    del missing["received"]
    with pytest.raises(PolicyError, match="received required"):
        build_collectives({"collectives": {"x": missing}})


def test_the_programs_read_the_file():
    """The Python bench's generated table and the C and Rust workers' generated files name every
    collective of the file and every reduction op of the headers (the freshness test holds them to
    a regeneration)."""
    sys.path.insert(0, str(REPO / "bindings" / "python"))
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "bench_collectives", REPO / "bindings/python/ncclbind/bench/_generated/collectives.py")
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    names = [c.name for c in load_collectives()]
    assert list(table.COLLECTIVES) == names
    for c in load_collectives():
        for n in (1, 3):
            assert table.layout(c.name, 12 * n, n) == tuple(c.evaluate_layout(12 * n, n).values())
    red_op = next(e for e in json.loads(MERGED.read_text())["enums"] if e["name"] == "ncclRedOp_t")
    assert table.OPS == {v["name"].removeprefix("nccl").lower(): v["value"] for v in red_op["values"]
                         if not v.get("sentinel")}  # nccl-tests' -o names: sum, prod, max, min, avg
    assert table.AVG_TOLERANCE == {t.nccl_tests: t.avg_tolerance for t in load_vocabulary(real_api()) if t.nccl_tests}
    header = (REPO / "bench/cli/generated/collectives.h").read_text()
    rust = (REPO / "bench/cli/generated/collectives.rs").read_text()
    for name in names:
        assert f"NB_COLL_{name.upper()}" in header and f'"{name}" =>' in rust
