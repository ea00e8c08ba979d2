"""The Rust renderer on a synthetic header (headers/nccl_layout_cases.h) with the layouts it
plans by hand: the rendered crate compiles with its layout assertions (clang's numbers),
a wrong number fails the build, and the bitfield accessors write exactly the bits the C++
compiler writes for the same header.

    /usr/bin/python3 -m pytest tests/rust/render_test.py
"""
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(os.path.abspath(__file__)).parent
sys.path.insert(0, str(HERE.parent.parent))

import pytest  # noqa: E402

from generator.policy.conventions import load_conventions  # noqa: E402
from generator.header_sets import HeaderSet  # noqa: E402
from generator.passes.extract import extract_header_set  # noqa: E402
from generator.passes.merge import merge_all  # noqa: E402
from generator.render import RenderContext  # noqa: E402
from generator.render import rust as render_rust  # noqa: E402

HEADERS = HERE / "headers"
HEADER = "nccl_layout_cases.h"
SYS = "bindings/rust/src/generated/sys/"


def find_rustc() -> str:
    user_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    for candidate in (os.environ.get("RUSTC"), shutil.which("rustc"), str(user_home / ".cargo/bin/rustc")):
        if candidate and Path(candidate).is_file():
            return candidate
    pytest.fail("no rustc: set RUSTC or install Rust under ~/.cargo")


def rustup_environment() -> dict:
    """A rustup proxy finds its toolchain through RUSTUP_HOME; Bazel tests move HOME."""
    env = dict(os.environ)
    env.setdefault("RUSTUP_HOME", str(Path(pwd.getpwuid(os.getuid()).pw_dir) / ".rustup"))
    return env


def render():
    hs = HeaderSet("cases-1.0.0", "nccl", "1.0.0", (HEADER,), HEADERS, HEADERS, "libcases.so", None, True,
                   "tests/rust/headers")
    ir = extract_header_set(hs, {hs.name: hs}, load_conventions())
    ctx = RenderContext(merge_all([ir]), [ir], [hs], load_conventions())
    return ir, render_rust.render(ctx)


@pytest.fixture(scope="module")
def rendered():
    return render()


def write_crate(files: dict, root: Path, main: str | None = None) -> Path:
    for rel, text in files.items():
        path = root / "sys" / rel.removeprefix(SYS)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    crate_root = root / ("main.rs" if main else "lib.rs")
    crate_root.write_text("#![allow(dead_code)]\npub mod sys;\n" + (main or ""))
    return crate_root


def rustc(crate_root: Path, out: Path, crate_type: str):
    return subprocess.run([find_rustc(), "--edition", "2021", "--crate-type", crate_type, "-o", str(out),
                           str(crate_root)], capture_output=True, text=True, env=rustup_environment())


def test_the_rendered_mirrors_meet_clangs_layout(rendered, tmp_path):
    _, files = rendered
    result = rustc(write_crate(files, tmp_path), tmp_path / "libcases.rlib", "lib")
    assert result.returncode == 0, result.stderr


def test_a_wrong_layout_number_fails_the_build(rendered, tmp_path):
    _, files = rendered
    layout = SYS + "layout_assertions/cases_1_0_0.rs"
    assert "assert_record!(caseBits_t, size 16, align 8);" in files[layout]
    broken = dict(files)
    broken[layout] = files[layout].replace("assert_record!(caseBits_t, size 16,", "assert_record!(caseBits_t, size 24,")
    result = rustc(write_crate(broken, tmp_path), tmp_path / "libcases.rlib", "lib")
    assert result.returncode != 0
    assert "caseBits_t: size differs from clang's" in result.stderr


def test_rendering_is_deterministic(rendered):
    _, files = rendered
    assert render()[1] == files


def bitfield_probes(ir):
    """(record, field, C++ value, Rust value): each bitfield set to all ones and to a small value."""
    probes = []
    for rec in ir.records:
        for f in rec.fields:
            if not (f.bit_width and f.name):
                continue
            if f.type.kind == "bool":
                probes.append((rec.name, f.name, "true", "true"))
                continue
            signed = f.type.kind == "int" and f.type.signed
            values = [-1, max(-3, -(1 << (f.bit_width - 1)))] if signed else \
                [(1 << f.bit_width) - 1, min(5, (1 << f.bit_width) - 1)]
            for v in values:
                if f.type.kind == "enum":
                    probes.append((rec.name, f.name, f"({f.type.name}){v}", f"{f.type.name}({v})"))
                else:
                    probes.append((rec.name, f.name, str(v), str(v)))
    return probes


def test_bitfield_accessors_write_the_bits_the_cpp_compiler_writes(rendered, tmp_path):
    ir, files = rendered
    probes = bitfield_probes(ir)
    assert len(probes) >= 14

    cpp_lines = [f'#include "{HEADERS / HEADER}"', "#include <cstdio>", "#include <cstring>",
                 "static void dump(const void *p, size_t n) {",
                 "  for (size_t i = 0; i < n; i++) std::printf(\"%02x\", ((const unsigned char *)p)[i]);",
                 "  std::printf(\"\\n\");", "}", "int main() {"]
    for record, field, value, _ in probes:
        cpp_lines += ["  {", f"    {record} v; std::memset(&v, 0, sizeof v);", f"    v.{field} = {value};",
                      "    dump(&v, sizeof v);", "  }"]
    cpp_lines += ["}"]
    (tmp_path / "probe.cc").write_text("\n".join(cpp_lines) + "\n")
    subprocess.run(["c++", "-std=c++17", "-w", str(tmp_path / "probe.cc"), "-o", str(tmp_path / "probe_cpp")],
                   check=True)
    from_cpp = subprocess.run([str(tmp_path / "probe_cpp")], capture_output=True, text=True, check=True).stdout

    rust_lines = ["fn dump<T>(v: &T) {",
                  "    let bytes = unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) };",
                  "    println!(\"{}\", bytes.iter().map(|b| format!(\"{b:02x}\")).collect::<String>());", "}",
                  "fn main() {", "    use sys::nccl::*;"]
    for record, field, _, literal in probes:
        rust_lines += ["    {", f"        let mut v = {record}::default();", f"        v.set_{field}({literal});",
                       f"        assert_eq!(v.{field}(), {literal}, \"{record}.{field} reads back\");",
                       "        dump(&v);", "    }"]
    rust_lines += ["}"]
    crate_root = write_crate(files, tmp_path / "rust", "\n".join(rust_lines) + "\n")
    result = rustc(crate_root, tmp_path / "probe_rust", "bin")
    assert result.returncode == 0, result.stderr
    from_rust = subprocess.run([str(tmp_path / "probe_rust")], capture_output=True, text=True, check=True).stdout

    for (record, field, value, _), cpp, rs in zip(probes, from_cpp.splitlines(), from_rust.splitlines()):
        assert rs == cpp, f"{record}.{field} = {value}: Rust wrote {rs}, C++ wrote {cpp}"
    assert len(from_rust.splitlines()) == len(probes)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"] + sys.argv[1:]))
