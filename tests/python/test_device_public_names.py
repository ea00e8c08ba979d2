"""ncclbind.device's host-side public names (the ones that import without numba): each has a
docstring, and every function's parameters and result are annotated, as test_public_names asks
of the rest of ncclbind."""
from __future__ import annotations

import importlib
import inspect

import pytest

MODULES = ["ncclbind.device", "ncclbind.device.layouts", "ncclbind.device.ir_tables", "ncclbind.device.linking",
           "ncclbind.device.host"]


@pytest.mark.parametrize("name", MODULES)
def test_public_names_are_documented_and_annotated(name):
    module = importlib.import_module(name)
    assert module.__doc__
    problems = []
    for public in module.__all__:
        obj = getattr(module, public)
        if isinstance(obj, (tuple, str, int)):
            continue
        if not inspect.getdoc(obj):
            problems.append(f"{public}: no docstring")
        if inspect.isfunction(obj):
            signature = inspect.signature(obj)
            if signature.return_annotation is inspect.Signature.empty:
                problems.append(f"{public}: result not annotated")
            problems += [f"{public}({p}): not annotated" for p, param in signature.parameters.items()
                         if param.annotation is inspect.Parameter.empty]
    assert problems == []
