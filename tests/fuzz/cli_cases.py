"""The fuzz classes of the command-line tools and the generator, one process per case:

  bench_flags   `python -m ncclbind.bench` with one bad flag among valid ones: clean is exit
                status 2 with one line on stderr, before any work (seconds, no traceback)
  trace_input   `python -m ncclbind.trace summarize` on a trace folder damaged at random: clean
                is exit 0 (each damaged record named file:line) or 2 with one line, no traceback
  header_sets   the generator's header_sets.toml loader on the default file damaged at random
                (a key misspelled, a type changed, a table renamed, a set depending on itself,
                two sets of one version, broken TOML): clean is one line that names the file
                (SystemExit), where the damage makes the file wrong; a damage that leaves it
                valid must load
  headers       the generator on random library headers (enums, records, unions and empty
                structs by value, bit-fields, macros, variadic and callback functions, ssize_t):
                clean is each declaration bound or skipped with a reason, and the C binding, the
                Python extension's C (gcc -fsyntax-only) and the Python files (ast) it wrote
                compile; silent is a binding that does not compile. Some headers are C only
                (_Bool, restrict, a field named class, `f()`): parsed as C

Each case's run() returns (outcome, "what | detail") in driver.py's words.
"""
from __future__ import annotations

import json
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TIMEOUT_S = 30


@dataclass
class CommandCase:
    what: str
    argv: list
    env: dict
    bad: bool = True            # a bad input: clean is exit status 2 and one line on stderr
    summarized: bool = False    # a damaged input that may also be read: exit 0 is clean too
    cwd: str | None = None
    workdir: str | None = None  # removed after the run
    expect_line: str = ""       # what a bad input's one line must contain (the file's name)
    wrote_invalid: str = ""     # the line of a run that ended but wrote what does not compile

    def run(self) -> tuple[str, str]:
        try:
            p = subprocess.run(self.argv, env=self.env, cwd=self.cwd, capture_output=True, text=True,
                               timeout=TIMEOUT_S, errors="backslashreplace")
        except subprocess.TimeoutExpired:
            return "hang", f"{self.what} | no end in {TIMEOUT_S} s"
        finally:
            if self.workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)
        err = p.stderr.strip()
        line = f"{self.what} | exit {p.returncode}: {err[-200:]!r}"
        if p.returncode < 0:
            return "crash", line
        if "Traceback (most recent call last)" in p.stderr:
            return "raw", line
        if self.wrote_invalid and self.wrote_invalid in err:
            return "silent", line  # taken, and bound as something that does not compile
        if not self.bad:
            return ("clean" if p.returncode == 0 else "refused"), line
        if p.returncode == 2 and err and "\n" not in err and self.expect_line in err:
            return "clean", line
        if self.summarized and p.returncode == 0:
            return "clean", line
        return "silent", line  # not refused up front in one line: accepted, or failed later


def python_env(root: pathlib.Path, libraries: dict) -> dict:
    from driver import package_path
    return dict(os.environ, NCCLBIND_NCCL_PATH=libraries["nccl"], CUDA_VISIBLE_DEVICES="",
                NCCLBIND_CUDA_BACKEND="helper", PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg",
                PYTHONPATH=str(package_path(root)))


# ---- bench flags ------------------------------------------------------------------------------

SIZE_FLAGS = ["-b", "-e", "-i"]
BAD_VALUES = {
    "-b": ["1e400", "-8", "abc", "nan", "inf", "8Q", "9" * 30, ""],
    "-e": ["1e400", "-8", "abc", "nan", "inf", "8Q", "9" * 30],
    "-i": ["1e400", "-1", "abc", "nan", "0"],
    "-f": ["0", "1", "-2", "nan", "inf", "x", "1e400"],
    "-n": ["-1", "x", "1.5", "1e400"],
    "-w": ["-1", "x", "1e400"],
    "-c": ["-1", "x"],
    "-d": ["floaty", "", "\udcff"],  # \udcff: the byte 0xff, not UTF-8
    "-o": ["median", "", "s\udcffm"],
    "-r": ["-1", "x", "1.5", "99"],
    "-a": ["7", "x", "-1"],
    "-z": ["2", "x"],
    "-R": ["3", "-1", "x"],
    "-T": ["-1", "nan", "x", "0", "inf"],
    "-t": ["0", "-1", "x"],
    "-g": ["-1", "x", "1e400"],
    "--collectives": ["foo", "", "all_reduce,,", "all_reduce,foo"],
    "--backends": ["foo", "", "ncclbind,,"],
    "--iter-bytes-cap": ["x", "-1", "1e400"],
    "--latency-max": ["1e400", "x", "-1"],
    "--latency-iters": ["0", "-1", "x"],
    "--latency-rounds": ["0", "-1", "x"],
    "--c-worker": ["/nonexistent/worker"],
    "--rust-worker": ["/nonexistent/worker"],
}
GOOD = {"-b": ["8", "1K"], "-e": ["1K", "64K"], "-f": ["2"], "-n": ["1", "2"], "-w": ["0", "1"], "-c": ["0", "1"],
        "-d": ["float", "int32"], "-o": ["sum", "max"]}


def bench_flags_cases(count: int, seed: int, root: pathlib.Path, libraries: dict):
    env = python_env(root, libraries)
    for i in range(count):
        rng = random.Random(f"bench_flags:{seed}:{i}")
        flags = {k: rng.choice(v) for k, v in rng.sample(sorted(GOOD.items()), rng.randrange(0, 4))}
        work = tempfile.mkdtemp(prefix="fuzz-bench-")
        kind = rng.random()
        if kind < 0.15:  # a size list far too long to build (issue 24: -b 1 -e 1G -i 1)
            flags.update({"-b": "1", "-e": rng.choice(["1G", "1T", "8E"]), "-i": "1"})
            flags.pop("-f", None)
            flag = "-i"
        elif kind < 0.35:  # an output that cannot be written: known before the run, or a FIFO
            flag = rng.choice(["-J", "--plot"])
            target = rng.choice(["missing", "directory", "fifo", "readonly"])
            path = {"missing": os.path.join(work, "no", "such", "out"), "directory": work,
                    "fifo": os.path.join(work, "fifo"), "readonly": "/proc/version"}[target]
            if target == "fifo":
                os.mkfifo(path)
            flags[flag] = path
        else:
            flag = rng.choice(sorted(BAD_VALUES))
            flags[flag] = rng.choice(BAD_VALUES[flag])
        argv = [sys.executable, "-m", "ncclbind.bench", "--backends", "ncclbind", "--progress", "never"]
        for k, v in flags.items():
            argv += [k, v]
        shown = " ".join(f"{k} {v!r}" for k, v in flags.items())
        # the one line names the flag: its short or long spelling (argparse's own errors name one)
        yield CommandCase(f"bench {shown}", argv, env, workdir=work)


# ---- trace input ---------------------------------------------------------------------------------

def good_trace(rng: random.Random, pid: int) -> list[dict]:
    records = [{"type": "process", "pid": pid, "rank_env": str(pid % 2)},
               {"type": "comm", "comm": 7, "t": 1, "nranks": 2, "rank": pid % 2, "key": "k"}]
    t = 2
    for _ in range(rng.randrange(1, 30)):
        t += rng.randrange(1, 1000)
        records.append({"type": "call", "fn": rng.choice(["ncclAllReduce", "ncclBroadcast", "ncclSend"]), "t": t,
                        "tid": 1, "comm": 7, "count": rng.randrange(0, 1 << 20), "bytes": rng.randrange(0, 1 << 22),
                        "dur_ns": rng.randrange(1, 10 ** 6), "bus": rng.choice([1, 2, 3])})
    records.append({"type": "counters", "fn": "ncclAllReduce", "calls": 3})
    return records


WEIRD_VALUES = [None, -1, 2 ** 70, -2 ** 70, 1e308, float("nan"), "x", "\ud800", [], {}, True, 1.5, "", [1, [2, [3]]]]


def damaged_line(rng: random.Random, record: dict) -> str:
    kind = rng.randrange(8)
    if kind == 0:
        text = json.dumps(record)
        return text[:rng.randrange(len(text))]                   # cut short
    if kind == 1:
        return json.dumps(rng.choice([[1], 1, "x", None, [record]]))  # not an object
    if kind == 2:
        r = dict(record)
        r[rng.choice(list(r))] = rng.choice(WEIRD_VALUES)         # a field of another type
        return json.dumps(r, allow_nan=True)
    if kind == 3:
        r = dict(record)
        r.pop(rng.choice(list(r)), None)                          # a field missing
        return json.dumps(r)
    if kind == 4:
        return "[" * rng.choice([10, 1000, 100000]) + "]" * rng.choice([0, 10])  # deep nesting
    if kind == 5:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))).decode("latin-1")
    if kind == 6:
        return json.dumps(dict(record, type=rng.choice(["telemetry", "", None, 7, "call "])))
    return json.dumps(dict(record, t=rng.choice([float("inf"), -1, 2 ** 70, "1"])), allow_nan=True)


def trace_input_cases(count: int, seed: int, root: pathlib.Path, libraries: dict):
    env = python_env(root, libraries)
    for i in range(count):
        rng = random.Random(f"trace_input:{seed}:{i}")
        work = pathlib.Path(tempfile.mkdtemp(prefix="fuzz-trace-"))
        folder = work / "traces"
        folder.mkdir()
        what = []
        for pid in range(rng.randrange(1, 4)):
            records = good_trace(rng, pid)
            lines = [json.dumps(r) for r in records]
            for at in rng.sample(range(len(records)), min(len(records), rng.randrange(1, 4))):
                lines[at] = damaged_line(rng, records[at])
            path = folder / f"trace-host-{pid}.jsonl"
            encoded = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
            path.write_bytes(encoded)
        odd = rng.random()
        if odd < 0.1:
            os.mkfifo(folder / "trace-host-99.jsonl")
            what.append("a FIFO")
        elif odd < 0.2:
            (folder / "trace-host-98.jsonl").mkdir()
            what.append("a folder")
        elif odd < 0.25:
            (folder / "trace-host-97.jsonl").symlink_to(folder / "trace-host-97.jsonl")
            what.append("a link loop")
        elif odd < 0.3:
            (folder / "trace-host-96.jsonl").write_bytes(b"")
            what.append("an empty file")
        argv = [sys.executable, "-m", "ncclbind.trace", "summarize", str(folder), "--png", str(work / "t.png")]
        if rng.random() < 0.3:
            argv.append("--strict")
        strict = "--strict" in argv
        # damaged but readable: exit 0 naming each record, or 2 in one line (--strict stops at
        # the first; a damage can leave a record valid, so 0 is right for --strict too)
        yield CommandCase(f"trace {i} {' '.join(what) or 'damaged lines'}{' --strict' if strict else ''}",
                          argv, env, summarized=True, workdir=str(work))


# ---- header_sets.toml ------------------------------------------------------------------------------

def header_sets_text(root: pathlib.Path) -> str:
    return (ROOT / "generator" / "header_sets.toml").read_text()


def damaged_header_sets(rng: random.Random, text: str) -> tuple[str, str, bool]:
    """(damaged text, what was done, whether the file is still valid)."""
    lines = text.splitlines()
    keyed = [i for i, line in enumerate(lines) if re.match(r"^[a-z_]+ = ", line)]
    at = rng.choice(keyed)
    key, value = lines[at].split(" = ", 1)
    kind = rng.randrange(8)
    if kind == 0:
        lines[at] = f"{key}{rng.choice('xyz')} = {value}" if rng.random() < 0.5 else f"{key[1:]} = {value}"
        return "\n".join(lines), f"line {at + 1}: key {key} misspelled", False
    if kind == 1:
        lines[at] = f"{key} = {rng.choice(['7', 'true', '[1]', '{a = 1}', '1.5'])}" if value.startswith('"') \
            else f'{key} = "{value}"'
        return "\n".join(lines), f"line {at + 1}: {key} of another type", False
    if kind == 2:
        tables = [i for i, line in enumerate(lines) if line == "[[header_set]]"]
        t = rng.choice(tables)
        lines[t] = rng.choice(["[[header_sets]]", "[header_set]", "[[header-set]]", "[[Header_set]]"])
        return "\n".join(lines), f"line {t + 1}: table renamed {lines[t]}", False
    if kind == 3:
        names = [line.split(" = ")[1] for line in lines if line.startswith("name = ")]
        name = rng.choice(names)
        start = lines.index(f"name = {name}")
        lines.insert(start + 1, f"depends_on = [{name}]")
        return "\n".join(lines), f"set {name} depends on itself", False
    if kind == 4:
        versions = [i for i, line in enumerate(lines) if line.startswith('version = "2.')]  # NCCL's
        a, b = rng.sample(versions, 2)
        lines[b] = lines[a]
        return "\n".join(lines), f"lines {a + 1} and {b + 1}: one version twice", False
    if kind == 5:  # before or after a key (a comment or a string takes anything)
        cut = rng.choice([0, len(key)])
        lines[at] = lines[at][:cut] + rng.choice(['"', "[", "= =", "\x00", "\ud800"]) + lines[at][cut:]
        return "\n".join(lines), f"line {at + 1}: broken TOML", False
    if kind == 6:
        if key in ("library",):
            lines[at] = f'{key} = "{rng.choice(["ncclep", "NCCL", "nccl_ep ", "libnccl"])}"'
            return "\n".join(lines), f"line {at + 1}: unknown library", False
        lines[at] = f"{key} = {value}\n{key} = {value}"
        return "\n".join(lines), f"line {at + 1}: {key} twice", False
    lines.insert(at + 1, f"{rng.choice(['headres', 'sonames', 'Default', 'verison'])} = {value}")
    return "\n".join(lines), f"line {at + 2}: an unknown key", False


def header_sets_cases(count: int, seed: int, root: pathlib.Path, libraries: dict):
    text = header_sets_text(root)
    program = ("import sys\nfrom generator.header_sets import load_header_sets\n"
               "try:\n    load_header_sets(sys.argv[1])\n"
               "except SystemExit as e:\n"
               "    sys.stderr.write(str(e).splitlines()[0] + '\\n' if str(e) else '\\n')\n"
               "    sys.exit(2)\n")
    for i in range(count):
        rng = random.Random(f"header_sets:{seed}:{i}")
        damaged, what, valid = damaged_header_sets(rng, text)
        work = tempfile.mkdtemp(prefix="fuzz-sets-")
        path = pathlib.Path(work) / "header_sets.toml"
        path.write_bytes(damaged.encode("utf-8", "surrogatepass"))
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(root))
        yield CommandCase(f"header_sets {what}", ["/usr/bin/python3", "-c", program, str(path)], env, bad=not valid,
                          cwd=str(root), workdir=work, expect_line=str(path))


# ---- headers ---------------------------------------------------------------------------------------

# Declarations a library header may hold, valid C and C++ alike: each random header takes a few.
# The generator must bind each faithfully or skip it with a reason, and what it writes must compile.
TYPES = ["int", "unsigned int", "size_t", "ssize_t", "int64_t", "uint8_t", "float", "double", "const char *", "void *",
         "const void *", "int *", "size_t *", "fzResult_t *", "fzThing_t *", "fzThing_t", "fzValue_t",
         "fzValue_t *", "fzEmpty_t *", "fzKind_t", "char **", "void **", "const fzThing_t *"]
RECORDS = [
    "typedef union {{ int i; float f; }} fzValue_t;",
    "typedef struct {{ int a; {t} b; char name[{n}]; }} fzThing_t;",
    "typedef struct {{ unsigned flag : 1; unsigned mode : {width}; int rest; }} fzBits_t;",
    "typedef struct fzOpaque* fzHandle_t;",
    "typedef struct {{ }} fzEmpty_t;",
    "typedef enum {{ fzKindA = 0, fzKindB = {v}, fzKindC = -1 }} fzKind_t;",
    "#define FZ_LIMIT {v}",
    "#define FZ_SIZE ((size_t){v} << {bits})",
    "#define FZ_NAME \"{name}\"",
]
FUNCTIONS = [
    "fzResult_t fz{name}({params});",
    "fzResult_t fz{name}(void);",
    "fzResult_t fz{name}(int n, ...);",
    "fzResult_t fz{name}(fzResult_t (*callback)(int), void *user);",
    "{t} fz{name}Get(void);",
    "fzResult_t fz{name}(const {t} *in, {t} *out, size_t count);",
]


# Valid C that is not C++: the generator parses such a header as C (clang_frontend.parse_headers).
C_ONLY = [
    "typedef struct {{ int class; _Bool on; int new; }} fzCOnly_t;",
    "fzResult_t fz{name}(_Bool flag, const char * restrict name);",
    "fzResult_t fz{name}(fzKind_t kind, int template, void * restrict out);",
    "fzResult_t fz{name}();",
]


def random_header(rng: random.Random) -> str:
    body = ["typedef enum { fzSuccess = 0, fzFailure = 1 } fzResult_t;",
            "typedef union { int i; float f; } fzValue_t;",
            "typedef struct { } fzEmpty_t;",
            "typedef enum { fzKindA = 0, fzKindB = 1 } fzKind_t;",
            "typedef struct { int a; double b; } fzThing_t;"]
    fill = dict(t=rng.choice(TYPES[:10]), n=rng.choice([1, 8, 128]), bits=rng.choice([1, 3, 31, 40]),
                width=rng.choice([1, 3, 31, 32]),  # a bit-field no wider than its unsigned int
                v=rng.choice([0, 7, 2 ** 31 - 1, 2 ** 31, 2 ** 63 - 1, -5]), name=rng.choice(["abc", "x y", ""]))
    for template in rng.sample(RECORDS, rng.randrange(0, 4)):
        line = template.format(**fill)
        if not any(line.split("}")[-1].strip() == b.split("}")[-1].strip() for b in body if "}" in line):
            body.append(line)
    names = iter(f"F{i}" for i in range(100))
    for _ in range(rng.randrange(1, 5)):
        params = ", ".join(f"{rng.choice(TYPES)} p{i}" for i in range(rng.randrange(1, 5)))
        body.append(rng.choice(FUNCTIONS).format(name=next(names), params=params, t=rng.choice(TYPES[:10])))
    if rng.random() < 0.3:
        body.append(rng.choice(C_ONLY).format(name=next(names)))
    return ("#include <stdint.h>\n#include <stddef.h>\n#include <sys/types.h>\n"
            "#ifdef __cplusplus\nextern \"C\" {\n#endif\n" + "\n".join(body) +
            "\n#ifdef __cplusplus\n}\n#endif\n")


# Generates one header with root's generator and compiles what it wrote: the C binding and the
# Python extension's C (gcc -fsyntax-only), its Python files (ast) and, where NCCLBIND_FUZZ_RUSTC
# names a rustc, its Rust sys crate. Exit 0: bound or skipped with reasons, and all of it
# compiles; 2 and one line: refused, naming the header; 1 and a line "does not compile: ...":
# generated but not valid. (bench/hardening_figures.py runs it on the malformed headers.)
HEADER_PROGRAM = r"""
import ast, os, pathlib, subprocess, sys, sysconfig, tempfile
from generator.policy.conventions import load_conventions
from generator.header_sets import HeaderSet
from generator.passes.extract import extract_header_set
from generator.passes.merge import merge_all
from generator.render import RenderContext
from generator.render import c, python, rust
header, root, rustc = pathlib.Path(sys.argv[1]), pathlib.Path.cwd(), os.environ.get("NCCLBIND_FUZZ_RUSTC")
try:
    hs = HeaderSet("fz-1.0.0", "nccl", "1.0.0", (header.name,), header.parent, header.parent, "libfz.so", None,
                   True, "fz")
    ir = extract_header_set(hs, {hs.name: hs}, load_conventions())
    ctx = RenderContext(merge_all([ir]), [ir], [hs], load_conventions())
    files = {**c.render(ctx), **python.render(ctx), **(rust.render(ctx) if rustc else {})}
except SystemExit as e:
    sys.stderr.write(str(e).splitlines()[0] + "\n" if str(e) else "\n")
    sys.exit(2)
except Exception as e:
    if type(e).__name__ in ("ParseError", "PolicyError", "ConventionsError"):
        sys.stderr.write(str(e).splitlines()[0] + "\n")
        sys.exit(2)
    raise
with tempfile.TemporaryDirectory() as tmp:
    tmp = pathlib.Path(tmp)
    for rel, text in files.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(text)
    include = ["-I" + str(tmp / "bindings/c/include"), "-I" + str(root / "runtime/include"),
               "-I" + str(root / "bindings/python/src"), "-I" + sysconfig.get_paths()["include"]]
    failed = [s.name for s in [tmp / "bindings/c/src/nccl.c", *(tmp / "bindings/python/src/generated").glob("*.c")]
              if subprocess.run(["gcc", "-fsyntax-only", "-std=c11", *include, str(s)], capture_output=True).returncode]
    for rel, text in files.items():
        if rel.endswith((".py", ".pyi")):
            try:
                ast.parse(text)
            except SyntaxError:
                failed.append(rel)
    if rustc:
        lib = tmp / "bindings/rust/src/lib.rs"
        lib.write_text("#![allow(dead_code)]\npub mod sys;\n")
        if subprocess.run([rustc, "--edition", "2021", "--crate-type", "lib", "-o", str(tmp / "fz.rlib"), str(lib)],
                          capture_output=True).returncode:
            failed.append("sys (Rust)")
if failed:
    sys.stderr.write("does not compile: " + ", ".join(failed) + "\n")
    sys.exit(1)
"""


def headers_cases(count: int, seed: int, root: pathlib.Path, libraries: dict):
    for i in range(count):
        rng = random.Random(f"headers:{seed}:{i}")
        work = pathlib.Path(tempfile.mkdtemp(prefix="fuzz-header-"))
        header = work / "nccl_fz.h"
        header.write_text(random_header(rng))
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(root))
        first = header.read_text().splitlines()[11:13]
        yield CommandCase(f"headers {i}: {' '.join(first)[:100]}", ["/usr/bin/python3", "-c", HEADER_PROGRAM,
                                                                   str(header)], env, bad=False, cwd=str(root),
                          workdir=str(work), wrote_invalid="does not compile")


CLASSES = {"bench_flags": bench_flags_cases, "trace_input": trace_input_cases, "header_sets": header_sets_cases,
           "headers": headers_cases}
