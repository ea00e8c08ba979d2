"""The semantic policy's `kind = "call"` entries and the coverage data, as the generator reads
them: each mistake stops the run with the file, the entry and what is wrong; the types of
the roles come from the IR (here a small synthetic API)."""
import os
import sys
from pathlib import Path
from types import SimpleNamespace

REPO = Path(os.path.abspath(__file__)).parent.parent.parent
sys.path.insert(0, str(REPO))

import pytest  # noqa: E402

from generator.ir.enum import EnumValue  # noqa: E402
from generator.ir.function import Function, Param  # noqa: E402
from generator.ir.types import TypeRef  # noqa: E402
from generator.policy.common import PolicyError  # noqa: E402
from generator.policy.nccl import load_policy  # noqa: E402
from generator.policy.coverage import load_coverage  # noqa: E402

INT = TypeRef("int", "int", signed=True, size=4)
SIZE = TypeRef("int", "size_t", signed=False, size=8)
COMM = TypeRef("typedef", "ncclComm_t", size=8)
RESULT = TypeRef("enum", "ncclResult_t", size=4)
STAT = TypeRef("enum", "ncclStat_t", size=4)


def pointer(t, const=False):
    return TypeRef("pointer", pointee=t, const=const, size=8)


def function(name, *params, result=RESULT):
    return Function(name, result, [Param(n, t, d) for n, t, d in params], "nccl.h", 1, "nccl", snake_name=name)


API = SimpleNamespace(library="nccl", enums=[SimpleNamespace(name="ncclStat_t", values=[
    EnumValue("ncclStatA", 0), EnumValue("ncclStatB", 1)])], functions=[
    function("ncclSuspend", ("comm", COMM, "in"), ("flags", INT, "in")),
    function("ncclStats", ("comm", COMM, "in"), ("stat", STAT, "in"), ("value", pointer(SIZE), "out")),
    function("ncclGrow", ("comm", COMM, "in"), ("id", pointer(TypeRef("record", "ncclUniqueId", size=128), True), "in"),
             ("newcomm", pointer(COMM), "out"), ("extra", pointer(INT), "out")),
    function("ncclTeam", ("comm", COMM, "in"), result=TypeRef("record", "ncclTeam_t", size=12)),
])


def policy(tmp_path, text):
    path = tmp_path / "nccl.toml"
    path.write_text(text)
    return load_policy(API, path)


def test_a_call_entry_takes_its_types_from_the_ir(tmp_path):
    loaded = policy(tmp_path, """
[mem_stats]
kind = "call"
function = "ncclStats"
owner = "Communicator"
doc = "d"
[mem_stats.params]
comm = "self"
stat = { role = "in", name = "stat" }
value = { role = "out" }
""")
    (call,) = loaded.calls
    assert not loaded.methods
    stat, value = call.inputs[0], call.output
    assert (stat.kind, stat.enum_values) == ("enum", (("ncclStatA", 0), ("ncclStatB", 1)))
    assert (value.kind, value.c_type, value.bounds) == ("int", "size_t", (0, 2 ** 64 - 1))


@pytest.mark.parametrize("body, message", [
    ('function = "ncclSuspend"\nowner = "Communicator"\ndoc = "d"\ncolor = 1\n[x.params]\ncomm = "self"\n'
     'flags = { role = "in", name = "flags" }', "unknown key(s) ['color']"),
    ('function = "ncclSuspend"\nowner = "Communicator"\ndoc = "d"\n[x.params]\ncomm = "self"',
     "no role for ncclSuspend's parameter(s) flags"),
    ('function = "ncclSuspend"\nowner = "Communicator"\ndoc = "d"\n[x.params]\ncomm = "self"\n'
     'flags = { role = "in", name = "flags" }\nflag = "self"', "has no parameter 'flag'"),
    ('function = "ncclSuspend"\nowner = "Communicator"\ndoc = "d"\n[x.params]\ncomm = "self"\n'
     'flags = { role = "input", name = "flags" }', "unknown role 'input'"),
    ('function = "ncclSuspend"\nowner = "Communicator"\ndoc = "d"\n[x.params]\ncomm = "self"\n'
     'flags = { role = "in", name = "flags", default = true }', "default True is not a int"),
    ('function = "ncclSuspend"\nowner = "Communicator"\ndoc = "d"\n[x.params]\ncomm = "self"\n'
     'flags = { role = "in", name = "flags", default = 4294967296 }', "is not a int"),
    ('function = "ncclSuspend"\nowner = "Window"\ndoc = "d"\n[x.params]\ncomm = "self"\n'
     'flags = { role = "in", name = "flags" }', "'self' is ncclWindow_t for a Window"),
    ('function = "ncclSuspend"\nowner = "Communicator"\ndoc = "d"\n[x.params]\ncomm = "self"\n'
     'flags = { role = "in", name = "flags", optional = true }', "optional is for pointer arguments"),
    ('function = "ncclStats"\nowner = "Communicator"\ndoc = "d"\n[x.params]\ncomm = "self"\n'
     'stat = { role = "in", name = "stat", default = 7 }\nvalue = { role = "out" }', "not a value of ncclStat_t"),
    ('function = "ncclGrow"\nowner = "Communicator"\ndoc = "d"\n[x.params]\ncomm = "self"\n'
     'id = { role = "in", name = "id" }\nnewcomm = { role = "out" }\nextra = { role = "out" }',
     "at most one 'out' parameter"),
    ('function = "ncclTeam"\nowner = "Communicator"\ndoc = "d"\n[x.params]\ncomm = "self"',
     "returns ncclTeam_t, not ncclResult_t"),
    ('kind = "calls"\nfunction = "ncclSuspend"', 'kind must be "buffers"'),
])
def test_mistakes_name_the_file_and_entry(tmp_path, body, message):
    text = "[x]\n" + (body if body.startswith("kind") else 'kind = "call"\n' + body) + "\n"
    with pytest.raises(PolicyError) as info:
        policy(tmp_path, text)
    assert str(info.value).startswith("nccl.toml:[x]: ") and message in str(info.value), str(info.value)


def test_coverage_names_every_function_once(tmp_path, monkeypatch):
    import generator.policy.nccl as policy_module
    (tmp_path / "nccl.toml").write_text("")
    monkeypatch.setattr(policy_module, "POLICY_DIR", tmp_path)
    coverage = tmp_path / "nccl_coverage.toml"
    coverage.write_text('[functions]\nncclSuspend = { python = "Communicator.suspend", rust = "Communicator::suspend" }\n')
    # the functions in neither file are raw only, pending (a new release's function never stops generation)
    rows = load_coverage(API, coverage)
    assert [c.function for c in rows if c.pending] == ["ncclStats", "ncclGrow", "ncclTeam"]
    assert all(c.line.startswith("raw only: new in ") for c in rows if c.pending)
    assert not next(c for c in rows if c.function == "ncclSuspend").pending
    coverage.write_text('[functions]\nncclSuspend = { python = "Communicator.suspend" }\n')
    with pytest.raises(PolicyError, match="needs raw = why"):
        load_coverage(API, coverage)
    coverage.write_text('[functions]\nncclNope = { raw = "x" }\n')
    with pytest.raises(PolicyError, match="ncclNope: not a function"):
        load_coverage(API, coverage)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
