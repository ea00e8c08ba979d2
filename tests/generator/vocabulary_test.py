"""generator/spec/vocabulary.toml, NCCL's data types stated once: the real file against the real
merged IR (every ncclDataType_t value has one entry, every consumer's table is read from it), and
each kind of mistake in a synthetic one stopping the run with the file, the entry and what is wrong."""
import json
import os
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

REPO = Path(os.path.abspath(__file__)).parent.parent.parent
sys.path.insert(0, str(REPO))

import pytest  # noqa: E402

from generator.ir.enum import EnumValue  # noqa: E402
from generator.spec import SpecError  # noqa: E402
from generator.spec.vocabulary import VOCABULARY, build_vocabulary, load_vocabulary  # noqa: E402

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
    of them (the real merged IR: what ncclbind.device's Numba and CuTe front ends look up)."""
    api = real_api()
    elements = {p["type"]["pointee"].get("name") for fn in api.device_functions
                if any(p["name"] == "count" for p in fn.get("params", ())) for p in fn.get("params", ())
                if p["type"]["kind"] == "pointer" and p["type"]["pointee"]["kind"] != "record"} - {"size_t", "void", None}
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
])
def test_each_mistake_is_named(edit, message):
    with pytest.raises(SpecError) as error:
        build_vocabulary(broken(edit), api_of(TWO, DEVICE))
    assert message in str(error.value)
    assert str(error.value).startswith("vocabulary.toml: ")


def test_a_device_element_type_no_entry_names_stops_the_run():
    with pytest.raises(SpecError) as error:
        build_vocabulary(GOOD, api_of(TWO, DEVICE + [device_function("ncclLsaReduceSum_F64", "double")]))
    assert "per-type functions take double, which no [data_types] entry's c_element names" in str(error.value)


def test_headers_without_a_device_api_check_no_element_type():
    assert [t.c_element for t in build_vocabulary(GOOD, api_of(TWO))] == ["int8_t", "float"]


def test_the_file_has_no_table_it_does_not_read():
    assert set(tomllib.loads(VOCABULARY.read_text())) == {"data_types"}


def test_headers_without_data_types_have_none():
    """A synthetic header set (the golden and malformed headers) has no ncclDataType_t: nothing is
    rendered from the vocabulary for it, and nothing fails."""
    assert build_vocabulary(GOOD, SimpleNamespace(enums=[])) == ()
