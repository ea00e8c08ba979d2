"""policy/variable_count.toml, the variable-count collectives described once: the real
file reads, each collective's Python and Rust method is rendered from it (their signatures and
the NCCL calls they make per rank, read back from the generated files), and each kind of mistake
in a synthetic entry stops the run naming the entry and what is wrong. What the methods do is
tested over the stand-in libnccl (tests/python/test_variable_count.py, //tests/rust:variable_count_test)."""
import copy
import os
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(os.path.abspath(__file__)).parent.parent.parent
sys.path.insert(0, str(REPO))

import pytest  # noqa: E402

from generator.policy.common import PolicyError  # noqa: E402
from generator.policy.variable_count import VARIABLE_COUNT, build_variable_count, load_variable_count  # noqa: E402

PYTHON = REPO / "bindings/python/ncclbind/_generated/variable_count_methods.py"
RUST = REPO / "bindings/rust/src/generated/variable_count_methods.rs"


def test_the_file_reads_and_every_collective_is_rendered_in_both_languages():
    collectives = load_variable_count()
    assert [v.name for v in collectives] == ["all_to_allv", "all_gatherv", "reduce_scatterv"]
    python, rust = PYTHON.read_text(), RUST.read_text()
    for v in collectives:
        buffers = {"send": "sendbuf", "recv": "recvbuf"}
        py_args = re.search(rf"def {v.name}\(self, (.*?), \*, stream", python).group(1)
        assert [a.split(":")[0] for a in py_args.split(", ")] == [buffers.get(a, a) for a in v.arguments]
        rs_args = re.search(rf"pub fn {v.name}<T: DataType>\(\s*&self,(.*?)stream: Stream", rust, re.S).group(1)
        assert [line.strip().split(":")[0] for line in rs_args.splitlines() if line.strip()] == list(v.arguments)
        py_body = python.split(f"def {v.name}(")[1].split("\n    def ")[0]
        rs_body = rust.split(f"pub fn {v.name}<")[1].split("pub fn ")[0]
        calls = [c.call for c in v.each_rank]
        assert re.findall(r"_nccl\.(send|recv|reduce)\(", py_body) == calls
        assert re.findall(r"self\.(send|recv|reduce)\(", rs_body)[:len(calls)] == calls
        for l in v.lists:  # each list checked one per rank, in both
            assert f'_counts({l}, "{l}", n)' in py_body and f'one_per_rank("{l}"' in rs_body


GOOD = {"x": {"doc": "d", "arguments": ["send", "send_counts", "send_displs", "recv", "recv_counts", "recv_displs"],
              "blocks": [["send", "send_counts", "send_displs"], ["recv", "recv_counts", "recv_displs"]],
              "disjoint": "recv",
              "each_rank": [["send", "send", "send_counts", "send_displs"], ["recv", "recv", "recv_counts",
                                                                             "recv_displs"]]}}


def test_a_good_entry_reads_its_checks_in_the_files_order():
    (v,) = build_variable_count(GOOD)
    assert [c[0] for c in v.checks] == ["blocks", "blocks", "disjoint"]
    raw = copy.deepcopy(GOOD)
    raw["x"] = {"own": ["send", "send_counts", "equal"], **raw["x"]}
    assert [c[0] for c in build_variable_count(raw)[0].checks] == ["own", "blocks", "blocks", "disjoint"]


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.update(colour=1), "unknown key(s) ['colour']"),
    (lambda t: t.pop("each_rank"), "missing key 'each_rank'"),
    (lambda t: t.update(arguments=["recv", "send"]), "must name send and recv, in that order"),
    (lambda t: t["arguments"].append("send_sizes"), "neither a buffer, op, nor a list"),
    (lambda t: t.update(packed={"send_displs": "recv_counts"}), "an optional displacements list must come after"),
    (lambda t: t.update(packed={"send_counts": "recv_counts"}), "must pair a displacements list with a counts"),
    (lambda t: t["blocks"].append(["send", "send_counts", "nope_displs"]), "'nope_displs' is no displacements"),
    (lambda t: t.update(disjoint="send_counts"), "is not the buffer of exactly one of blocks"),
    (lambda t: t.update(own=["send", "send_counts", "most"]), "own must be"),
    (lambda t: t["each_rank"].append(["bcast", "send", "", ""]), "is not [send | recv | reduce"),
    (lambda t: t["each_rank"].append(["send", "send", "send_counts", ""]), "both a list, or both"),
    (lambda t: t["each_rank"].append(["recv", "send", "send_counts", "send_displs"]), "a recv moves a block of recv"),
    (lambda t: t["each_rank"].append(["reduce", "send", "send_counts", "send_displs"]), "an op argument"),
    (lambda t: t["arguments"].append("op"), "an op argument, but no reduce"),
])
def test_each_mistake_is_named(edit, message):
    raw = copy.deepcopy(GOOD)
    edit(raw["x"])
    with pytest.raises(PolicyError, match=r"^variable_count.toml: \[x\] .*" + re.escape(message)):
        build_variable_count(raw)


def test_the_file_documents_every_key_it_reads():
    text = VARIABLE_COUNT.read_text()
    for key in ("doc", "arguments", "packed", "blocks", "disjoint", "own", "each_rank"):
        assert re.search(rf"^#   {key}\b", text, re.M), key
    assert set(tomllib.loads(text)) == {v.name for v in load_variable_count()}
