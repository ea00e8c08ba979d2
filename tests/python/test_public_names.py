"""ncclbind's public names as a user and a type checker see them: every name in
__all__ is known to `mypy --strict` (never Any), has a docstring, and shows
plain annotations in help(); `import ncclbind` stays lazy.

mypy is Debian's (package `mypy`, installed by tools/setup.sh) and checks the
package as an installed one: errors inside ncclbind are not the user's
(--follow-imports=silent, as for a package in site-packages with py.typed)."""
from __future__ import annotations

import ast
import inspect
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

import ncclbind

# Not resolve(): under Bazel the package is a runfiles tree of links, and only that tree holds
# the built extension beside __init__.py (the source tree may have none).
PACKAGE_DIR = pathlib.Path(os.path.abspath(ncclbind.__file__)).parent
SUBMODULES = {"core", "dev_comm", "ep", "errors", "nccl_enums", "nccl_ep_enums", "params"}


def public_names() -> list[str]:
    return [name for name in ncclbind.__all__ if name != "__version__"]


def test_the_type_checking_imports_are_the_lazy_exports():
    tree = ast.parse((PACKAGE_DIR / "__init__.py").read_text())
    blocks = [node for node in tree.body if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
              and node.test.id == "TYPE_CHECKING"]
    assert len(blocks) == 1
    seen = {}
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1
        for alias in node.names:
            assert alias.asname == alias.name, f"{alias.name}: re-export as itself for mypy --strict"
            seen[alias.name] = node.module or ""
    assert {name for name, module in seen.items() if module and module != "interop"} == set(ncclbind._EXPORTS)
    assert {name for name, module in seen.items() if module == "interop"} == set(ncclbind._INTEROP)
    assert {name for name, module in seen.items() if not module} == SUBMODULES
    for name, module in ncclbind._EXPORTS.items():
        assert seen[name] == module, name


def test_import_ncclbind_imports_no_pythonic_module():
    code = "import sys, ncclbind; print(sorted(m for m in sys.modules if m.startswith(('ncclbind.', 'typing'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(PACKAGE_DIR.parent))).stdout
    assert out.strip() == "['ncclbind._nccl', 'ncclbind._nccl_ep']"


def test_a_free_threaded_interpreter_without_the_gil_is_refused_at_import():
    # sys._is_gil_enabled() is False only on a free-threaded build run with PYTHON_GIL=0; this
    # machine's interpreter has a GIL, so the subprocess says otherwise before the import.
    code = "import sys; sys._is_gil_enabled = lambda: False\nimport ncclbind"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(PACKAGE_DIR.parent)))
    assert run.returncode == 1
    assert "ImportError: ncclbind needs the GIL" in run.stderr and "PYTHON_GIL=1" in run.stderr
    code = "import sys; sys._is_gil_enabled = lambda: True\nimport ncclbind; print('loaded')"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env=dict(os.environ, PYTHONPATH=str(PACKAGE_DIR.parent))).stdout == "loaded\n"


def test_every_public_name_and_member_has_a_docstring():
    missing = []
    for name in public_names():
        obj = getattr(ncclbind, name)
        own_doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
        if not own_doc:
            missing.append(name)
        if not inspect.isclass(obj):
            continue
        for member, value in vars(obj).items():
            if member.startswith("_"):
                continue
            target = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
            if (callable(target) or isinstance(target, property)) and not target.__doc__:
                missing.append(f"{name}.{member}")
    assert missing == []


def test_help_shows_annotations_unquoted():
    quoted = []
    for name in public_names():
        obj = getattr(ncclbind, name)
        members = [(name, obj)]
        if inspect.isclass(obj):
            members += [(f"{name}.{m}", getattr(obj, m)) for m in vars(obj) if not m.startswith("_")]
        for label, value in members:
            if not callable(value) or isinstance(value, type) and label != name:
                continue
            try:
                signature = str(inspect.signature(value))
            except (TypeError, ValueError):  # a builtin without a text signature
                continue
            if re.search(r"\"'|'\"", signature):
                quoted.append(f"{label}{signature}")
    assert quoted == []


USER_SCRIPT = '''
import ncclbind

def main() -> int:
    uid = ncclbind.get_unique_id()
    peer = ncclbind.UniqueId.from_bytes(uid.to_bytes())
    with ncclbind.Communicator.init(nranks=1, rank=0, unique_id=peer, device=0) as comm:
        rank: int = comm.rank
        child = comm.split(color=0, key=rank)
        if child is not None:
            child.destroy()
    info: ncclbind.VersionInfo = ncclbind.version_info()
    version: ncclbind.Version | None = info.nccl.version
    try:
        ncclbind.show_versions()
    except ncclbind.NcclError as e:
        print(e.code)
    return ncclbind.version_code() + (version.major if version else 0)
'''

MISUSE_SCRIPT = '''
import ncclbind

uid = ncclbind.get_unique_id()
ncclbind.Communicator.init("one", 0, uid)
ncclbind.no_such_name()
'''


@pytest.fixture(scope="module")
def mypy_report(tmp_path_factory) -> dict[str, list[str]]:
    """mypy --strict over three user scripts in one run: {script name: its lines of output}."""
    work = tmp_path_factory.mktemp("mypy")
    reveal = "import ncclbind\n" + "".join(f"reveal_type(ncclbind.{name})\n" for name in public_names())
    for stem, text in (("user", USER_SCRIPT), ("misuse", MISUSE_SCRIPT), ("reveal", reveal)):
        (work / f"{stem}.py").write_text(textwrap.dedent(text))
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-error-summary",
         "--python-version", "3.10", "--cache-dir", str(work / "cache"), "user.py", "misuse.py", "reveal.py"],
        cwd=work, capture_output=True, text=True, timeout=240,
        env=dict(os.environ, MYPYPATH=str(PACKAGE_DIR.parent)))
    assert "No module named mypy" not in result.stderr, "mypy is missing: run tools/setup.sh"
    report: dict[str, list[str]] = {"user": [], "misuse": [], "reveal": []}
    for line in result.stdout.splitlines():
        report[line.split(".py:", 1)[0]].append(line)
    assert result.returncode == 1 and not result.stderr, result.stdout + result.stderr
    return report


def test_mypy_strict_accepts_a_correct_user_script(mypy_report):
    assert mypy_report["user"] == []


def test_mypy_strict_rejects_wrong_arguments_and_unknown_names(mypy_report):
    errors = mypy_report["misuse"]
    assert any(':5: error: Argument 1 to "init" of "Communicator" has incompatible type "str"' in line
               for line in errors), errors
    assert any(':6: error: Module has no attribute "no_such_name"' in line for line in errors), errors


def test_mypy_sees_every_public_name_as_its_own_type(mypy_report):
    revealed = [line for line in mypy_report["reveal"] if "Revealed type is" in line]
    assert len(revealed) == len(public_names()), mypy_report["reveal"]
    for name, line in zip(public_names(), revealed):
        assert line.split("Revealed type is", 1)[1].strip() != '"Any"', f"{name}: {line}"
    by_name = dict(zip(public_names(), revealed))
    assert "ncclbind.core.communicator.Communicator" in by_name["Communicator"]
    assert "ncclbind._generated.errors.NcclInvalid" in by_name["NcclInvalid"]


# Public parameters still without an annotation, all in files being reworked elsewhere
# (core/communicator.py, core/resources.py) or generated (NcclTimeout's **fields). The list may
# only shrink: a new public parameter must be annotated.
STILL_UNANNOTATED: dict = {}


def test_public_parameters_are_annotated():
    unannotated = {}
    for name in public_names():
        obj = getattr(ncclbind, name)
        if inspect.ismodule(obj):
            continue
        members = [(name, obj)] if not inspect.isclass(obj) else [
            (f"{name}.{m}", getattr(obj, m)) for m in vars(obj)  # own members, not the generated mixins'
            if (not m.startswith("_") or m == "__init__") and callable(getattr(obj, m))
            and not isinstance(getattr(obj, m), type)]
        for label, value in members:
            try:
                parameters = inspect.signature(value).parameters.values()
            except (TypeError, ValueError):  # a builtin without a text signature
                continue
            missing = {p.name for p in parameters
                       if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty}
            if missing:
                unannotated[label] = missing
    new = {label: names - STILL_UNANNOTATED.get(label, set()) for label, names in unannotated.items()}
    assert {label: names for label, names in new.items() if names} == {}


@pytest.mark.parametrize("public, generated", [("errors", "errors"), ("nccl_enums", "nccl_enums"),
                                               ("nccl_ep_enums", "nccl_ep_enums"),
                                               ("dev_comm", "dev_comm_functions")])
def test_a_generated_modules_public_name_re_exports_all_it_defines(public, generated):
    """ncclbind.errors (...) is a plain re-export of the generated module: every public name the
    generated module defines (not one it imports) is there, the same object."""
    import importlib
    face = importlib.import_module(f"ncclbind.{public}")
    module = importlib.import_module(f"ncclbind._generated.{generated}")
    defined = [name for name, value in vars(module).items() if not name.startswith("_")
               and getattr(value, "__module__", module.__name__) == module.__name__
               and not inspect.ismodule(value) and name not in ("TYPE_CHECKING", "annotations")]
    missing = [name for name in defined if getattr(face, name, None) is not getattr(module, name)]
    assert not missing, f"ncclbind.{public} lacks {missing}"
    assert face is not module  # a module of its own, not an alias in sys.modules
