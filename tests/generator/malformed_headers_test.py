"""The generator on malformed headers (headers/malformed/: one small synthetic header per
construct it cannot bind faithfully). Each header's comment lists the report lines it must
produce, `skipped <kind> <name>: <reason>` or `renamed <kind> <name>: <reason>`, exactly; the
generator must finish, and every file it emits for the header must compile: the C binding
and its C++ layout test, the Python extension's C, its stub and modules, and the Rust sys
crate with its layout assertions.

    /usr/bin/python3 -m pytest tests/generator/malformed_headers_test.py
"""
import ast
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

HERE = Path(os.path.abspath(__file__)).parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402

from generator.policy.conventions import load_conventions  # noqa: E402
from generator.header_sets import HeaderSet  # noqa: E402
from generator.passes.extract import extract_header_set  # noqa: E402
from generator.passes.merge import merge_all  # noqa: E402
from generator.render import RenderContext  # noqa: E402
from generator.render import c as render_c  # noqa: E402
from generator.render import python as render_python  # noqa: E402
from generator.render import rust as render_rust  # noqa: E402

MALFORMED = HERE / "headers" / "malformed"
CASES = sorted(p.name for p in MALFORMED.glob("nccl_*.h"))
RUNTIME_INCLUDE = ROOT / "runtime" / "include"
EXTENSION_SRC = ROOT / "bindings" / "python" / "src"  # ncclbind_python.h
RUST_SYS = "bindings/rust/src/generated/sys/"


def expected_report(header: Path) -> list[str]:
    """The `expect:` lines of the header's leading comment."""
    return [line.split("expect:", 1)[1].strip() for line in header.read_text().splitlines()
            if "expect:" in line]


def generate(header: str):
    hs = HeaderSet("malformed-1.0.0", "nccl", "1.0.0", (header,), MALFORMED, MALFORMED, "libmalformed.so", None,
                   True, "tests/generator/headers/malformed")
    ir = extract_header_set(hs, {hs.name: hs}, load_conventions())
    ctx = RenderContext(merge_all([ir]), [ir], [hs], load_conventions())
    files = {}
    for renderer in (render_c, render_python, render_rust):
        files.update(renderer.render(ctx))
    return ir, files


def report(ir) -> list[str]:
    return sorted([f"skipped {s.kind} {s.name}: {s.reason}" for s in ir.skipped]
                  + [f"renamed {r.kind} {r.name}: {r.reason}" for r in ir.renamed])


def compiler(*argv, cwd=None):
    run = subprocess.run(list(argv), capture_output=True, text=True, cwd=cwd)
    assert run.returncode == 0, f"{' '.join(map(str, argv))}:\n{run.stderr}"


def find_rustc() -> str:
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    for candidate in (os.environ.get("RUSTC"), shutil.which("rustc"), str(home / ".cargo/bin/rustc")):
        if candidate and Path(candidate).is_file():
            return candidate
    pytest.fail("no rustc: set RUSTC or install Rust under ~/.cargo")


def write(files: dict, root: Path) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@pytest.fixture(scope="module", params=CASES)
def case(request):
    header = request.param
    return header, *generate(header)


def test_the_corpus_is_there():
    assert len(CASES) >= 8 and all(expected_report(MALFORMED / h) for h in CASES)


def test_the_report_names_each_declaration_and_why(case):
    header, ir, _ = case
    assert report(ir) == sorted(expected_report(MALFORMED / header))


def test_a_record_that_is_not_mirrored_is_an_opaque_pointer_where_pointed_to():
    ir, files = generate("nccl_skipped_record_pointer.h")
    use = next(f for f in ir.functions if f.name == "mfUsePacked")
    assert (use.params[0].type.kind, use.params[0].type.pointee.kind) == ("pointer", "opaque")
    assert use.params[0].direction == "in"  # an address the caller has, not a value to fill
    assert "struct nb_mfPacked_t *p" in files["bindings/c/include/ncclbind/nccl.h"]


def test_a_reserved_parameter_name_is_renamed_alike_in_every_language():
    _, files = generate("nccl_reserved_names.h")
    c = files["bindings/c/include/ncclbind/nccl.h"]
    stub = files["bindings/python/ncclbind/_generated/_nccl.pyi"]
    rust = files[RUST_SYS + "nccl.rs"]
    assert "nb_mfNames(int fn_, int in_, int None_, int lambda_, int type_, int match_, int ref_, int self_," in c
    assert "def mf_names(fn_: int, in_: int, None_: int, lambda_: int, type_: int" in stub
    assert "fn_: c_int,\n        in_: c_int,\n        None_: c_int," in rust
    assert "def None_(self) -> int" in stub and "def type(self) -> int" in stub  # a field: Python only


def test_the_c_binding_and_its_layout_test_compile(case, tmp_path):
    header, _, files = case
    write(files, tmp_path)
    include = tmp_path / "bindings" / "c" / "include"
    compiler("gcc", "-fsyntax-only", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{include}", f"-I{RUNTIME_INCLUDE}",
             str(tmp_path / "bindings" / "c" / "src" / "nccl.c"))
    [layout] = (tmp_path / "bindings" / "c" / "layout_tests").glob("*.cc")
    compiler("g++", "-fsyntax-only", "-std=c++17", "-Wno-invalid-offsetof", f"-I{include}", f"-I{RUNTIME_INCLUDE}",
             f"-I{MALFORMED}", str(layout))


def test_the_python_extension_and_stubs_compile(case, tmp_path):
    header, _, files = case
    write(files, tmp_path)
    python_include = sysconfig.get_paths()["include"]
    for rel, text in files.items():
        if rel.endswith((".py", ".pyi")):
            ast.parse(text, rel)
    for source in (tmp_path / "bindings" / "python" / "src" / "generated").glob("*.c"):
        compiler("gcc", "-fsyntax-only", "-std=c11", "-Wall", "-Wextra", "-Werror",
                 f"-I{tmp_path / 'bindings' / 'c' / 'include'}", f"-I{RUNTIME_INCLUDE}", f"-I{EXTENSION_SRC}",
                 f"-I{python_include}", str(source))


def test_the_rust_sys_crate_compiles(case, tmp_path):
    header, _, files = case
    sys_files = {"sys/" + rel.removeprefix(RUST_SYS): text for rel, text in files.items() if rel.startswith(RUST_SYS)}
    write(sys_files, tmp_path)
    (tmp_path / "lib.rs").write_text("#![allow(dead_code)]\npub mod sys;\n")
    env = dict(os.environ)
    env.setdefault("RUSTUP_HOME", str(Path(pwd.getpwuid(os.getuid()).pw_dir) / ".rustup"))
    run = subprocess.run([find_rustc(), "--edition", "2021", "--crate-type", "lib", "-o", str(tmp_path / "libm.rlib"),
                          str(tmp_path / "lib.rs")], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"] + sys.argv[1:]))
