"""The policy's call entries beyond ncclResult_t calls with one out-pointer: returns = "value"
(an int, a record or nothing), a record passed by value with a rank of it (rank_of), strings
in and out, a string table and a caller buffer with their out_length, and module owners
without a handle. Types come from a small synthetic API; each mistake names the entry."""
import os
import sys
from pathlib import Path
from types import SimpleNamespace

REPO = Path(os.path.abspath(__file__)).parent.parent.parent
sys.path.insert(0, str(REPO))

import pytest  # noqa: E402

from generator.ir.function import Function, Param  # noqa: E402
from generator.ir.record import Field, Record  # noqa: E402
from generator.ir.types import TypeRef  # noqa: E402
from generator.policy.common import PolicyError  # noqa: E402
from generator.policy.nccl import load_policy  # noqa: E402

INT = TypeRef("int", "int", signed=True, size=4)
CHAR = TypeRef("int", "char", signed=True, size=1)
COMM = TypeRef("typedef", "ncclComm_t", size=8)
HANDLE = TypeRef("typedef", "ncclParamHandle_t", size=8)
RESULT = TypeRef("enum", "ncclResult_t", size=4)
TEAM = TypeRef("record", "ncclTeam_t", size=12)
VOID = TypeRef("void")


def pointer(t, const=False):
    return TypeRef("pointer", pointee=t, const=const, size=8)


def function(name, *params, result=RESULT):
    return Function(name, result, [Param(n, t, d) for n, t, d in params], "nccl.h", 1, "nccl", snake_name=name)


API = SimpleNamespace(library="nccl", enums=[], records=[
    Record("ncclTeam_t", "struct", 12, 4, [Field("nRanks", INT, 0), Field("rank", INT, 4)], "core.h", 1)],
    functions=[
        function("ncclTeamWorld", ("comm", COMM, "in"), result=TEAM),
        function("ncclTeamRankToWorld", ("comm", COMM, "in"), ("team", TEAM, "in"), ("rank", INT, "in"), result=INT),
        function("ncclDumpAll", result=VOID),
        function("ncclKeys", ("table", pointer(pointer(pointer(CHAR, True))), "out"), ("len", pointer(INT), "out")),
        function("ncclBind", ("out", pointer(HANDLE), "out"), ("key", pointer(CHAR, True), "in")),
        function("ncclGetStr", ("h", HANDLE, "in"), ("out", pointer(pointer(CHAR, True)), "out")),
        function("ncclGet", ("h", HANDLE, "in"), ("out", pointer(VOID), "in"), ("maxLen", INT, "in"),
                 ("len", pointer(INT), "out")),
    ])


def load(tmp_path, text):
    path = tmp_path / "nccl.toml"
    path.write_text(text)
    return load_policy(API, path)


GOOD = """
[team_world]
kind = "call"
function = "ncclTeamWorld"
owner = "Communicator"
returns = "value"
doc = "d"
[team_world.params]
comm = "self"

[team_rank_to_world]
kind = "call"
function = "ncclTeamRankToWorld"
owner = "Communicator"
returns = "value"
doc = "d"
[team_rank_to_world.params]
comm = "self"
team = { role = "in", name = "team" }
rank = { role = "in", name = "rank", rank_of = "team" }

[dump]
kind = "call"
function = "ncclDumpAll"
owner = "params"
returns = "value"
doc = "d"
[dump.params]

[keys]
kind = "call"
function = "ncclKeys"
owner = "params"
doc = "d"
[keys.params]
table = { role = "out" }
len = { role = "out_length", of = "table" }

[bind]
kind = "call"
function = "ncclBind"
owner = "params"
doc = "d"
[bind.params]
out = { role = "out" }
key = { role = "in", name = "key" }

[get_str]
kind = "call"
function = "ncclGetStr"
owner = "Param"
doc = "d"
[get_str.params]
h = "self"
out = { role = "out" }

[get_bytes]
kind = "call"
function = "ncclGet"
owner = "Param"
doc = "d"
[get_bytes.params]
h = "self"
out = { role = "out_buffer", capacity = "maxLen" }
maxLen = { role = "in", name = "max_len", default = 64 }
len = { role = "out_length", of = "out" }
"""


def test_what_each_new_role_becomes(tmp_path):
    calls = {c.name: c for c in load(tmp_path, GOOD).calls}
    world = calls["team_world"]
    assert world.returns_value and (world.output.role, world.output.kind, world.output.c_type) == \
        ("result", "record", "ncclTeam_t")
    convert = calls["team_rank_to_world"]
    team, rank = convert.inputs
    assert (team.kind, team.c_type) == ("record", "ncclTeam_t") and rank.rank_of == "team"
    assert (convert.output.kind, convert.output.c_type) == ("int", "int")
    assert calls["dump"].module and calls["dump"].returns_value and calls["dump"].output is None
    assert (calls["keys"].output.kind, calls["keys"].length.of) == ("string_table", "table")
    bind = calls["bind"]
    assert (bind.output.kind, bind.output.makes, bind.inputs[0].kind) == ("owner", "Param", "string")
    assert calls["get_str"].output.kind == "string" and not calls["get_str"].module
    get = calls["get_bytes"]
    assert (get.output.role, get.output.of, get.inputs[0].kind, get.length.param) == \
        ("out_buffer", "maxLen", "capacity", "len")


def entry(function, owner, params, returns=None):
    head = f'[x]\nkind = "call"\nfunction = "{function}"\nowner = "{owner}"\ndoc = "d"\n'
    return head + (f'returns = "{returns}"\n' if returns else "") + "[x.params]\n" + params + "\n"


@pytest.mark.parametrize("text, message", [
    (entry("ncclTeamWorld", "Communicator", 'comm = "self"'), 'returns ncclTeam_t, not ncclResult_t'),
    (entry("ncclBind", "params", 'out = { role = "out" }\nkey = { role = "in", name = "key" }', "value"),
     'returns = "value" is for functions that return something else'),
    (entry("ncclTeamWorld", "Communicator", 'comm = "self"', "values"), "returns must be one of"),
    (entry("ncclTeamRankToWorld", "Communicator",
           'comm = "self"\nteam = { role = "in", name = "team" }\nrank = { role = "in", name = "rank", rank_of = "tem" }',
           "value"), "rank_of = 'tem' is not a record argument"),
    (entry("ncclTeamRankToWorld", "Communicator",
           'comm = "self"\nteam = { role = "in", name = "team", default = 1 }\nrank = { role = "in", name = "rank" }',
           "value"), "a record passed by value takes neither optional nor a default"),
    (entry("ncclDumpAll", "Communicator", "", "value"), "needs exactly one 'self' parameter"),
    (entry("ncclTeamWorld", "params", 'comm = "self"', "value"), "'self' is None for a params"),
    (entry("ncclKeys", "params", 'table = { role = "out" }\nlen = { role = "out_length", of = "tabel" }'),
     "of = 'tabel' is not a string, string-table or buffer output"),
    (entry("ncclGet", "Param", 'h = "self"\nout = { role = "out_buffer", capacity = "maxLen" }\n'
           'maxLen = { role = "in", name = "max_len" }\nlen = { role = "out" }'),
     "at most one 'out' parameter (the method returns it; an 'out_buffer'"),
    (entry("ncclGet", "Param", 'h = "self"\nout = { role = "out_buffer", capacity = "len" }\n'
           'maxLen = { role = "in", name = "max_len" }\nlen = { role = "out_length", of = "out" }'),
     "capacity = 'len' is not an integer 'in' argument"),
])
def test_mistakes_name_the_file_and_entry(tmp_path, text, message):
    with pytest.raises(PolicyError) as info:
        load(tmp_path, text)
    assert str(info.value).startswith("nccl.toml:[x]: ") and message in str(info.value), str(info.value)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
