"""The generated layer: every function of the IR, under its snake_case name,
with a docstring from the header; the typed stubs agree with the modules."""
import ast
import inspect
import pathlib

import ncclbind
import ncclbind._nccl as nccl
import ncclbind._nccl_ep as nccl_ep
from conftest import c_param


def test_every_function_of_every_header_set_is_bound(ir):
    for set_name, data in ir.items():
        module = nccl_ep if data["library"] == "nccl_ep" else nccl
        for fn in data["functions"]:
            bound = getattr(module, fn["snake_name"], None)
            assert bound is not None, f"{set_name}: {fn['name']} as {fn['snake_name']}"
            assert fn["name"] in bound.__doc__
            assert fn["name"] in module.since


def test_blocking_calls_say_so(ir):
    for data in ir.values():
        module = nccl_ep if data["library"] == "nccl_ep" else nccl
        for fn in data["functions"]:
            releases = "the GIL is released" in getattr(module, fn["snake_name"]).__doc__
            assert releases == bool(fn.get("blocking")), fn["name"]


def test_signatures_are_introspectable():
    sig = inspect.signature(nccl.all_reduce)
    assert list(sig.parameters) == [c_param("ncclAllReduce", i) for i in range(7)]  # every one an input
    assert "ncclAllReduce (nccl.h:" in nccl.all_reduce.__doc__
    # out-parameters are returned, not taken
    assert list(inspect.signature(nccl.comm_count).parameters) == ["comm"]
    assert list(inspect.signature(nccl.comm_init_all).parameters) == ["devlist"]  # ndev comes from len()


def test_stubs_describe_the_modules():
    package = pathlib.Path(ncclbind.__file__).parent
    for module in (nccl, nccl_ep):
        stub = package / "_generated" / (module.__name__.rsplit(".", 1)[1] + ".pyi")
        tree = ast.parse(stub.read_text())
        names = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        names |= {node.target.id for node in tree.body if isinstance(node, ast.AnnAssign)}
        public = {name for name in dir(module) if not name.startswith("_")}
        assert public <= names, sorted(public - names)
