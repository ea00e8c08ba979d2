"""ncclbind's Python API contains nccl4py 0.6.0's `nccl.core` and nccl-extensions 0.1.0's
`nccl.ep`: every public name, with the same parameter names, positional order, defaults and
property-or-method form (compare.py says the rules), read from the pinned wheels' sources
(reference_wheels.toml; tools/fetch_inputs.py keeps them in .cache/api_reference).

A difference fails the test with a line naming it, unless exceptions.toml lists its name
with a reason; an exception that no longer matches any difference fails too, so that the
list only shrinks. The exceptions are printed (pytest -rA shows them).
"""
from __future__ import annotations

import os
import pathlib
import sys
import tomllib

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
ROOT = HERE.parents[1]
try:
    import ncclbind  # noqa: F401 - Bazel's runfiles or an installed package
except ImportError:
    sys.path.insert(0, str(ROOT / "bindings" / "python"))
# ncclbind.device.cute needs the CuTe DSL: tools/setup.sh's, with the cuda-bindings and the
# typing_extensions it imports, ahead of the system's (Debian's typing_extensions is too old).
_CUTE = ROOT / ".cache" / "cute-dsl"
sys.path[:0] = [str(_CUTE / "nvidia_cutlass_dsl" / "dsl_packages"), str(_CUTE), str(ROOT / ".cache" / "numba-cuda")]

from compare import Difference, count_names, differences, reference_modules  # noqa: E402


def reference_dir() -> pathlib.Path:
    runfiles = os.environ.get("TEST_SRCDIR")
    if runfiles and (pathlib.Path(runfiles) / "ncclbind_inputs" / "api_reference").is_dir():
        return pathlib.Path(runfiles) / "ncclbind_inputs" / "api_reference"
    return ROOT / ".cache" / "api_reference"


def load_exceptions() -> dict[str, str]:
    table = tomllib.loads((HERE / "exceptions.toml").read_text())
    out = {}
    for entry in table.get("exception", []):
        if not entry.get("reason", "").strip():
            raise AssertionError(f"exceptions.toml: {entry['name']} has no reason")
        out[entry["name"]] = entry["reason"]
    return out


def excused(diff: Difference, exceptions: dict[str, str]) -> str | None:
    """The exception that covers the difference: its name, or a name above it."""
    parts = diff.name.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in exceptions:
            return name
    return None


MODULES = list(reference_modules(reference_dir()))


@pytest.mark.parametrize("reference,ours,items", MODULES, ids=[m[0] for m in MODULES])
def test_every_public_name_conforms(reference, ours, items, capsys):
    import importlib
    exceptions = load_exceptions()
    diffs = list(differences(items, importlib.import_module(ours), reference))
    unexcused = [d for d in diffs if excused(d, exceptions) is None]
    used = {excused(d, exceptions) for d in diffs} - {None}
    with capsys.disabled():
        print(f"\n{reference} -> {ours}: {count_names(items)} public names, "
              f"{len({d.name for d in diffs})} differ, {len({d.name for d in unexcused})} without an exception")
        for name in sorted(used):
            print(f"  exception {name}: {exceptions[name]}")
    assert not unexcused, "differences from " + reference + ":\n" + "\n".join(map(str, unexcused))
    stale = [n for n in exceptions if n.startswith(reference + ".") and n not in used]
    assert not stale, "exceptions.toml lists names that no longer differ: " + ", ".join(stale)


def test_the_reader_sees_the_reference_api():
    """The reader follows nccl4py's star imports and lazy modules: the reference's names are
    read, not an empty set that would pass any comparison."""
    by_module = {reference: items for reference, _, items in MODULES}
    core = by_module["nccl.core"]
    assert core["Communicator"].members["reduce"] == "method"
    assert str(core["Communicator"].member_signatures["reduce"]).startswith("(sendbuf, recvbuf, op, root=None")
    assert core["Communicator"].members["team_world"] == "property"
    assert core["cupy"].kind == "module" and "empty" in core["cupy"].items
    assert core["NcclRedOp"].enum_members["SUM"] == "0"
    assert by_module["nccl.ep"]["Tensor"].signature is not None


def test_a_difference_is_found():
    """The comparison itself fails on what it must fail on (a stand-in module)."""
    import types
    by_module = {reference: items for reference, _, items in MODULES}
    core = by_module["nccl.core"]

    class Communicator:
        def reduce(self, sendbuf, recvbuf, root, op=0, *, stream=None, config=None): ...

    fake = types.SimpleNamespace(Communicator=Communicator)
    found = {str(d) for d in differences({"Communicator": core["Communicator"]}, fake, "nccl.core")}
    assert any(d.startswith("nccl.core.Communicator.reduce: positional parameter 3 is 'root'") for d in found)
    assert any(d.startswith("nccl.core.Communicator.team_world: missing (a property)") for d in found)


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider", "-rs"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args += ["--junitxml", os.environ["XML_OUTPUT_FILE"], "-o", "junit_family=xunit2"]
    sys.exit(pytest.main(args))
