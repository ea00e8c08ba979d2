"""The typed stubs of the extension modules name what the extensions define: every public name of
ncclbind/_generated/_nccl.pyi and _nccl_ep.pyi exists in the module it describes, and every public
function or class of the module has its stub (a stub that names nothing, or leaves a name out,
fails here)."""
from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

import ncclbind

GENERATED = pathlib.Path(ncclbind.__file__).parent / "_generated"


def stub_names(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in names if not n.startswith("_")}


@pytest.mark.parametrize("module", ["_nccl", "_nccl_ep"])
def test_every_stubbed_name_exists(module):
    extension = importlib.import_module(f"ncclbind.{module}")
    missing = sorted(n for n in stub_names(GENERATED / f"{module}.pyi") if not hasattr(extension, n))
    assert not missing, f"ncclbind/_generated/{module}.pyi names what ncclbind.{module} lacks: {missing}"


@pytest.mark.parametrize("module", ["_nccl", "_nccl_ep"])
def test_every_public_callable_is_stubbed(module):
    extension = importlib.import_module(f"ncclbind.{module}")
    stubbed = stub_names(GENERATED / f"{module}.pyi")
    defined = {n for n in dir(extension) if not n.startswith("_") and callable(getattr(extension, n))}
    unstubbed = sorted(defined - stubbed)
    assert not unstubbed, f"ncclbind.{module} defines, without a stub: {unstubbed}"
