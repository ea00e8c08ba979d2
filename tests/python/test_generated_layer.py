"""The layers, bottom up: the extensions, a `base/` (hand-written support), a `_generated/`, then the
modules users import. The package's own `base/` and `_generated/` serve the core; a feature with
generated code of its own keeps both inside its folder (ncclbind/ep/base/, ncclbind/ep/_generated/),
so the feature is one room. When it runs:
- a `base/` or a `_generated/` imports only the extensions, generated modules, the package's `base/`
  and its own feature's `base/`.
Nothing in either reaches up to core/, a feature's public modules or the package face. Imports under
`if TYPE_CHECKING:` (annotations only) do not count."""
from __future__ import annotations

import ast
import pathlib

import ncclbind

PACKAGE = pathlib.Path(ncclbind.__file__).parent
# The extensions, and the face's modules that only re-export a generated one (ncclbind/errors.py, ...).
NOT_HAND_WRITTEN = {"ncclbind._nccl", "ncclbind._nccl_ep", "ncclbind.errors", "ncclbind.nccl_enums",
                    "ncclbind.nccl_ep_enums"}


def _module(folder: pathlib.Path) -> str:
    return ".".join(("ncclbind", *folder.relative_to(PACKAGE).parts))


def layer_folders(name: str) -> list[pathlib.Path]:
    """The package's `name` folder (base or _generated) and every feature's."""
    return sorted(p for p in [PACKAGE / name, *PACKAGE.glob(f"*/{name}")] if p.is_dir())


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


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def allowed(name: str, folder: pathlib.Path) -> bool:
    """Whether a module of `folder` (a base/ or a _generated/) may import `name` when it runs."""
    feature = _module(folder.parent)  # ncclbind, or ncclbind.ep
    bases = {"ncclbind.base", f"{feature}.base"}
    if name in NOT_HAND_WRITTEN or any(_within(name, b) for b in bases):
        return True
    return "._generated." in name + "."  # any generated module


def imports_from_above(folder: pathlib.Path) -> dict[str, set[str]]:
    package = _module(folder)
    out = {}
    for path in sorted(folder.glob("*.py")):
        names = _run_time_imports(ast.parse(path.read_text()), package)
        above = {n for n in names if n.startswith("ncclbind") and not allowed(n, folder)}
        if above:
            out[path.relative_to(PACKAGE).as_posix()] = above
    return out


def test_there_are_feature_layers_to_check():
    assert {"base", "ep/base"} <= {p.relative_to(PACKAGE).as_posix() for p in layer_folders("base")}
    assert "ep/_generated" in [p.relative_to(PACKAGE).as_posix() for p in layer_folders("_generated")]


def test_a_base_imports_nothing_above_it():
    above = {f: n for folder in layer_folders("base") for f, n in imports_from_above(folder).items()}
    assert not above, f"a base/ imports from above it when it runs: {above}"


def test_generated_code_imports_only_base_and_generated_modules():
    above = {f: n for folder in layer_folders("_generated") for f, n in imports_from_above(folder).items()}
    assert not above, f"generated modules import hand-written code above them: {above}"


def test_the_rule_refuses_what_reaches_up():
    ep_generated, ep_base = PACKAGE / "ep" / "_generated", PACKAGE / "ep" / "base"
    assert allowed("ncclbind.ep.base.checks", ep_generated)
    assert allowed("ncclbind._generated.communicator_methods", ep_generated)
    assert not allowed("ncclbind.ep.group", ep_generated)
    assert not allowed("ncclbind.core.communicator", ep_generated)
    assert not allowed("ncclbind.ep.base.checks", PACKAGE / "_generated")  # the core's layer: not a feature's
    assert not allowed("ncclbind.ep", ep_base) and not allowed("ncclbind.ep.tensor", ep_base)
    assert allowed("ncclbind._generated.vocabulary", PACKAGE / "base")


def test_the_reader_sees_run_time_imports_and_skips_annotations():
    tree = ast.parse("from ..core import calls\nif TYPE_CHECKING:\n    from ..ep import group\n"
                     "def f():\n    from ..core.params import Param\nfrom ... import _nccl\n")
    assert _run_time_imports(tree, "ncclbind.ep._generated") == {"ncclbind.ep.core", "ncclbind.ep.core.params",
                                                                 "ncclbind._nccl"}
