"""policy/python_api.toml's [records] tables as the generator reads them: nccl4py's
names over the IR's structs, and each mistake (a field no layout has) stopping the run with the
file, the table and the field; a struct the headers lack renders nothing (a synthetic set)."""
import os
import sys
from pathlib import Path
from types import SimpleNamespace

REPO = Path(os.path.abspath(__file__)).parent.parent.parent
sys.path.insert(0, str(REPO))

import pytest  # noqa: E402

from generator.ir.record import Field, Record  # noqa: E402
from generator.ir.types import TypeRef  # noqa: E402
from generator.policy.common import PolicyError  # noqa: E402
from generator.policy.python_api import load_python_api, snake  # noqa: E402

INT = TypeRef("int", "int", signed=True, size=4)


def variant(versions, *names, since=None):
    fields = [Field(n, INT, 4 * i, since=(since or {}).get(n, versions[0])) for i, n in enumerate(names)]
    return SimpleNamespace(versions=versions, record=Record("ncclThing_t", "struct", 4 * len(names), 4, fields,
                                                            "nccl.h", 1))


API = SimpleNamespace(library="nccl", enums=[], constants=[], typedefs=[], record_variants={
    "ncclThing_t": [variant(["1.0.0"], "minCTAs", "lsaLLA2ABlockCount"),
                    variant(["1.1.0"], "minCTAs", "lsaLLA2ABlockCount", "nRanks", since={"nRanks": "1.1.0"})]})


def load(tmp_path, text, api=API):
    path = tmp_path / "python_api.toml"
    path.write_text(text)
    return load_python_api(api, lambda e: {}, lambda name: name, path).records


def test_names_come_from_the_table_where_snake_case_differs(tmp_path):
    assert snake("minCTAs") == "min_ct_as" and snake("nRanks") == "n_ranks"  # why the table exists
    (thing,) = load(tmp_path, '[records.ncclThing_t]\nclass = "Thing"\nkind = "value"\ndoc = "A thing."\n'
                              'names = { minCTAs = "min_ctas", lsaLLA2ABlockCount = "lsa_ll_a2a_block_count" }\n')
    assert [(f.name, f.c_name, f.since, f.has_default) for f in thing.fields] == [
        ("min_ctas", "minCTAs", "1.0.0", False), ("lsa_ll_a2a_block_count", "lsaLLA2ABlockCount", "1.0.0", False),
        ("n_ranks", "nRanks", "1.1.0", True)]  # a value: the oldest layout's fields are required


@pytest.mark.parametrize("key", ["names = { noSuchField = \"x\" }", "hide = [\"noSuchField\"]",
                                 "defaults = { noSuchField = 1 }", "on_off = [\"noSuchField\"]",
                                 "docs = { noSuchField = \"what it does\" }"])
def test_a_field_no_layout_has_stops_the_generator(tmp_path, key):
    with pytest.raises(PolicyError) as info:
        load(tmp_path, f'[records.ncclThing_t]\nclass = "Thing"\nkind = "input"\ndoc = "A thing."\n{key}\n')
    message = str(info.value)
    assert "python_api.toml:[records.ncclThing_t]" in message and "noSuchField" in message
    assert "minCTAs" in message  # the struct's fields, to pick from


def test_other_mistakes_stop_the_generator(tmp_path):
    for body, expected in (('kind = "record"', "kind"), ('kind = "input"\ncolour = 1', "unknown key"),
                           ('kind = "value"\ntypes = { nRanks = "NoSuchEnum" }', "NoSuchEnum"),
                           ('kind = "value"\nnames = { nRanks = "min_ct_as" }', "used twice"),
                           ('kind = "input"\ndocs = { nRanks = " " }', "nRanks's must be a non-empty string")):
        with pytest.raises(PolicyError, match=expected):
            load(tmp_path, f'[records.ncclThing_t]\nclass = "Thing"\ndoc = "A thing."\n{body}\n')


def test_a_struct_the_headers_lack_renders_nothing(tmp_path):
    assert load(tmp_path, '[records.ncclOther_t]\nclass = "Other"\nkind = "view"\ndoc = "Not here."\n') == ()


def test_on_off_and_docs_reach_the_fields(tmp_path):
    """What Python's NCCLConfig and the Rust crate's CommConfig (bool switches) both render from."""
    (thing,) = load(tmp_path, '[records.ncclThing_t]\nclass = "Thing"\nkind = "input"\ndoc = "A thing."\n'
                              'on_off = ["nRanks"]\ndocs = { minCTAs = "The fewest CTAs." }\n')
    fields = {f.c_name: f for f in thing.fields}
    assert fields["nRanks"].on_off and not fields["minCTAs"].on_off
    assert fields["minCTAs"].doc == "The fewest CTAs." and fields["nRanks"].doc == ""


def test_on_off_takes_integer_fields_only(tmp_path):
    pointer = TypeRef("pointer", pointee=TypeRef("int", "char", size=1), size=8)
    api = SimpleNamespace(library="nccl", enums=[], constants=[], typedefs=[], record_variants={
        "ncclThing_t": [SimpleNamespace(versions=["1.0.0"], record=Record(
            "ncclThing_t", "struct", 8, 8, [Field("netName", pointer, 0, since="1.0.0")], "nccl.h", 1))]})
    with pytest.raises(PolicyError, match="on_off: netName is not an integer field"):
        load(tmp_path, '[records.ncclThing_t]\nclass = "Thing"\nkind = "input"\ndoc = "A thing."\n'
                       'on_off = ["netName"]\n', api)


def test_ranges_reach_the_fields(tmp_path):
    """The documented range of an int field, which Python's records and the Rust crate's configs
    both check before NCCL is called."""
    (thing,) = load(tmp_path, '[records.ncclThing_t]\nclass = "Thing"\nkind = "input"\ndoc = "A thing."\n'
                              'ranges = { minCTAs = [1, 32] }\n')
    fields = {f.c_name: f for f in thing.fields}
    assert fields["minCTAs"].range == (1, 32) and fields["nRanks"].range is None


def test_a_range_must_be_two_ordered_ints_of_an_integer_field(tmp_path):
    pointer = TypeRef("pointer", pointee=TypeRef("int", "char", size=1), size=8)
    api = SimpleNamespace(library="nccl", enums=[], constants=[], typedefs=[], record_variants={
        "ncclThing_t": [SimpleNamespace(versions=["1.0.0"], record=Record(
            "ncclThing_t", "struct", 8, 8, [Field("netName", pointer, 0, since="1.0.0")], "nccl.h", 1))]})
    head = '[records.ncclThing_t]\nclass = "Thing"\nkind = "input"\ndoc = "A thing."\n'
    with pytest.raises(PolicyError, match="ranges: netName is not an integer field"):
        load(tmp_path, head + 'ranges = { netName = [0, 1] }\n', api)
    for bounds in ("[8, 0]", "[0]", '[0, "8"]', "8"):
        with pytest.raises(PolicyError, match=r"ranges: minCTAs must be \[lowest, highest\]"):
            load(tmp_path, head + f"ranges = {{ minCTAs = {bounds} }}\n")
    with pytest.raises(PolicyError, match="ranges: 'noSuchField' is a field of no layout"):
        load(tmp_path, head + "ranges = { noSuchField = [0, 1] }\n")
