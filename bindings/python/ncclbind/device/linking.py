"""The device API's C-ABI wrapper compiled for linking into Numba kernels.

The wrapper is the generated CUDA source for the loaded release (cuda_source.wrapper_source):
one C-ABI surface on every release, its bodies the release's C++ device API. It is compiled with
nvcc (NCCL's device headers need the CUDA runtime headers, which NVRTC lacks) to PTX and then
with ptxas to a relocatable cubin for the GPU (a cubin links without a JIT step; the whole
wrapper as PTX takes ptxas minutes, at every kernel load).

Compiled in units, each holding only some definitions, so a kernel pays for what it calls: the
core unit (cooperative groups, DevComm accessors, peer pointers, sessions) and one unit per
reduce/copy function (ncclLsaReduceSum_F32 alone instantiates NCCL's unrolled reduce loops).
Units are kept in $NCCLBIND_DEVICE_CACHE (default ~/.cache/ncclbind/device), by release,
source, unit and GPU architecture.

The core unit also records sizeof() of each session storage record; a wrapper whose session is
larger than the storage ncclbind.device's kernels reserve (the IR's device_storage) is refused,
so a kernel never runs with too little."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

from ..errors import NcclInvalid
from . import cuda_source, ir_tables, layouts

__all__ = ["cache_dir", "unit_of", "unit_source", "wrapper_cubin", "storage_sizes"]

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


def unit_of(name: str) -> str:
    """The unit whose object defines C-ABI function `name` (or its symbol, nb_ncclGinPut_v2):
    itself for a reduce/copy function (one with an element count), "gin" for a function NCCL's
    headers define inline over an ncclGin_C (ncclGinPut_v2 & co.: they instantiate every GIN
    backend), "core" for the rest."""
    for fn in ir_tables.api()["device_functions"]:
        if name == fn["name"] or (fn.get("header_inline") and name.endswith("_" + fn["name"])
                                  and name == _symbol(fn["name"])):
            if _is_reduce_copy(fn):
                return fn["name"]
            return "gin" if fn.get("header_inline") and _is_gin(fn) else "core"
    raise NcclInvalid(f"{name} is not a function of the device API's C ABI", "name")


def _symbol(name: str) -> str:
    from .._generated.device_wrapper import FUNCTIONS
    return FUNCTIONS[name]["symbol"]


def _storage_names() -> list[str]:
    return sorted(s["name"] for s in ir_tables.api().get("device_storage", ()))


def unit_source(code: int, unit: str) -> str:
    """The release's wrapper with only the unit's definitions (declarations all kept)."""
    wrapper = cuda_source.wrapper_source(code)
    source = _DEFINITION.sub(lambda m: m.group(0) if unit_of(m.group(1)) == unit else "", wrapper)
    if unit == "core":
        # The sizes are read back from the PTX: a constant's initializer is its value.
        source += "".join(f'\nextern "C" __device__ const unsigned long long {_SIZE_PREFIX}{name} = sizeof({name});'
                          for name in _storage_names() if re.search(rf"\bstruct {name}\b", wrapper))
    return source


def _run(command: list[str], what: str) -> None:
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise NcclInvalid(f"{what} failed ({' '.join(command)}):\n{run.stderr[-4000:]}", "nccl_version")


def wrapper_cubin(nccl_version: int | str | None, unit: str, cc: tuple[int, int]) -> bytes:
    """One unit of the release's wrapper as a relocatable cubin for compute capability `cc`."""
    code = cuda_source.nccl_version_code(nccl_version)
    source = unit_source(code, unit)
    arch = f"{cc[0]}{cc[1]}"
    options = list(cuda_source.compile_options(code)) + ["--extended-lambda", "-rdc=true", "-ptx",
                                                         f"-arch=compute_{arch}"]
    key = hashlib.sha256("\0".join([source] + options).encode()).hexdigest()[:24]
    cached = cache_dir() / f"nccl_device_wrapper_{code}_{unit}_sm{arch}_{key}.cubin"
    if not cached.is_file():
        nvcc = cuda_source._nvcc()
        ptxas = str(Path(nvcc).with_name("ptxas")) if os.sep in nvcc else "ptxas"
        what = f"compiling NCCL {ir_tables.version_text(code)}'s device API wrapper ({unit})"
        with tempfile.TemporaryDirectory(prefix="ncclbind-device-") as tmp:
            cu, ptx, cubin = Path(tmp) / "wrapper.cu", Path(tmp) / "wrapper.ptx", Path(tmp) / "wrapper.cubin"
            cu.write_text(source)
            _run([nvcc, *options, "-o", str(ptx), str(cu)], what)
            if unit == "core":
                _check_storage(code, storage_sizes(ptx.read_text()))
            _run([ptxas, f"-arch=sm_{arch}", "-c", "-o", str(cubin), str(ptx)], what)
            cached.parent.mkdir(parents=True, exist_ok=True)
            partial = cached.with_suffix(f".{os.getpid()}.tmp")
            partial.write_bytes(cubin.read_bytes())
            partial.replace(cached)
    return cached.read_bytes()


def storage_sizes(ptx: str) -> dict[str, int]:
    """{storage record: sizeof} as the core unit compiled into `ptx` records them."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(rf"\b{_SIZE_PREFIX}(\w+)\s*=\s*(\d+)", ptx)}


def _check_storage(code: int, sizes: dict[str, int]) -> None:
    for name, size in sizes.items():
        reserved = layouts.storage_layout(name, code).size
        if size > reserved:
            raise NcclInvalid(f"NCCL {ir_tables.version_text(code)}'s {name} is {size} bytes, more than the "
                              f"{reserved} the IR gives it; regenerate the IR with this release's headers",
                              "nccl_version")
