"""The CuTe DSL side of the device API on a CPU: for every header set with a device API, the LLVM
bitcode a CuTe kernel links, NCCL's own lib/libnccl_device.bc where the release ships it (the
`device_c_abi` capability, 2.30 on) or else ncclbind's C-ABI wrapper built by clang-19
(ncclbind.device.linking.wrapper_bitcode), defines the release's C-ABI functions (the wrapper
table's, from the IR), and a CuTe kernel that calls them through cute.extern compiles to PTX with
no GPU: every call resolved, the session sizes the IR's.

Needs the CuTe DSL and clang-19, which tools/setup.sh installs (.cache/cute-dsl, Debian's
clang-19); without them each case skips, saying which is missing.
"""
from __future__ import annotations

import functools
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bindings" / "python"))
sys.path.insert(0, str(REPO))  # the generator: where it finds each set's headers and library

from ncclbind.device import layouts, linking, wrapper_table  # noqa: E402

CUTE_SITE = REPO / ".cache" / "cute-dsl"
NUMBA_SITE = REPO / ".cache" / "numba-cuda"  # cuda-bindings, which the CuTe DSL imports
CUTE_PATH = os.pathsep.join(map(str, (CUTE_SITE / "nvidia_cutlass_dsl" / "dsl_packages", CUTE_SITE, NUMBA_SITE)))


def device_sets() -> list[dict]:
    """The header sets with a device API, from their IR (oldest first)."""
    sets = [json.loads(p.read_text()) for p in sorted((REPO / "bindings" / "ir").glob("nccl-2.*.json"))]
    return sorted((s for s in sets if "device_api" in s["capabilities"]), key=lambda s: s["version_code"])


SETS = device_sets()


@functools.lru_cache(maxsize=None)
def _header_sets() -> dict:
    from generator.header_sets import load_header_sets
    return {s.name: s for s in load_header_sets()}


def where(hs: dict):
    """The set's include/ and lib/ as the generator finds them (wheel, toolkit or directory)."""
    return _header_sets()[hs["name"]]


def include_dir(hs: dict) -> pathlib.Path:
    return where(hs).include_root


def needs(*what: str) -> None:
    if "clang" in what:
        try:
            linking.clang()
        except Exception as e:  # noqa: BLE001 - the reason is the skip's
            pytest.skip(str(e))
    if "cute" in what and not (CUTE_SITE / ".stamp").is_file():
        pytest.skip(f"the CuTe DSL is not installed ({CUTE_SITE}: tools/setup.sh installs it)")


@pytest.fixture
def headers_of(monkeypatch, tmp_path):
    """Points ncclbind.device at a header set's include/ and a fresh wrapper cache."""
    def point(hs: dict) -> None:
        monkeypatch.setenv("NCCLBIND_NCCL_INCLUDE", str(include_dir(hs)))
        monkeypatch.setenv("NCCLBIND_DEVICE_CACHE", str(tmp_path / "cache"))
    return point


def bitcode_of(hs: dict, tmp_path: pathlib.Path) -> pathlib.Path:
    """What a CuTe kernel links for this release: NCCL's bitcode, else ncclbind's wrapper's (its
    "core" unit: the functions without an element count)."""
    if "device_c_abi" in hs["capabilities"]:
        bitcode = where(hs).lib_dir / "libnccl_device.bc"
        if not bitcode.is_file():  # a directory set of headers without a build
            pytest.skip(f"{hs['name']} ships no {bitcode}")
        return bitcode
    out = tmp_path / f"{hs['name']}.bc"
    out.write_bytes(linking.wrapper_bitcode(hs["version"], unit="core"))
    return out


@pytest.mark.parametrize("hs", [s for s in SETS if "device_c_abi" not in s["capabilities"]], ids=lambda s: s["name"])
def test_ncclbinds_bitcode_defines_the_releases_c_abi_functions(hs, headers_of, tmp_path):
    needs("clang")
    headers_of(hs)
    nm = linking.llvm_tool("llvm-nm")
    if not nm:
        pytest.skip(f"no llvm-nm-{linking.CLANG_VERSION}")
    defined = set(re.findall(r"^\S+ T (\S+)$", subprocess.run([nm, str(bitcode_of(hs, tmp_path))], check=True,
                                                              capture_output=True, text=True).stdout, re.M))
    missing = wrapper_table.HEADER_SETS[hs["version"]]["missing"]
    want = {entry["symbol"] for name, entry in wrapper_table.FUNCTIONS.items()
            if name not in missing and linking.unit_of(name) == "core"}
    assert want and defined == want, (sorted(want - defined), sorted(defined - want))


KERNEL = r'''
import sys
import cutlass
import cutlass.cute as cute
from cutlass.cute import BitCode
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

bitcode, names = BitCode(sys.argv[1]), sys.argv[2:]


def declare(name):
    def size() -> cutlass.Int64: ...
    return cute.extern(name=name, source=bitcode)(size)


externs = [declare(name) for name in names]


@cute.kernel
def sizes(out: cute.Tensor):
    for i in cutlass.range_constexpr(len(externs)):
        out[i] = externs[i]()


@cute.jit
def launch(out: cute.Tensor, stream):
    sizes(out).launch(grid=(1, 1, 1), block=(1, 1, 1), stream=stream)


out = make_fake_compact_tensor(cutlass.Int64, (len(names),))
compiled = cute.compile(launch, out, make_fake_stream(), options="--gpu-arch sm_90a --keep-ptx")
print(compiled.__ptx__)
'''


@pytest.mark.parametrize("hs", SETS, ids=lambda s: s["name"])
def test_a_cute_kernel_links_the_releases_device_functions_without_a_gpu(hs, headers_of, tmp_path):
    """The kernel stores each session storage's size (ncclLsaBarrierSession_C_size & co.): linked
    and inlined, the PTX holds the constants and declares no external function; each is the
    IR's size of that storage (NCCL's bitcode), or fits the IR's reservation (ncclbind's wrapper,
    whose storage holds the C++ session the newer releases' storage holds)."""
    needs("cute") if "device_c_abi" in hs["capabilities"] else needs("cute", "clang")
    headers_of(hs)
    missing = wrapper_table.HEADER_SETS[hs["version"]]["missing"]
    names = [f"{s}_size" for s in ("ncclLsaBarrierSession_C", "ncclGinBarrierSession_C", "ncclBarrierSession_C")
             if f"{s}_size" in wrapper_table.FUNCTIONS and f"{s}_size" not in missing]
    assert names, f"{hs['name']}: no session storage to size"
    bitcode = bitcode_of(hs, tmp_path)
    program = tmp_path / "kernel.py"
    program.write_text(KERNEL)
    run = subprocess.run([sys.executable, str(program), str(bitcode), *names], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=CUTE_PATH), timeout=300,
                         cwd=tmp_path)  # --keep-ptx writes its .ptx into the working folder
    assert run.returncode == 0, run.stderr[-4000:]
    ptx = run.stdout
    assert ".extern .func" not in ptx and "call" not in ptx, ptx
    stored = [int(v) for v in re.findall(r"st\.global\.b64\s+\[[^\]]+\],\s*(\d+);", ptx)]
    assert len(stored) == len(names), ptx
    for name, size in zip(names, stored):
        reserved = layouts.storage_layout(name[:-len("_size")], hs["version"]).size
        if "device_c_abi" in hs["capabilities"]:
            assert size == reserved, (name, size, reserved)
        else:
            assert 0 < size <= reserved, (name, size, reserved)


# ---- ncclbind.device.cute ----------------------------------------------------------------------

PROGRAMS = REPO / "tests" / "multigpu" / "device"


def package_dir() -> str:
    """The folder holding the ncclbind this test imported, for the subprocesses: Bazel's runfiles
    (with the built extension; a clean checkout's bindings/python has none), else the checkout."""
    import ncclbind
    return str(pathlib.Path(ncclbind.__file__).parent.parent)


def run_cute(code: str, hs: dict | None, tmp_path: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    """`code` (a file, or Python text) under the CuTe DSL with the set's libnccl loaded (none: the
    default one), a fresh wrapper cache."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_dir(), CUTE_PATH]),
               NCCLBIND_DEVICE_CACHE=str(tmp_path / "cache"))
    if hs is not None:
        env["NCCLBIND_NCCL_PATH"] = str(where(hs).lib_dir / "libnccl.so.2")
    command = [sys.executable, code, *args] if code.endswith(".py") else [sys.executable, "-c", code, *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)


def library_sets() -> list[dict]:
    """The device-API sets whose library is here (a directory set may be headers only)."""
    return [hs for hs in SETS if (where(hs).lib_dir / "libnccl.so.2").is_file()]


STUBS_AGAINST_IR = r'''
import inspect, json, sys
import cutlass
from ncclbind.device._generated import cute as cute_device
from ncclbind.device import ir_tables
from ncclbind.device.base.cute_abi import ByVal, DeviceFunction, Ptr

problems = []
functions = ir_tables.api()["device_functions"]
stubs = {name: f for name, f in vars(cute_device).items() if isinstance(f, DeviceFunction)}
if sorted(stubs) != sorted(fn["name"] for fn in functions):
    problems.append(("names", sorted(set(stubs) ^ {fn["name"] for fn in functions})))
typedefs = {}
for fn in functions:
    stub = stubs.get(fn["name"])
    if stub is None:
        continue
    if stub.since != fn["since"]:
        problems.append((fn["name"], "since", stub.since, fn["since"]))
    params = [(p.name, p.annotation) for p in stub.parameters]
    if [name for name, _ in params] != [p["name"] for p in fn.get("params", ())]:
        problems.append((fn["name"], "parameters", params))
        continue
    for (name, kind), p in zip(params, fn.get("params", ())):
        t = p["type"]
        if t["kind"] == "record":
            ok = kind is ByVal                      # by value: clang's byval pointer
        elif t["kind"] == "pointer" or t.get("name") == "ncclWindow_t":
            ok = kind is Ptr                        # a pointer, a reference, a window handle
        elif t["kind"] == "bool":
            ok = kind is cutlass.Boolean
        else:                                       # integers, enums, libcu++'s enums: as wide
            ok = getattr(kind, "width", None) == 8 * t["size"]
        if not ok:
            problems.append((fn["name"], name, str(kind), t))
    result = inspect.signature(stub.stub).return_annotation
    r = fn["result"]
    if r["kind"] == "void":
        ok = result is None
    elif r["kind"] == "record":
        ok = result.__name__ == r["name"].removesuffix("_t")
    elif r["kind"] == "pointer":
        ok = result is Ptr
    else:
        ok = getattr(result, "width", None) == 8 * r["size"]
    if not ok:
        problems.append((fn["name"], "result", str(result), r))
for record in cute_device.RECORDS:    # the native structs: the IR's size on every release
    struct = getattr(cute_device, record)
    for version in ir_tables.header_set_versions():
        layout = [r for r in ir_tables.header_set(version)["records"] if r["name"] in (record, record + "_t")]
        for r in layout:
            fields = [f for f in struct.__annotations__]
            size = sum(getattr(struct.__annotations__[f], "width", 64) // 8 if not f.startswith("_pad") else 0
                       for f in fields)
            if size > r["size"]:
                problems.append((record, version, size, r["size"]))
print(json.dumps(problems))
print(len(stubs), "stubs")
'''


def test_the_generated_cute_declarations_are_the_irs_device_functions(tmp_path):
    """Every C-ABI function of the IR has its stub (and no other), with the IR's parameter names
    and "since", each parameter the CuTe type its C type lowers to (a record by value a pointer,
    clang's byval; integers and enums as wide as the IR says), the result likewise."""
    needs("cute")
    run = run_cute(STUBS_AGAINST_IR, None, tmp_path)
    assert run.returncode == 0, run.stderr[-4000:]
    problems, count = run.stdout.splitlines()[-2:]
    assert json.loads(problems) == []
    assert int(count.split()[0]) == len(layouts_of_ir_functions())


def layouts_of_ir_functions() -> list:
    from ncclbind.device import ir_tables
    return ir_tables.api()["device_functions"]


PARTS = 4  # the program's kernels in PARTS cases per release (each under a minute on CI)


@pytest.mark.parametrize("part", range(PARTS), ids=lambda p: f"part{p}")
@pytest.mark.parametrize("hs", library_sets(), ids=lambda s: s["name"])
def test_every_cute_kernel_compiles_or_is_refused_by_name(hs, part, tmp_path):
    """tests/multigpu/device/cute_ranks.py --compile-only with the release's libnccl loaded:
    every kernel of the GPU program (coop kinds, DevComm and teams, rank conversions, window
    pointers, the peer exchange in an LSA barrier session, lsa_reduce_sum float32/int32,
    lsa_copy and lsa_reduce_sum_copy, GIN put/signal/wait/flush with a rail GIN barrier, and the
    benchmark's one-shot all-reduce kernels, cute_oneshot.py) traced
    with the compile-only placeholders and compiled to SASS for sm_90a through the release's
    bitcode (NCCL's, or ncclbind's wrapper built by clang), or, where the release lacks a
    function it calls, refused while tracing, naming it and the first release that has it."""
    needs("cute", "clang")
    run = run_cute(str(PROGRAMS / "cute_ranks.py"), hs, tmp_path, "--compile-only", f"{part}/{PARTS}")
    summary = [line for line in run.stdout.splitlines() if line.startswith("cute_ranks --compile-only")]
    assert run.returncode == 0 and summary, run.stdout[-3000:] + run.stderr[-3000:]
    counts = re.search(r"\(NCCL (\S+), (\d+) of (\d+) kernels\): (\d+) passed, 0 failed$", summary[0])
    assert counts and counts.group(1) == hs["version"], summary
    mine, total, passed = (int(counts.group(i)) for i in (2, 3, 4))
    assert passed == mine and total >= 11 and mine == len(range(part, total, PARTS)), summary
    refused = [line for line in run.stdout.splitlines() if "refused at compile time" in line]
    from ncclbind.device import wrapper_table
    if not wrapper_table.HEADER_SETS[hs["version"]]["missing"]:
        assert not refused, refused


def test_gin_and_multimem_are_refused_while_a_kernel_is_traced(tmp_path):
    """tests/multigpu/device/cute_refusals.py over the stand-in libnccl, whose ncclDevCommCreate
    makes a DevComm with no GIN connection and no multicast object: a kernel that opens an ncclGin
    (DevComm.gin), a GIN barrier session over every context, or an LSA barrier session with
    multimem=True is refused with NcclStateError saying what it opened and what is missing, while
    it is traced (cute.compile), before any launch."""
    needs("cute")
    from stand_ins import build_stand_in
    library = os.path.abspath(os.environ.get("NCCLBIND_FAKE_NCCL") or build_stand_in(tmp_path))  # cwd moves
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_dir(), CUTE_PATH]), NCCLBIND_NCCL_PATH=library,
               NCCLBIND_FAKE_NCCL_ACTIVE="1", CUDA_VISIBLE_DEVICES="", NCCLBIND_CUDA_BACKEND="helper",
               NCCLBIND_DEVICE_CACHE=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, str(PROGRAMS / "cute_refusals.py")], capture_output=True, text=True,
                         env=env, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = {line.split(" REFUSED ")[0]: line for line in run.stdout.splitlines() if " REFUSED " in line}
    expected = {"gin": ("an ncclGin (DevComm.gin) needs GIN", "GIN type NONE"),
                "gin_session over every context": ("a GIN barrier session over every context", "GIN type NONE"),
                "lsa_session with multimem": ("an LSA barrier session with multimem=True (lsa_session) needs a "
                                              "multicast (NVLS) object",)}
    for name, words in expected.items():
        line = lines.get(name, f"{name}: no REFUSED line in {run.stdout[-2000:]}")
        assert "NcclStateError: " + words[0] in line and all(w in line for w in words), line


def test_importing_the_cute_module_without_the_cute_dsl_says_what_to_install(tmp_path):
    env = dict(os.environ, PYTHONPATH=package_dir())
    run = subprocess.run([sys.executable, "-c", "import ncclbind.device.cute"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert run.returncode != 0
    assert "ncclbind.device.cute needs the CuTe DSL: pip install nvidia-cutlass-dsl==" in run.stderr
