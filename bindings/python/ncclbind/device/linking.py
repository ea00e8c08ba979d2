"""The device API's C-ABI wrapper compiled for linking into Numba kernels.

The wrapper is the generated CUDA source for the loaded release (cuda_source.wrapper_source):
one C-ABI surface on every release, its bodies the release's C++ device API. It is compiled with
nvcc (NCCL's device headers need the CUDA runtime headers, which NVRTC lacks), in one of two forms:

- LTO-IR (nvcc -dlto, `wrapper_ltoir`), where Numba links with nvJitLink (cuda-bindings'
  nvjitlink) no older than the nvcc: a kernel compiled with @cuda.jit(lto=True) is optimized
  together with the wrapper, so the C-ABI calls (through the by-reference twins the wrapper
  defines, see c_abi) are inlined like the C++ templates in a CUDA C++ kernel, and ncclCoopAny's
  calls through its function table become direct calls of the kernel's coop;
- else a relocatable cubin (nvcc to PTX, then ptxas, `wrapper_cubin`): every C-ABI call stays a
  call, its arguments in local memory (the whole wrapper as PTX takes ptxas minutes at every
  kernel load, so this form is compiled once and cached).

Compiled in units, each holding only some definitions, so a kernel pays for what it calls
(`link_unit` says which unit a kernel links for a function). As LTO-IR (nvcc -dlto, no optimizer
and no ptxas: seconds for any unit) in the units of `unit_of`: the core unit (cooperative groups,
DevComm accessors, peer pointers, sessions), the gin unit, and one unit per reduce/copy function
(ncclLsaReduceSum_F32 alone instantiates NCCL's unrolled reduce loops). As a cubin, one unit per
function (ONE_FUNCTION + its name): nvcc's optimizer and ptxas take about 25 s over the core
unit and 45 s over the gin one (every GIN backend instantiated for each of its functions), 1 to
4 s over most single functions (the hybrid barrier's ncclBarrierSessionSync about 15 s), so a
kernel that calls ten functions waits about 20 s at its first load, not a minute or more. Units
are kept in $NCCLBIND_DEVICE_CACHE (default ~/.cache/ncclbind/device), by release, source, unit,
form and GPU architecture.

Before a release's first unit is built, sizeof() of each session storage record is compiled
(`storage_sizes`); a wrapper whose session is larger than the storage ncclbind.device's kernels
reserve (the IR's device_storage) is refused, so a kernel never runs with too little."""
from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

from ..errors import NcclInvalid
from . import cuda_source, ir_tables, layouts

__all__ = ["cache_dir", "llvm_tool", "function_of", "link_unit", "unit_of", "unit_source", "wrapper_bitcode", "wrapper_bitcode_path", "wrapper_cubin", "wrapper_ltoir", "storage_sizes",
           "twin",
           "twin_symbols", "coop_kind", "lto_available", "TWINS_MACRO"]

# The wrapper's twins of a C-ABI function (generator/render/device_wrapper.py names them alike),
# compiled where TWINS_MACRO is defined: by reference (records by address) BY_REFERENCE_PREFIX +
# name, and per stateless coop COOP_PREFIX.format(kind="cta") + name.
BY_REFERENCE_PREFIX = "nb_ref_"
COOP_PREFIX = "nb_{kind}_"
COOP_INIT = "ncclCoopAnyInit"
TWINS_MACRO = "NCCLBIND_DEVICE_TWINS"
_SIZE_PREFIX = "ncclbind_sizeof_"
# One definition of the generated wrapper: `__device__ <result> <name>(<params>) {` ... `}` at column 0.
_DEFINITION = re.compile(r"^__device__ [^;{}]*?\b(\w+)\([^;{}]*\)\s*\{.*?^\}\n?", re.S | re.M)


def cache_dir() -> Path:
    """Where compiled wrapper units are kept: $NCCLBIND_DEVICE_CACHE, else ~/.cache/ncclbind/device."""
    return Path(os.environ.get("NCCLBIND_DEVICE_CACHE") or Path.home() / ".cache" / "ncclbind" / "device")


def _is_reduce_copy(fn: dict) -> bool:
    return any(p["name"] == "count" for p in fn.get("params", ()))


def _is_gin(fn: dict) -> bool:
    return any(p["type"]["kind"] == "pointer" and p["type"].get("pointee", {}).get("name") == "ncclGin_C"
               for p in fn.get("params", ()))


def coop_kind(init: str) -> str | None:
    """"Cta" for ncclCoopAnyInitCta: the coop a coop constructor whose only parameter is the coop
    makes (it holds no state, so a kernel knows it when compiled); None for the others."""
    for fn in ir_tables.api()["device_functions"]:
        if fn["name"] == init and init.startswith(COOP_INIT) and len(fn.get("params", ())) == 1:
            return init[len(COOP_INIT):]
    return None


def _coop_kinds() -> list[str]:
    return [kind for kind in (coop_kind(fn["name"]) for fn in ir_tables.api()["device_functions"]) if kind]


@functools.lru_cache(maxsize=None)  # the IR is read once a process (ir_tables); every split asks
def _twin_prefixes() -> tuple[str, ...]:
    return tuple([BY_REFERENCE_PREFIX] + [COOP_PREFIX.format(kind=k.lower()) for k in _coop_kinds()])


def _twin_of(symbol: str) -> str:
    """The function a twin's symbol is of (nb_ref_X, nb_cta_X: X); any other symbol itself."""
    for prefix in _twin_prefixes():
        if symbol.startswith(prefix):
            return symbol[len(prefix):]
    return symbol


@functools.lru_cache(maxsize=None)
def twin_symbols(code: int) -> frozenset[str]:
    """The twins (nb_ref_<name>, nb_<coop>_<name>) the release's wrapper defines."""
    wrapper = cuda_source.wrapper_source(code)
    return frozenset(m.group(1) for m in _DEFINITION.finditer(wrapper) if _twin_of(m.group(1)) != m.group(1))


def twin(code: int, name: str, coop: str | None = None) -> str | None:
    """The twin a kernel linked with LTO calls for C-ABI function `name`: the one instantiated for
    `coop` (a stateless coop, "Cta"), else the by-reference one, where the release's wrapper has
    it; None: the function itself (a prototype of pointers and scalars, which LTO inlines)."""
    have = twin_symbols(code)
    for symbol in ([COOP_PREFIX.format(kind=coop.lower()) + name] if coop else []) + [BY_REFERENCE_PREFIX + name]:
        if symbol in have:
            return symbol
    return None


@functools.lru_cache(maxsize=None)
def _functions_by_symbol() -> dict[str, dict]:
    """{name: the IR's device function} of every device function, and {symbol: it} of each that
    NCCL's headers define inline (the wrapper's nb_ncclGinPut_v2); the first one wins."""
    found: dict[str, dict] = {}
    for fn in ir_tables.api()["device_functions"]:
        found.setdefault(fn["name"], fn)
        if fn.get("header_inline"):
            from .wrapper_table import FUNCTIONS
            symbol = FUNCTIONS.get(fn["name"], {}).get("symbol")
            if symbol and symbol.endswith("_" + fn["name"]):
                found.setdefault(symbol, fn)
    return found


def _function(name: str) -> dict:
    """The IR's device function `name` is (its name, its symbol nb_ncclGinPut_v2, or a twin of it,
    nb_cta_ncclLsaReduceSum_F32)."""
    name = _twin_of(name)
    fn = _functions_by_symbol().get(name)
    if fn is None:
        raise NcclInvalid(f"{name} is not a function of the device API's C ABI", "name")
    return fn


def function_of(name: str) -> str:
    """The C-ABI function `name` is, or whose symbol (nb_ncclGinPut_v2) or twin it is."""
    return _function(name)["name"]


def unit_of(name: str) -> str:
    """The unit whose object defines C-ABI function `name` (or its symbol, nb_ncclGinPut_v2, or
    a twin of it, nb_cta_ncclLsaReduceSum_F32): itself for a reduce/copy function (one with an
    element count), "gin" for a function NCCL's headers define inline over an ncclGin_C
    (ncclGinPut_v2 & co.: they instantiate every GIN backend), "core" for the rest. A twin is in
    its function's unit."""
    fn = _function(name)
    if _is_reduce_copy(fn):
        return fn["name"]
    return "gin" if fn.get("header_inline") and _is_gin(fn) else "core"


def link_unit(name: str, lto: bool) -> str:
    """The unit a kernel links for C-ABI function `name` (or its symbol, or a twin): as LTO-IR
    (wrapper_ltoir) unit_of's, twins included; as a relocatable cubin (wrapper_cubin, which calls
    the function itself, never a twin) ONE_FUNCTION + the function: its definition alone, so a
    kernel linked with cubins has nvcc optimize and ptxas assemble only the functions it calls
    (the core and gin units take tens of seconds each; nvcc -dlto compiles them in seconds)."""
    return unit_of(name) if lto else ONE_FUNCTION + function_of(name)


def _symbol(name: str) -> str:
    from .wrapper_table import FUNCTIONS
    return FUNCTIONS[name]["symbol"]


def _storage_names() -> list[str]:
    return sorted(s["name"] for s in ir_tables.api().get("device_storage", ()))


ONE_FUNCTION = "only:"  # a unit of one function's definition: ONE_FUNCTION + its name
TWINS_OF = "twins:"  # the twins (nb_cta_..., nb_ref_...) of a unit's functions alone: TWINS_OF + unit


def unit_source(code: int, unit: str) -> str:
    """The release's wrapper with only the unit's definitions (declarations all kept); unit
    ONE_FUNCTION + name holds that function's definition alone (no twin), TWINS_OF + unit the
    twins of that unit's functions alone."""
    wrapper = cuda_source.wrapper_source(code)
    if unit.startswith(ONE_FUNCTION):
        symbol = _symbol(unit[len(ONE_FUNCTION):])
        return _DEFINITION.sub(lambda m: m.group(0) if m.group(1) == symbol else "", wrapper)
    if unit.startswith(TWINS_OF):  # no C-ABI definition: it links beside NCCL's own bitcode
        own = unit[len(TWINS_OF):]
        return _DEFINITION.sub(lambda m: m.group(0) if _twin_of(m.group(1)) != m.group(1)
                               and unit_of(m.group(1)) == own else "", wrapper)
    return _DEFINITION.sub(lambda m: m.group(0) if unit_of(m.group(1)) == unit else "", wrapper)


def _sizes_source(code: int) -> str:
    """The wrapper's declarations and storage records, and sizeof() of each as a constant (read
    back from the PTX: a constant's initializer is its value)."""
    wrapper = cuda_source.wrapper_source(code)
    return _DEFINITION.sub("", wrapper) + "".join(
        f'\nextern "C" __device__ const unsigned long long {_SIZE_PREFIX}{name} = sizeof({name});'
        for name in _storage_names() if re.search(rf"\bstruct {name}\b", wrapper))


def _run(command: list[str], what: str) -> None:
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise NcclInvalid(f"{what} failed ({' '.join(command)}):\n{run.stderr[-4000:]}", "nccl_version")


def _ptxas(nvcc: str) -> str:
    return str(Path(nvcc).with_name("ptxas")) if os.sep in nvcc else "ptxas"


def _cached_path(code: int, unit: str, suffix: str, source: str, options: list[str], build) -> Path:
    """The unit compiled by build(cu, out) into the cache (once per source and options): its path."""
    key = hashlib.sha256("\0".join([source] + options).encode()).hexdigest()[:24]
    cached = cache_dir() / f"nccl_device_wrapper_{code}_{unit}_{key}.{suffix}"
    if not cached.is_file():
        with tempfile.TemporaryDirectory(prefix="ncclbind-device-") as tmp:
            cu, out = Path(tmp) / "wrapper.cu", Path(tmp) / f"wrapper.{suffix}"
            cu.write_text(source)
            build(cu, out)
            cached.parent.mkdir(parents=True, exist_ok=True)
            partial = cached.with_suffix(f".{os.getpid()}.tmp")
            partial.write_bytes(out.read_bytes())
            partial.replace(cached)
    return cached


def _cached(code: int, unit: str, suffix: str, source: str, options: list[str], build) -> bytes:
    """_cached_path's file, read."""
    return _cached_path(code, unit, suffix, source, options, build).read_bytes()


def _what(code: int, unit: str) -> str:
    return f"compiling NCCL {ir_tables.version_text(code)}'s device API wrapper ({unit})"


def _check_storage_once(code: int, cc: tuple[int, int]) -> None:
    """storage_sizes of the release's wrapper against the IR's storage (one small compile, cached)."""
    nvcc = cuda_source._nvcc()
    options = list(cuda_source.compile_options(code)) + ["-rdc=true", "-ptx", f"-arch=compute_{cc[0]}{cc[1]}"]
    source = _sizes_source(code)
    ptx = _cached(code, "sizes", "ptx", source, options,
                  lambda cu, out: _run([nvcc, *options, "-o", str(out), str(cu)], _what(code, "sizes")))
    _check_storage(code, storage_sizes(ptx.decode()))


def wrapper_cubin(nccl_version: int | str | None, unit: str, cc: tuple[int, int]) -> bytes:
    """One unit of the release's wrapper as a relocatable cubin for compute capability `cc`,
    without the twins (a kernel linked with cubins calls the C-ABI functions themselves)."""
    code = cuda_source.nccl_version_code(nccl_version)
    _check_storage_once(code, cc)
    arch = f"{cc[0]}{cc[1]}"
    options = list(cuda_source.compile_options(code)) + ["-rdc=true", "-ptx", f"-arch=compute_{arch}"]
    nvcc = cuda_source._nvcc()

    def build(cu: Path, out: Path) -> None:
        ptx = out.with_suffix(".ptx")
        _run([nvcc, *options, "-o", str(ptx), str(cu)], _what(code, unit))
        _run([_ptxas(nvcc), f"-arch=sm_{arch}", "-c", "-o", str(out), str(ptx)], _what(code, unit))

    return _cached(code, unit, f"sm{arch}.cubin", unit_source(code, unit), options, build)


def wrapper_ltoir(nccl_version: int | str | None, unit: str, cc: tuple[int, int]) -> bytes:
    """One unit of the release's wrapper as LTO-IR (nvcc -dlto) for compute capability `cc`, with
    its twins (TWINS_MACRO), for nvJitLink to optimize together with the kernels that call it."""
    code = cuda_source.nccl_version_code(nccl_version)
    _check_storage_once(code, cc)
    options = list(cuda_source.compile_options(code)) + [f"-D{TWINS_MACRO}", "-rdc=true", "-dlto", "-ltoir",
                                                         f"-arch=lto_{cc[0]}{cc[1]}"]
    nvcc = cuda_source._nvcc()
    return _cached(code, unit, "ltoir", unit_source(code, unit), options,
                   lambda cu, out: _run([nvcc, *options, "-o", str(out), str(cu)], _what(code, unit)))


# clang's CUDA device compile of the wrapper (wrapper_bitcode) needs two stand-ins that nvcc does
# not: texture_fetch_functions.h, which clang's CUDA wrapper header includes and CUDA 13 no longer
# ships (NCCL declares no texture function: empty), and a prelude that gives __CUDACC__ nvcc's
# value (clang leaves it empty; NCCL tests it with #if), says what nvcc's --extended-lambda says
# (NCCL's reduce/copy functions need device lambdas, which clang has), and gives the vector
# overload of __stwt that NCCL's GIN proxy stores with and clang's CUDA headers lack.
_CLANG_SHIMS = {
    "texture_fetch_functions.h": "/* empty: NCCL's device headers use no texture function */\n",
    "ncclbind_clang_prelude.h": (
        "#undef __CUDACC__\n#define __CUDACC__ 1\n"
        "#define __CUDACC_EXTENDED_LAMBDA__ 1\n"  # nvcc's --extended-lambda: clang takes device lambdas
        "#ifndef NCCLBIND_HEADERS_DEFINE_STWT\n"  # NCCL 2.30 on define their own (a second is ambiguous)
        "__device__ inline void __stwt(uint4 *p, uint4 v) {\n"
        '  asm volatile("st.global.wt.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),\n'
        '               "r"(v.w) : "memory");\n'
        "}\n#endif\n"),
}
CLANG_VERSION = 19  # the LLVM of the generator's libclang; the CuTe DSL reads its bitcode


def llvm_tool(name: str) -> str | None:
    """An LLVM tool of CLANG_VERSION (clang++, llvm-nm, ...): NAME-19 on PATH, else Debian's
    /usr/lib/llvm-19/bin/NAME; None when neither is there."""
    import shutil
    path = f"/usr/lib/llvm-{CLANG_VERSION}/bin/{name}"
    return shutil.which(f"{name}-{CLANG_VERSION}") or (path if os.path.exists(path) else None)


def clang() -> str:
    """The clang++ that builds the wrapper to LLVM bitcode: $NCCLBIND_CLANG, else clang++-19 (Debian's
    clang-19, installed by tools/setup.sh)."""
    found = os.environ.get("NCCLBIND_CLANG") or llvm_tool("clang++")
    if not found:
        raise NcclInvalid(f"no clang++-{CLANG_VERSION} to build the device wrapper to LLVM bitcode (install "
                          f"clang-{CLANG_VERSION}, or set NCCLBIND_CLANG)", "nccl_version")
    return found


def wrapper_bitcode_path(nccl_version: int | str | None, cc: tuple[int, int] = (9, 0), unit: str | None = None,
                         twins: bool = False) -> Path:
    """The release's wrapper (its C-ABI device functions; only `unit`'s definitions when given,
    as unit_of splits them) as LLVM bitcode for `cc`, built by clang (`clang()`) into the cache,
    for DSLs that link bitcode (the CuTe DSL's cute.BitCode). NCCL 2.30 and later ship their own
    (lib/libnccl_device.bc); this serves every release with a device API.

    The cache key is the source, the options without this machine's paths, clang's major version
    and the shims: a release's headers are the same wherever installed, so a cache built on one
    machine serves another that has no clang (tests/multigpu carries one to the GPU machine).
    `twins`: with the wrapper's twins (TWINS_MACRO), for a unit of twins (TWINS_OF + unit)."""
    code = cuda_source.nccl_version_code(nccl_version)
    source = cuda_source.wrapper_source(code) if unit is None else unit_source(code, unit)
    portable = ["-x", "cuda", "--cuda-device-only", f"--cuda-gpu-arch=sm_{cc[0]}{cc[1]}", "-emit-llvm", "-c",
                "-std=gnu++17", "-O2", "-nocudalib", "-Wno-unknown-cuda-version"]
    if _headers_define_stwt(code):
        portable.append("-DNCCLBIND_HEADERS_DEFINE_STWT")
    if twins:  # the twins' definitions (nb_cta_..., nb_ref_...) compiled too
        portable.append(f"-D{TWINS_MACRO}")
    key = portable + [f"clang-{CLANG_VERSION}", str(code), "no-function-alignment"] + sorted(_CLANG_SHIMS.values())

    def build(cu: Path, out: Path) -> None:
        include, cuda = cuda_source.nccl_include_dir(code), cuda_source._cuda_home()
        for name, text in _CLANG_SHIMS.items():
            (cu.parent / name).write_text(text)
        raw = out.with_suffix(".clang.bc")
        _run([clang(), *portable, f"--cuda-path={cuda}", f"-I{include}", f"-I{cuda / 'include'}",
              f"-I{cu.parent}", f"-I{cuda / 'include' / 'cccl'}", "-include",
              str(cu.parent / "ncclbind_clang_prelude.h"), "-o", str(raw), str(cu)], _what(code, "bitcode"))
        _without_function_alignment(raw, out)

    return _cached_path(code, unit or "all", f"sm{cc[0]}{cc[1]}.bc", source, key, build)


def _headers_define_stwt(code: int) -> bool:
    """Whether the release's GIN proxy header defines the vector __stwt it stores with."""
    proxy = cuda_source.nccl_include_dir(code) / "nccl_device" / "gin" / "proxy" / "gin_proxy.h"
    return proxy.is_file() and re.search(r"\bvoid __stwt\(", proxy.read_text(errors="replace")) is not None


def _without_function_alignment(bitcode: Path, out: Path) -> None:
    """`bitcode` less the alignment clang gives C++ member functions (the Itanium ABI's align 2,
    for member pointers), which NVVM refuses ("Explicit alignment is not allowed") when a
    kernel's module links it: NCCL's ncclCoopAny keeps member function templates in a table."""
    dis, asm = llvm_tool("llvm-dis"), llvm_tool("llvm-as")
    if not dis or not asm:
        raise NcclInvalid(f"no llvm-dis-{CLANG_VERSION} / llvm-as-{CLANG_VERSION} (Debian's llvm-{CLANG_VERSION}) "
                          "to finish the device wrapper's bitcode", "nccl_version")
    text = subprocess.run([dis, str(bitcode), "-o", "-"], check=True, capture_output=True, text=True).stdout
    lines = []
    for line in text.splitlines(keepends=True):
        if line.startswith("define "):
            head, _, tail = line.rpartition(")")
            line = head + ")" + re.sub(r" align \d+", "", tail)
        lines.append(line)
    ll = out.with_suffix(".ll")
    ll.write_text("".join(lines))
    _run([asm, str(ll), "-o", str(out)], "assembling the device wrapper's bitcode")


def wrapper_bitcode(nccl_version: int | str | None, cc: tuple[int, int] = (9, 0), unit: str | None = None) -> bytes:
    """wrapper_bitcode_path's file, read."""
    return wrapper_bitcode_path(nccl_version, cc, unit).read_bytes()


def _version(text: str) -> tuple[int, int] | None:
    m = re.search(r"release (\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


@functools.lru_cache(maxsize=None)
def nvcc_version() -> tuple[int, int] | None:
    """(major, minor) of the nvcc that compiles the wrapper, None when it cannot say."""
    try:
        run = subprocess.run([cuda_source._nvcc(), "--version"], capture_output=True, text=True)
    except OSError:
        return None
    return _version(run.stdout)


def nvjitlink_version() -> tuple[int, int] | None:
    """(major, minor) of the nvJitLink Numba links with (cuda-bindings' nvjitlink), None without one."""
    try:
        from cuda.bindings import nvjitlink
        return tuple(nvjitlink.version())[:2]
    except Exception:  # noqa: BLE001 - no cuda-bindings, no libnvJitLink: no LTO
        return None


def lto_available() -> tuple[bool, str]:
    """(True, "") when the wrapper can be linked as LTO-IR: an nvJitLink of the nvcc's major
    version and at least its minor one (LTO-IR is read by its own and later releases of one major
    version only); else (False, why)."""
    linker, compiler = nvjitlink_version(), nvcc_version()
    if linker is None:
        return False, "no nvJitLink (cuda-bindings' nvjitlink cannot load libnvJitLink)"
    if compiler is None:
        return False, f"cannot read the version of {cuda_source._nvcc()}"
    if linker[0] != compiler[0] or linker < compiler:
        return False, (f"nvJitLink {linker[0]}.{linker[1]} cannot read the LTO-IR of nvcc {compiler[0]}.{compiler[1]} "
                       f"(it needs nvJitLink {compiler[0]}.{compiler[1]} or a later {compiler[0]}.x)")
    return True, ""


def storage_sizes(ptx: str) -> dict[str, int]:
    """{storage record: sizeof} as the sizes source compiled into `ptx` records them."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(rf"\b{_SIZE_PREFIX}(\w+)\s*=\s*(\d+)", ptx)}


def _check_storage(code: int, sizes: dict[str, int]) -> None:
    for name, size in sizes.items():
        reserved = layouts.storage_layout(name, code).size
        if size > reserved:
            raise NcclInvalid(f"NCCL {ir_tables.version_text(code)}'s {name} is {size} bytes, more than the "
                              f"{reserved} the IR gives it; regenerate the IR with this release's headers",
                              "nccl_version")
