"""Runs the fuzz classes against one checkout's ncclbind and counts the outcomes.

Every case ends in exactly one of:
  clean    a valid call succeeded, or a bad one was refused by ncclbind's named error (NcclInvalid
           in Python; for a command, exit status 2 and one line on stderr) before NCCL was called
  raw      another exception (from ncclbind's internals or a traceback from a command)
  silent   a bad input accepted: the call succeeded or reached NCCL (the stand-in said no)
  refused  a valid call refused
  crash    the process died on a signal
  hang     no answer within the time limit

The Python classes (python_cases.py) run many cases in one child process (child.py), which
starts again after the case that crashed or hung it. The command-line classes (cli_cases.py)
run one process per case. The inputs are always this checkout's; `root` picks whose ncclbind
and generator run them (another checkout for a before/after table).
"""
from __future__ import annotations

import collections
import dataclasses
import os
import pathlib
import select
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

OUTCOMES = ("clean", "raw", "silent", "refused", "crash", "hang")
CASE_TIMEOUT_S = 20


@dataclasses.dataclass
class Tally:
    name: str
    counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    examples: dict = dataclasses.field(default_factory=dict)  # outcome -> first few "what | detail"
    seconds: float = 0.0

    def add(self, outcome: str, line: str) -> None:
        self.counts[outcome] += 1
        if outcome != "clean":
            self.examples.setdefault(outcome, [])
            if len(self.examples[outcome]) < 5:
                self.examples[outcome].append(line)

    @property
    def tried(self) -> int:
        return sum(self.counts.values())

    def failures(self) -> list[str]:
        return [f"{self.name}: {o}: {line}" for o, lines in self.examples.items() for line in lines]


def package_path(root: pathlib.Path) -> pathlib.Path:
    """The folder of `root`'s ncclbind package with its built extension: root/bindings/python (a
    checkout built in place), or, for this checkout under `bazel test` (whose source tree holds no
    build), the runfiles' copy, which has the extension Bazel built."""
    srcdir, workspace = os.environ.get("TEST_SRCDIR"), os.environ.get("TEST_WORKSPACE")
    if root == ROOT and srcdir and workspace:
        return pathlib.Path(srcdir) / workspace / "bindings" / "python"
    return root / "bindings" / "python"


def stand_in_environment(root: pathlib.Path, libraries: dict) -> dict:
    """The child's environment: `root`'s package first, this checkout's test helpers, the stand-ins."""
    return dict(os.environ, NCCLBIND_NCCL_PATH=libraries["nccl"], NCCLBIND_NCCL_EP_PATH=libraries["nccl_ep"],
                CUDA_VISIBLE_DEVICES="", NCCLBIND_CUDA_BACKEND="helper", PYTHONDONTWRITEBYTECODE="1",
                NCCLBIND_FAKE_NCCL_ACTIVE="1",  # the stress test module's checks are defined (threads)
                PYTHONPATH=os.pathsep.join([str(package_path(root)), str(HERE), str(ROOT / "tests" / "python")]))


def run_python_class(name: str, count: int, seed: int, root: pathlib.Path, libraries: dict) -> Tally:
    tally, first, started = Tally(name), 0, time.monotonic()
    env = stand_in_environment(root, libraries)
    while first < count:
        errors = tempfile.TemporaryFile("w+")  # a file, not a pipe: a child writing much there never blocks
        child = subprocess.Popen([sys.executable, str(HERE / "child.py"), name, str(seed), str(count), str(first)],
                                 env=env, stdout=subprocess.PIPE, stderr=errors, text=True, cwd=str(HERE))
        current = None
        while True:
            ready, _, _ = select.select([child.stdout], [], [], CASE_TIMEOUT_S if current is not None else 120)
            line = child.stdout.readline() if ready else None
            if line is None or not line:
                if line is None:  # the case in flight stalled
                    child.kill()
                status = child.wait()
                errors.seek(0)
                stderr = errors.read()[-300:].replace("\n", " ")
                if current is None:
                    if first < count:
                        raise RuntimeError(f"fuzz class {name}: the child ended outside a case: {stderr}")
                    break
                word = "hang" if line is None else "crash" if status < 0 else "raw"
                tally.add(word, f"case {current}: exit {status}: {stderr}")
                first = current + 1
                break
            words = line.rstrip("\n").split(" ", 3)
            if words[0] == "start":
                current = int(words[1])
            elif words[0] == "done":
                tally.add(words[2], words[3] if len(words) > 3 else "")
                current, first = None, int(words[1]) + 1
        child.stdout.close()
        errors.close()
    tally.seconds = time.monotonic() - started
    return tally


def run_command_class(name: str, count: int, seed: int, root: pathlib.Path, libraries: dict) -> Tally:
    import cli_cases
    tally, started = Tally(name), time.monotonic()
    for case in cli_cases.CLASSES[name](count, seed, root, libraries):
        tally.add(*case.run())
    tally.seconds = time.monotonic() - started
    return tally


def python_classes(table: str = "CLASSES") -> list[str]:
    """The Python classes' names, read without importing python_cases (which imports ncclbind:
    this process may be measuring another checkout's)."""
    import ast
    tree = ast.parse((HERE / "python_cases.py").read_text())
    found = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == table)
    return [k.value for k in found.keys]


def command_classes() -> list[str]:
    import cli_cases
    return list(cli_cases.CLASSES)


def run_class(name: str, count: int, seed: int, root: pathlib.Path, libraries: dict) -> Tally:
    if name in python_classes() or name in python_classes("SELF_TEST"):
        return run_python_class(name, count, seed, root, libraries)
    return run_command_class(name, count, seed, root, libraries)


def build_stand_ins(directory: pathlib.Path) -> dict:
    """The stand-in libnccl and libnccl_ep (Bazel's builds where the environment names them)."""
    from stand_ins import build_stand_in, given_or_built
    directory.mkdir(parents=True, exist_ok=True)
    nccl = os.environ.get("NCCLBIND_FAKE_NCCL") or build_stand_in(directory)
    ep = given_or_built("NCCLBIND_FAKE_NCCL_EP", directory / "libnccl_ep.so",
                        ["-O1", "-fvisibility=hidden", "-std=c11", f"-I{ROOT / 'bindings' / 'c' / 'include'}",
                         f"-I{ROOT / 'runtime' / 'include'}", str(ROOT / "tests" / "python" / "fake_nccl_ep.c")])
    return {"nccl": os.path.abspath(nccl), "nccl_ep": os.path.abspath(ep)}
