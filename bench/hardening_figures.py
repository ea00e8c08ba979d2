"""Issue 14's figures: bad inputs below the idiomatic layer, each run once in its own
process, counted as a clean error (the expected named error), another error, a
silent accept, a crash (a signal) or a hang (past the timeout).

    /usr/bin/python3 bench/hardening_figures.py            # a table per layer, then the totals
    /usr/bin/python3 bench/hardening_figures.py --verbose  # one line per input

Seeded (the random integers below), bounded (one process of at most TIMEOUT s per
input). The Python cases load the real libnccl unless a case names the stand-in
(tests/python/fake_nccl.c, built here with cc); the loader cases point
NCCLBIND_NCCL_PATH at a bad candidate made in a temporary directory. The generator's
cases read each broken header_sets.toml of tests/generator/header_sets_broken (clean: an
error that starts with the file's name, then the line where the mistake has one) and generate each header of
tests/generator/headers/malformed (clean: generation ends and its C, Python extension,
stubs and Rust sys crate compile; accept: it ends, but something it wrote does not compile).
The Rust cases (bench/rust/hardening_cases.rs, built with rustc against the checkout's crate,
which cargo builds offline) run each misuse in its own process over the stand-in. The
pythonic rows are the property tests of tests/python/test_properties_fake.py (hypothesis,
derandomized) over the stand-in, one row per property (clean: it holds; other: hypothesis
found a call that ends otherwise); the lifetime rows are the threaded destroy/abort tests of
tests/python/test_communicator_fake.py (clean: no call reached the stand-in with a freed
handle, every call completed or raised an NcclError).

    --root DIR     exercise another checkout's code (e.g. `git worktree add DIR <commit>`, its
                   extension built there with `python3 setup.py build_ext --inplace`): the
                   before figures; the inputs are always this checkout's
    --before DIR   both: DIR's code, then this checkout's, in one before/after table
"""
from __future__ import annotations

import os
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree

ROOT = pathlib.Path(__file__).resolve().parent.parent
TIMEOUT = 10
SEED = 14
REAL_NCCL = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "lib" / "libnccl.so.2"

# (layer, what, code, expected error class name, stand-in?)
PYTHON_CASES = [
    ("raw", "mem_free(bytearray(7))", "_nccl.mem_free(bytearray(7))", "NcclInvalid", False),
    ("raw", "mem_free(<a record>)", "_nccl.mem_free(_nccl.nccl_config_initializer())", "NcclInvalid", False),
    ("raw", "comm_count(True)", "_nccl.comm_count(True)", "NcclInvalid", False),
    ("raw", "comm_count(<a record>)", "_nccl.comm_count(_nccl.nccl_config_initializer())", "NcclInvalid", False),
    ("raw", "comm_abort(False)", "_nccl.comm_abort(False)", "NcclInvalid", False),
    ("raw", "group_simulate_end(True)", "_nccl.group_simulate_end(True)", "NcclInvalid", False),
    ("raw", "group_simulate_end(<another record>)",
     "_nccl.group_simulate_end(_nccl.nccl_config_initializer())", "NcclInvalid", False),
    ("raw", "comm_shrink(None, [], None, 0)", "_nccl.comm_shrink(None, [], None, 0)", "NcclInvalid", False),
    ("raw", "get_error_string(True)", "_nccl.get_error_string(True)", "NcclInvalid", False),
    ("raw", "comm_deregister(1, bytearray(8))", "_nccl.comm_deregister(1, bytearray(8))", "NcclInvalid", False),
    ("raw", "all_reduce(count=True)", "_nccl.all_reduce(0, 0, True, 0, 0, 1, None)", "NcclInvalid", False),
    ("raw", "comm_init_rank(nranks=1.0)", "_nccl.comm_init_rank(1.0, bytes(128), 0)", "NcclInvalid", False),
    ("core", "UniqueId(128)", "ncclbind.UniqueId(128)", "NcclInvalid", False),
    ("core", "UniqueId(True)", "ncclbind.UniqueId(True)", "NcclInvalid", False),
    ("core", "as_buffer('float32', 1.5)",
     "from ncclbind.core.memory import NcclMemoryBlock\n"
     "b = NcclMemoryBlock(4096, 64, 0)\n"
     "try:\n    b.as_buffer('float32', 1.5)\nfinally:\n    b.ptr = 0", "NcclInvalid", False),
    ("core", "as_buffer('float32', True)",
     "from ncclbind.core.memory import NcclMemoryBlock\n"
     "b = NcclMemoryBlock(4096, 64, 0)\n"
     "try:\n    b.as_buffer('float32', True)\nfinally:\n    b.ptr = 0", "NcclInvalid", False),
    ("core", "Communicator.init(device='x')",
     "ncclbind.Communicator.init(1, 0, ncclbind.UniqueId(bytes(128)), device='x')", "NcclInvalid", True),
    ("core", "Communicator.init(device=True)",
     "ncclbind.Communicator.init(1, 0, ncclbind.UniqueId(bytes(128)), device=True)", "NcclInvalid", True),
    # the buffer resolver: NcclInvalid naming the argument ("sendbuf"), checked in python_outcome
    ("buffer", "NULL __cuda_array_interface__, 4 elements",
     "ncclbind.NcclBuffer.resolve(CAI((4,), '<f4', 0), 'sendbuf')", "NcclInvalid", False),
    ("buffer", "__cuda_array_interface__ shape (0, -1)",
     "ncclbind.NcclBuffer.resolve(CAI((0, -1), '<f4', 4096), 'sendbuf')", "NcclInvalid", False),
    ("buffer", "__cuda_array_interface__ shape (2.5,)",
     "ncclbind.NcclBuffer.resolve(CAI((2.5,), '<f4', 4096), 'sendbuf')", "NcclInvalid", False),
    ("buffer", "DLPack export of a bool array",
     "ncclbind.NcclBuffer.resolve(DLPack(np.zeros(3, bool)), 'sendbuf')", "NcclInvalid", False),
    ("buffer", "spec (True, 1, 'float32')",
     "ncclbind.NcclBuffer.resolve((True, 1, 'float32'), 'sendbuf')", "NcclInvalid", False),
    ("buffer", "spec (2**65, 1, 'float32')",
     "ncclbind.NcclBuffer.resolve((2**65, 1, 'float32'), 'sendbuf')", "NcclInvalid", False),
    ("buffer", "spec (4096, 1, 'float32', 'x')",
     "ncclbind.NcclBuffer.resolve((4096, 1, 'float32', 'x'), 'sendbuf')", "NcclInvalid", False),
    ("buffer", "spec (4096, 1, 'float32', 1.5)",
     "ncclbind.NcclBuffer.resolve((4096, 1, 'float32', 1.5), 'sendbuf')", "NcclInvalid", False),
    ("buffer", "spec (4096, True, 'float32')",
     "ncclbind.NcclBuffer.resolve((4096, True, 'float32'), 'sendbuf')", "NcclInvalid", False),
]

# Stand-ins for device arrays, defined in each buffer case's process.
BUFFER_PRELUDE = """import numpy as np
class CAI:
    def __init__(self, shape, typestr, address):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (address, False),
                                         "version": 3, "strides": None}
class DLPack:
    def __init__(self, array):
        self.array = array
    def __dlpack_device__(self):
        return (2, 0)
    def __dlpack__(self, stream=None, max_version=None):
        return self.array.__dlpack__()
"""


def random_int_cases(rng: random.Random) -> list:
    """Seeded integers out of range for an int parameter: each must be refused."""
    cases = []
    for _ in range(6):
        v = rng.choice([-(2 ** rng.randrange(32, 80)), 2 ** rng.randrange(31, 80)])
        cases.append(("raw", f"get_error_string({v})", f"_nccl.get_error_string({v})", "NcclInvalid", False))
    return cases


def python_outcome(code: str, expected: str, env: dict, layer: str = "") -> str:
    # a buffer's refusal must also name the argument it was given as
    named = " and 'sendbuf' in str(e)" if layer == "buffer" else ""
    program = ("import sys, ncclbind\nfrom ncclbind import _nccl, errors\n" +
               (BUFFER_PRELUDE if layer == "buffer" else "") +
               "try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) +
               "except errors.NcclError as e:\n"
               f"    print('CLEAN' if type(e).__name__ == {expected!r}{named} else 'OTHER', type(e).__name__, e)\n"
               "except Exception as e:\n    print('OTHER', type(e).__name__, e)\n"
               "else:\n    print('ACCEPT')\n")
    return run([sys.executable, "-c", program], env)


def run(argv: list, env: dict, cwd=None) -> str:
    try:
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd)
    except subprocess.TimeoutExpired:
        return "hang"
    if p.returncode < 0:
        return "crash"
    word = (p.stdout.split() or ["OTHER"])[0]
    return {"CLEAN": "clean", "ACCEPT": "accept"}.get(word, "other") + "\t" + p.stdout.strip()[:160]


def loader_candidates(tmp: pathlib.Path) -> list:
    """(what, path) of libraries that must be refused as libnccl, with the word the reason needs."""
    libm = pathlib.Path("/lib/x86_64-linux-gnu/libm.so.6").resolve()
    head = REAL_NCCL.open("rb").read(1 << 20)
    (tmp / "c1.so").write_bytes(head)
    os.mkfifo(tmp / "c2.so")
    (tmp / "c3.so").mkdir()
    (tmp / "c4.so").write_text("INPUT(libnccl.so.2)\n")
    (tmp / "c5.so").write_bytes(b"")
    elf = bytearray(libm.read_bytes())
    aarch64 = bytearray(elf)
    aarch64[18:20] = (183).to_bytes(2, "little")  # e_machine = EM_AARCH64
    (tmp / "c6.so").write_bytes(aarch64)
    elf32 = bytearray(elf)
    elf32[4] = 1  # EI_CLASS = ELFCLASS32
    (tmp / "c7.so").write_bytes(elf32)
    return [
        ("truncated copy of libnccl", tmp / "c1.so", "truncated"),
        ("FIFO", tmp / "c2.so", "regular file"),
        ("directory", tmp / "c3.so", "directory"),
        ("text file", tmp / "c4.so", "ELF"),
        ("empty file", tmp / "c5.so", "ELF"),
        ("libm as libnccl", libm, "ncclGetVersion"),
        ("aarch64 ELF", tmp / "c6.so", "aarch64"),
        ("32-bit ELF", tmp / "c7.so", "ELFCLASS32"),
        ("missing file", tmp / "c8.so", "No such file"),
    ]


def loader_outcome(path: pathlib.Path, word: str, env: dict) -> str:
    program = ("from ncclbind import _nccl, errors\ntry:\n    v = _nccl.get_version()\n"
               "except errors.NcclLibraryNotFoundError as e:\n"
               f"    print('CLEAN' if {word!r} in str(e) else 'OTHER', repr(str(e)[-200:]))\n"
               "except Exception as e:\n    print('OTHER', type(e).__name__, e)\n"
               "else:\n    print('ACCEPT', v)\n")
    return run([sys.executable, "-c", program], dict(env, NCCLBIND_NCCL_PATH=str(path)))


def header_sets_outcome(toml: pathlib.Path, code_root: pathlib.Path) -> str:
    program = ("import sys\nfrom generator.header_sets import load_header_sets\n"
               "try:\n    load_header_sets(sys.argv[1])\n"
               "except SystemExit as e:\n"
               "    named = str(e).startswith(sys.argv[1] + ':')\n"
               "    print('CLEAN' if named else 'OTHER', str(e)[-160:])\n"
               "except Exception as e:\n    print('OTHER', type(e).__name__, e)\n"
               "else:\n    print('ACCEPT')\n")
    return run(["/usr/bin/python3", "-c", program, str(toml)], dict(os.environ), cwd=code_root)


def malformed_header_outcome(header: pathlib.Path, code_root: pathlib.Path) -> str:
    """Generates the C, Python and Rust of one malformed header in code_root's generator and
    compiles them (tests/fuzz/cli_cases.py's HEADER_PROGRAM): clean, accept (it ended, but wrote
    something that does not compile) or other."""
    sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
    from cli_cases import HEADER_PROGRAM
    rustc = os.environ.get("RUSTC") or shutil.which("rustc") or os.path.expanduser("~/.cargo/bin/rustc")
    try:
        p = subprocess.run(["/usr/bin/python3", "-c", HEADER_PROGRAM, str(header)], capture_output=True, text=True,
                           timeout=TIMEOUT * 6, cwd=code_root, env=dict(os.environ, NCCLBIND_FUZZ_RUSTC=rustc))
    except subprocess.TimeoutExpired:
        return "hang"
    if p.returncode < 0:
        return "crash"
    why = (p.stderr.strip().splitlines() or [""])[-1][:160]
    return {0: "clean", 1: "accept\t" + why}.get(p.returncode, "other\t" + why)


RUST_CASES = ["null DeviceSlice<f32>, 4 elements", "null DeviceSliceMut<f32>, 4 elements",
              "DeviceSlice<f64> at 0x1001", "CommConfig cga_cluster_size -5", "CommConfig cta_policy 999",
              "CommConfig comm_name of 100 kB"]


def rust_rows(code_root: pathlib.Path, tmp: pathlib.Path, fake_env: dict) -> list:
    """bench/rust/hardening_cases.rs against code_root's crate, one process per case."""
    cargo = shutil.which("cargo") or os.path.expanduser("~/.cargo/bin/cargo")
    rustc = shutil.which("rustc") or os.path.expanduser("~/.cargo/bin/rustc")
    target = tmp / "rust-target"
    program = tmp / "hardening_cases"
    build = subprocess.run([cargo, "build", "--offline", "-q"], cwd=code_root / "bindings" / "rust",
                           env=dict(os.environ, CARGO_TARGET_DIR=str(target)), capture_output=True, text=True)
    if build.returncode == 0:
        debug = target / "debug"
        build = subprocess.run([rustc, "--edition", "2021", "-o", str(program),
                                str(ROOT / "bench" / "rust" / "hardening_cases.rs"),
                                "--extern", f"ncclbind={debug / 'libncclbind.rlib'}", "-L", f"dependency={debug / 'deps'}"],
                               capture_output=True, text=True)
    if build.returncode != 0:
        why = "other\tdoes not build: " + (build.stderr.strip().splitlines() or ["?"])[-1][:120]
        return [("rust", case, why) for case in RUST_CASES]
    return [("rust", case, run([str(program), case], fake_env)) for case in RUST_CASES]


def pytest_rows(layer: str, test_file: str, selection: list, code_root: pathlib.Path, tmp: pathlib.Path,
                fake_env: dict) -> list:
    """A row per test case of tests/python/<test_file> (this checkout's) run over the stand-in
    with code_root's ncclbind: clean when it passed, other (its first error line) when not."""
    report = tmp / f"{layer}.xml"
    env = dict(fake_env, NCCLBIND_FAKE_NCCL_ACTIVE="1",
               PYTHONPATH=os.pathsep.join([fake_env["PYTHONPATH"], str(ROOT / "tests" / "python")]))
    try:
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                        test_file, *selection], env=env, cwd=ROOT / "tests" / "python", capture_output=True,
                       text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return [(layer, test_file, "hang")]
    if not report.exists():
        return [(layer, test_file, "crash")]
    rows = []
    for case in ElementTree.parse(report).iter("testcase"):
        name = case.get("name", "?").removeprefix("test_")
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if case.find("skipped") is not None:
            continue
        if failure is None:
            rows.append((layer, name, "clean"))
        else:
            rows.append((layer, name, "other\t" + (failure.get("message") or "").splitlines()[0][:160]
                         if failure.get("message") else "other"))
    return rows


def collect(code_root: pathlib.Path) -> list:
    """(layer, input, outcome) for every input, exercising code_root's code."""
    env = dict(os.environ, PYTHONPATH=str(code_root / "bindings" / "python"), CUDA_VISIBLE_DEVICES="")
    env.pop("NCCLBIND_NCCL_PATH", None)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        stand_in = tmp / "libnccl.so.2"
        subprocess.run([shutil.which("cc") or "gcc", "-shared", "-fPIC", "-O1", "-fvisibility=hidden", "-o",
                        str(stand_in), str(ROOT / "tests" / "python" / "fake_nccl.c")], check=True)
        fake_env = dict(env, NCCLBIND_NCCL_PATH=str(stand_in), NCCLBIND_CUDA_BACKEND="helper")
        for layer, what, code, expected, fake in PYTHON_CASES + random_int_cases(random.Random(SEED)):
            rows.append((layer, what, python_outcome(code, expected, fake_env if fake else env, layer)))
        for what, path, word in loader_candidates(tmp):
            rows.append(("loader", what, loader_outcome(path, word, env)))
        rows.append(("loader", "version -7", loader_outcome(stand_in, "version", dict(env, NCCLBIND_FAKE_NCCL_VERSION="-7"))))
        rows += rust_rows(code_root, tmp, fake_env)
        rows += pytest_rows("pythonic", "test_properties_fake.py", [], code_root, tmp, fake_env)
        rows += pytest_rows("lifetime", "test_communicator_fake.py",
                            ["-k", "threads_call or destroy_waiting"], code_root, tmp, fake_env)
    for toml in sorted((ROOT / "tests" / "generator" / "header_sets_broken").glob("*.toml")):
        rows.append(("toml", toml.name, header_sets_outcome(toml, code_root)))
    for header in sorted((ROOT / "tests" / "generator" / "headers" / "malformed").glob("*.h")):
        rows.append(("headers", header.name, malformed_header_outcome(header, code_root)))
    return rows


KINDS = ["clean", "other", "accept", "crash", "hang"]


def counts_by_layer(rows: list) -> dict:
    """{layer (and "all"): {kind: count}}"""
    out = {}
    for layer in [*dict.fromkeys(r[0] for r in rows), "all"]:
        out[layer] = {k: sum(1 for r in rows if layer in (r[0], "all") and r[2].split("\t")[0] == k) for k in KINDS}
    return out


def print_table(columns: dict) -> None:
    """One block of kinds per column ({title: rows}), a line per layer."""
    counted = {title: counts_by_layer(rows) for title, rows in columns.items()}
    layers = list(dict.fromkeys(layer for c in counted.values() for layer in c))
    width = 6 * len(KINDS) + len(KINDS) - 1
    if len(columns) > 1:
        print(f"{'':8} {'':>6} " + " | ".join(f"{title:^{width}}" for title in columns))
    print(f"{'layer':8} {'inputs':>6} " + " | ".join(" ".join(f"{k:>6}" for k in KINDS) for _ in columns))
    for layer in layers:
        inputs = max(sum(c.get(layer, {}).values()) for c in counted.values())
        print(f"{layer:8} {inputs:>6} " + " | ".join(
            " ".join(f"{c.get(layer, {}).get(k, 0):>6}" for k in KINDS) for c in counted.values()))


def main() -> int:
    verbose = "--verbose" in sys.argv
    code_root = pathlib.Path(sys.argv[sys.argv.index("--root") + 1]).resolve() if "--root" in sys.argv else ROOT
    columns = {}
    if "--before" in sys.argv:
        columns["before"] = collect(pathlib.Path(sys.argv[sys.argv.index("--before") + 1]).resolve())
        columns["after"] = collect(ROOT)
    else:
        columns[str(code_root)] = collect(code_root)
    print_table(columns)
    if verbose:
        for title, rows in columns.items():
            print(f"\n{title}")
            for layer, what, outcome in rows:
                print(f"{layer:8} {what:40} {outcome}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
