"""The layers, bottom up: the extensions, ncclbind/base (hand-written support), ncclbind/_generated,
then core/, ep/ and the face. When it runs, no module of _generated imports hand-written code
above it, only base/; base/ imports nothing of core/, ep/ or the face. What _generated still
imports from above would be listed here and may only shrink; the list is empty (issue 22): a
new import fails, and so does a listed one that is gone (then delete its line). Imports under
`if TYPE_CHECKING:` (annotations only) do not count."""
from __future__ import annotations

import ast
import pathlib

import ncclbind

PACKAGE = pathlib.Path(ncclbind.__file__).parent
GENERATED = PACKAGE / "_generated"
# The generated modules' public names (ncclbind/errors.py, ...: re-exports, no code of their own), and
# the extensions.
NOT_HAND_WRITTEN = {"ncclbind._nccl", "ncclbind._nccl_ep", "ncclbind.errors", "ncclbind.nccl_enums",
                    "ncclbind.nccl_ep_enums"}

# module of _generated -> the hand-written modules it imports when it runs, today: none. A call
# that makes an owner (params.bind -> Param) makes it through the generated base class
# (ParamMethods.owner_class, set when ncclbind.Param subclasses it); NCCL EP's checks, records,
# allocator and Tensor are base/ep/.
STILL_IMPORTED: dict[str, set[str]] = {}


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


def _above(names: set[str], own: str) -> set[str]:
    """Of `names`, the modules above base/ and _generated (core/, ep/, the face, ...)."""
    return {n for n in names if n.startswith("ncclbind.") and not n.startswith(("ncclbind._generated", own))
            and n not in NOT_HAND_WRITTEN and n != "ncclbind.base" and not n.startswith("ncclbind.base.")}


def hand_written_imports(folder: pathlib.Path = GENERATED, package: str = "ncclbind._generated") -> dict[str, set[str]]:
    out = {}
    for path in sorted(folder.glob("*.py")):
        above = _above(_run_time_imports(ast.parse(path.read_text()), package), package)
        if above:
            out[path.stem] = above
    return out


def test_base_imports_nothing_above_it():
    above = hand_written_imports(PACKAGE / "base", "ncclbind.base")
    assert not above, f"ncclbind/base imports from above it when it runs: {above}"


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
