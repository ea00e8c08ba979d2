"""Coverage (bindings/ir/coverage/nccl.json, generated from policy/nccl.toml and
nccl_coverage.toml): every function of the merged API is covered by a generated method,
a hand-written name, or a reason to stay raw-only, and every Python name it lists exists."""
from __future__ import annotations

import json
import os
import pathlib

import pytest

import ncclbind

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def coverage():
    directory = pathlib.Path(os.environ.get("NCCLBIND_IR_DIR", ROOT / "bindings" / "ir"))
    return json.loads((directory / "coverage" / "nccl.json").read_text())["functions"]


def test_every_function_of_the_merged_api_is_covered_once(api, coverage):
    functions = [f["name"] for f in api["nccl"]["functions"]]
    assert sorted(c["name"] for c in coverage) == sorted(functions)


@pytest.mark.parametrize("kind", ["python", "rust"])
def test_a_language_without_a_name_says_why(coverage, kind):
    for c in coverage:
        assert c[kind] or c["raw"], c["name"]


def test_every_python_name_exists(coverage):
    missing = []
    for c in coverage:
        if not c["python"]:
            continue
        head, *rest = c["python"].split(".")
        obj = getattr(ncclbind, head, None)
        for part in rest:
            obj = getattr(obj, part, None)
        if obj is None:
            missing.append(f"{c['name']}: ncclbind.{c['python']}")
    assert not missing, missing


def test_the_post_2_28_calls_are_idiomatic_in_both_languages(api, coverage):
    # What the policy's kind = "call" entries bind: each function newer than the oldest header set
    # that a Communicator or a window method calls.
    by_name = {c["name"]: c for c in coverage}
    for name in ("ncclCommSuspend", "ncclCommResume", "ncclCommGetUniqueId", "ncclCommMemStats",
                 "ncclCommQueryProperties", "ncclCommGrow", "ncclGetLsaDevicePointer",
                 "ncclGetPeerDevicePointer", "ncclGetLsaMultimemDevicePointer"):
        assert by_name[name]["generated"] and by_name[name]["python"] and by_name[name]["rust"], name
