"""The policy's Python surface of the window queries and the signal records (nccl4py 0.6.0's):
python.order (the rank first, offset=0), python.none_if_null (None for a NULL pointer),
record = Name (several integer outs make one record, CftLeInfo) and kind = "record" (a C
struct's fields renamed, WaitSignalDesc). Types come from a small synthetic API, with an
integer typedef for an out (ncclCftLeId); each mistake names the entry."""
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
U32 = TypeRef("int", "uint32_t", signed=False, size=4)
SIZE = TypeRef("int", "size_t", signed=False, size=8)
WINDOW = TypeRef("typedef", "ncclWindow_t", size=8)
LE_ID = TypeRef("typedef", "ncclCftLeId", size=4)
RESULT = TypeRef("enum", "ncclResult_t", size=4)
VOID = TypeRef("void")


def pointer(t):
    return TypeRef("pointer", pointee=t, size=8)


def function(name, *params):
    return Function(name, RESULT, [Param(n, t, d) for n, t, d in params], "nccl.h", 1, "nccl", snake_name=name)


API = SimpleNamespace(
    library="nccl", enums=[],
    typedefs=[SimpleNamespace(name="ncclCftLeId", type=U32)],
    records=[Record("ncclWaitSignalDesc_t", "struct", 16, 4,
                    [Field("opCnt", INT, 0), Field("peer", INT, 4), Field("sigIdx", INT, 8), Field("ctx", INT, 12)],
                    "nccl.h", 1)],
    functions=[
        function("ncclPeerPointer", ("window", WINDOW, "in"), ("offset", SIZE, "in"), ("peer", INT, "in"),
                 ("outPtr", pointer(pointer(VOID)), "out")),
        function("ncclPeerLeInfo", ("window", WINDOW, "in"), ("offset", SIZE, "in"), ("peer", INT, "in"),
                 ("leId", pointer(LE_ID), "out"), ("leOffset", pointer(SIZE), "out")),
        function("ncclMultimemLeInfo", ("window", WINDOW, "in"), ("offset", SIZE, "in"),
                 ("leId", pointer(LE_ID), "out"), ("leOffset", pointer(SIZE), "out")),
    ])

PEER_POINTER = """
[peer_pointer]
kind = "call"
function = "ncclPeerPointer"
owner = "Window"
doc = "d"
python = { aliases = ["get_peer_device_pointer"], order = ["peer", "offset"], none_if_null = true }
[peer_pointer.params]
window = "self"
offset = { role = "in", name = "offset", default = 0 }
peer = { role = "in", name = "peer" }
outPtr = { role = "out" }
"""

LE_INFO = """
[peer_le_info]
kind = "call"
function = "ncclPeerLeInfo"
owner = "Window"
doc = "d"
record = "CftLeInfo"
python = { order = ["peer", "offset"] }
[peer_le_info.params]
window = "self"
offset = { role = "in", name = "offset", default = 0 }
peer = { role = "in", name = "peer" }
leId = { role = "out", name = "le_id" }
leOffset = { role = "out", name = "le_offset" }

[multimem_le_info]
kind = "call"
function = "ncclMultimemLeInfo"
owner = "Window"
doc = "d"
record = "CftLeInfo"
[multimem_le_info.params]
window = "self"
offset = { role = "in", name = "offset", default = 0 }
leId = { role = "out", name = "le_id" }
leOffset = { role = "out", name = "le_offset" }
"""

WAIT_DESC = """
[WaitSignalDesc]
kind = "record"
record = "ncclWaitSignalDesc_t"
doc = "d"
[WaitSignalDesc.fields]
peer = { field = "peer" }
op_count = { field = "opCnt", default = 1 }
signal_index = { field = "sigIdx", default = 0 }
context = { field = "ctx", default = 0 }
"""


def load(tmp_path, text):
    path = tmp_path / "nccl.toml"
    path.write_text(text)
    return load_policy(API, path)


def test_python_order_puts_the_rank_first_and_none_if_null_is_kept(tmp_path):
    (call,) = load(tmp_path, PEER_POINTER).calls
    assert call.python_order == ("peer", "offset") and [p.name for p in call.python_inputs] == ["peer", "offset"]
    assert [p.name for p in call.inputs] == ["offset", "peer"]  # the C call's order stays Rust's
    assert call.none_if_null and call.aliases == ("get_peer_device_pointer",)


def test_several_outs_make_one_record_typed_by_the_ir(tmp_path):
    policy = load(tmp_path, LE_INFO)
    (record,) = policy.result_records()
    assert record.name == "CftLeInfo" and record.calls == ("peer_le_info", "multimem_le_info")
    le_id, le_offset = record.fields
    assert (le_id.name, le_id.c_type, le_id.size, le_id.signed) == ("le_id", "ncclCftLeId", 4, False)
    assert (le_offset.name, le_offset.c_type, le_offset.size) == ("le_offset", "size_t", 8)
    assert policy.calls[0].output.kind == "result_record" and policy.calls[0].output.c_type == "CftLeInfo"


def test_a_record_entry_renames_a_c_structs_fields(tmp_path):
    (record,) = load(tmp_path, WAIT_DESC).records
    assert record.c_record == "ncclWaitSignalDesc_t"
    assert [(f.name, f.c_field, f.default) for f in record.fields] == [
        ("peer", "peer", None), ("op_count", "opCnt", 1), ("signal_index", "sigIdx", 0), ("context", "ctx", 0)]
    assert record.fields[1].bounds == (-2 ** 31, 2 ** 31 - 1)


@pytest.mark.parametrize("text, message", [
    (PEER_POINTER.replace('order = ["peer", "offset"]', 'order = ["peer"]'), "must name each of"),
    (PEER_POINTER.replace('order = ["peer", "offset"]', 'order = ["offset", "peer"]'),
     "a required argument after one with a default (in python.order)"),
    (PEER_POINTER.replace("none_if_null = true", 'none_if_null = "yes"'), "none_if_null: true or false"),
    (LE_INFO.replace('python = { order = ["peer", "offset"] }', 'python = { order = ["peer", "offset"], '
                                                                  'none_if_null = true }'),
     "none_if_null: for a call that returns one pointer"),
    (LE_INFO.replace('record = "CftLeInfo"\npython', "python"), "several outs make a record"),
    (LE_INFO.replace('leId = { role = "out", name = "le_id" }\nleOffset = { role = "out", name = "le_offset" }\n\n'
                     '[multimem', 'leId = { role = "out" }\nleOffset = { role = "out", name = "le_offset" }\n\n'
                     '[multimem'), "an out of a record is an integer with a name"),
    (LE_INFO.replace('leOffset = { role = "out", name = "le_offset" }\n\n[multimem',
                     'leOffset = { role = "out", name = "offset_in_le" }\n\n[multimem'), "record 'CftLeInfo' has fields"),
    (PEER_POINTER.replace('outPtr = { role = "out" }', 'outPtr = { role = "out", name = "ptr" }'),
     "a named out (a record field) is an integer"),
    (WAIT_DESC.replace('context = { field = "ctx", default = 0 }\n', ""), "name each field of ncclWaitSignalDesc_t"),
    (WAIT_DESC.replace('field = "ctx"', 'field = "context"'), "has no field 'context'"),
    (WAIT_DESC.replace("default = 1", "default = 4294967296"), "default 4294967296 is not a int"),
    (WAIT_DESC.replace('peer = { field = "peer" }\nop_count = { field = "opCnt", default = 1 }',
                       'op_count = { field = "opCnt", default = 1 }\npeer = { field = "peer" }'),
     "a required field after one with a default"),
    (LE_INFO + WAIT_DESC.replace("[WaitSignalDesc", "[CftLeInfo"), "is also a kind = \"record\" entry"),
])
def test_mistakes_name_the_entry(tmp_path, text, message):
    with pytest.raises(PolicyError) as info:
        load(tmp_path, text)
    assert message in str(info.value) and "nccl.toml:[" in str(info.value)
