"""The generated layer is to be a floor: no module of ncclbind/_generated imports, when it runs,
anything hand-written above it (ncclbind.core, ncclbind.ep, the package face). What it still
imports is listed here and may only shrink (issue 22's open part): a new import fails, and so
does a listed one that is gone (then delete its line). Imports under `if TYPE_CHECKING:`
(annotations only) do not count."""
from __future__ import annotations

import ast
import pathlib

import ncclbind

GENERATED = pathlib.Path(ncclbind.__file__).parent / "_generated"
# The generated modules under their public names (ncclbind/errors.py, ...), and the extensions.
NOT_HAND_WRITTEN = {"ncclbind._nccl", "ncclbind._nccl_ep", "ncclbind.errors", "ncclbind.nccl_enums",
                    "ncclbind.nccl_ep_enums"}

# module of _generated -> the hand-written modules it imports when it runs, today.
STILL_IMPORTED = {  # (from ..core import argument_checks counts as ncclbind.core)
    "communicator_methods": {"ncclbind.core", "ncclbind.core.argument_types", "ncclbind.core.calls",
                             "ncclbind.core.dtypes", "ncclbind.core.streams", "ncclbind.core.unique_id",
                             "ncclbind.core.watchdog"},
    "window_methods": {"ncclbind.core"},
    "param_methods": {"ncclbind.core"},
    "params_functions": {"ncclbind.core", "ncclbind.core.params"},
    "device_api_functions": {"ncclbind.core"},
    "nccl_enums": {"ncclbind.core.dtypes", "ncclbind.core.open_enum"},
    "nccl_ep_enums": {"ncclbind.core.open_enum"},
    "ep_classes": {"ncclbind.ep.allocator", "ncclbind.ep.records"},
    "ep_methods": {"ncclbind.core.streams", "ncclbind.ep"},
}


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _run_time_imports(tree: ast.Module, package: str) -> set[str]:
    """The absolute names of what `tree` (a module of `package`) imports outside TYPE_CHECKING."""
    found: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if _type_checking_block(child):
                stack.extend(child.orelse)
                continue
            if isinstance(child, ast.ImportFrom) and child.level:
                base = package.rsplit(".", child.level - 1)[0] if child.level > 1 else package
                if child.module:
                    found.add(f"{base}.{child.module}")
                else:  # from .. import _nccl, core: each name is a module
                    found.update(f"{base}.{alias.name}" for alias in child.names)
            elif isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names if alias.name.startswith("ncclbind"))
            stack.append(child)
    return found


def hand_written_imports() -> dict[str, set[str]]:
    out = {}
    for path in sorted(GENERATED.glob("*.py")):
        names = _run_time_imports(ast.parse(path.read_text()), "ncclbind._generated")
        above = {n for n in names if n.startswith("ncclbind.") and not n.startswith("ncclbind._generated")
                 and n not in NOT_HAND_WRITTEN}
        if above:
            out[path.stem] = above
    return out


def test_the_generated_layer_imports_nothing_new_from_above():
    found = hand_written_imports()
    new = {module: sorted(names - STILL_IMPORTED.get(module, set())) for module, names in found.items()}
    new = {module: names for module, names in new.items() if names}
    assert not new, f"generated modules import hand-written code above them: {new}"


def test_the_list_only_shrinks():
    found = hand_written_imports()
    gone = {module: sorted(names - found.get(module, set())) for module, names in STILL_IMPORTED.items()}
    gone = {module: names for module, names in gone.items() if names}
    assert not gone, f"no longer imported, delete from STILL_IMPORTED: {gone}"


def test_the_reader_sees_run_time_imports_and_skips_annotations():
    tree = ast.parse("from ..core import calls\nif TYPE_CHECKING:\n    from ..ep import group\n"
                     "def f():\n    from ..core.params import Param\n")
    assert _run_time_imports(tree, "ncclbind._generated") == {"ncclbind.core", "ncclbind.core.params"}
