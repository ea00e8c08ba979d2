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


def api_of(values):
    return SimpleNamespace(enums=[SimpleNamespace(name="ncclDataType_t", values=values)])


def real_api():
    """The merged IR's ncclDataType_t (bindings/ir/api/nccl.json), as load_vocabulary reads it."""
    enum = next(e for e in json.loads(MERGED.read_text())["enums"] if e["name"] == "ncclDataType_t")
    return api_of([EnumValue(v["name"], v["value"], sentinel=v.get("sentinel", False)) for v in enum["values"]])


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


TWO = [EnumValue("ncclInt8", 0), EnumValue("ncclChar", 0), EnumValue("ncclFloat32", 1),
       EnumValue("ncclNumTypes", 2, sentinel=True)]
GOOD = {"data_types": {"ncclInt8": {"name": "int8", "bytes": 1, "aliases": ["char"], "dlpack": [0, 8]},
                       "ncclFloat32": {"name": "float32", "bytes": 4, "aliases": [], "dlpack": [2, 32]}}}


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
    (lambda d: d.update(ncclFloat99={"name": "x", "bytes": 1, "aliases": [], "dlpack": [0, 8]}),
     "ncclFloat99 is no ncclDataType_t enumerator"),
    (lambda d: d.update(ncclChar={"name": "c", "bytes": 1, "aliases": [], "dlpack": [0, 8]}),
     "ncclChar is the same type as ncclInt8"),
    (lambda d: d["ncclInt8"].update(bytes=0), "bytes must be an int > 0"),
    (lambda d: d["ncclInt8"].update(dlpack=[0, 16]), "dlpack's 16 bits are not bytes = 1"),
    (lambda d: d["ncclFloat32"].update(aliases=["char"]), "'char' already names ncclInt8"),
    (lambda d: d["ncclInt8"].update(size=1), "unknown key(s) ['size']"),
    (lambda d: d["ncclInt8"].pop("name"), "[data_types.ncclInt8]: name is required"),
])
def test_each_mistake_is_named(edit, message):
    with pytest.raises(SpecError) as error:
        build_vocabulary(broken(edit), api_of(TWO))
    assert message in str(error.value)
    assert str(error.value).startswith("vocabulary.toml: ")


def test_the_file_has_no_table_it_does_not_read():
    assert set(tomllib.loads(VOCABULARY.read_text())) == {"data_types"}


def test_headers_without_data_types_have_none():
    """A synthetic header set (the golden and malformed headers) has no ncclDataType_t: nothing is
    rendered from the vocabulary for it, and nothing fails."""
    assert build_vocabulary(GOOD, SimpleNamespace(enums=[])) == ()
