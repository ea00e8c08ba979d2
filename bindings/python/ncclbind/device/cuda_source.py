"""CUDA C++ kernels that use NCCL's device API, compiled from Python against the headers of
the loaded libnccl's release, and the C-ABI wrapper of the device API for that release.

The wrapper (`wrapper_source`) is the device API's C-callable surface, named as in NCCL's newest
nccl_device_wrapper.h (ncclDevComm_Rank, ncclCoopAnyInitWarp, ncclLsaBarrierSessionInit,
ncclLsaReduceSum_F32, ...): extern "C" __device__ functions whose bodies call the C++ device API
of the release. It is generated per header set by `python -m generator` (policy/
device_wrapper.toml, templates/cuda/device_wrapper.cu.j2) into bindings/device_wrapper/, with its table in
ncclbind/device/_generated/wrapper.json (ncclbind.device.wrapper_table reads both); a function the release's C++ API cannot provide is left
out, and `missing_functions` says which release it needs.

    from ncclbind.device import cuda_source
    module = cuda_source.compile_module(source, include_wrapper=True)
    kernel = module.get_function("my_kernel")       # a cupy.RawKernel

Compilation uses CuPy's RawModule with the nvcc backend (NCCL's device headers include the CUDA
runtime headers, which NVRTC cannot); the nvcc is $CUDA_HOME/bin/nvcc or the one on PATH.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any, Iterable

from ..errors import NcclInvalid, NcclSymbolNotFoundError
from . import ir_tables

# Part D (the Numba layer) imports this module lazily; these are its public names.
__all__ = ["wrapper_source", "nccl_include_dir", "compile_module", "missing_functions", "require_function",
           "wrapper_functions", "header_set_version", "nccl_version_code", "compile_options",
           "dev_comm_buffer", "window_handle"]


def _table():
    from . import wrapper_table
    return wrapper_table


def nccl_version_code(nccl_version: int | str | None = None) -> int:
    """22809 for 22809, "2.28.9" or (None) a loaded libnccl 2.28.9."""
    if nccl_version is None:
        from ..core.versions import loaded_version_code
        return loaded_version_code("nccl")
    if isinstance(nccl_version, bool) or not isinstance(nccl_version, (int, str)):
        raise NcclInvalid(f"nccl_version must be a version code (22809), a version string ('2.28.9') or None "
                          f"(the loaded libnccl), not {type(nccl_version).__name__}", "nccl_version")
    if isinstance(nccl_version, int):
        return nccl_version
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", nccl_version.strip())
    if not m:
        raise NcclInvalid(f"nccl_version is {nccl_version!r}; expected 'MAJOR.MINOR.PATCH'", "nccl_version")
    major, minor, patch = (int(x) for x in m.groups())
    return major * 10000 + minor * 100 + patch  # NCCL_VERSION(X,Y,Z) for X.Y >= 2.9


def header_set_version(nccl_version: int | str | None = None) -> str:
    """The header set whose wrapper serves `nccl_version`: the same release, else the newest
    older one (its C++ device API is what the newer headers keep); NcclInvalid when none is older."""
    return ir_tables.header_set_for(nccl_version_code(nccl_version))


def wrapper_source(nccl_version: int | str | None = None) -> str:
    """The generated C-ABI wrapper (.cu text) for a release; it includes <nccl_device.h>."""
    return _table().HEADER_SETS[header_set_version(nccl_version)]["source"]


def wrapper_functions(nccl_version: int | str | None = None) -> dict[str, str]:
    """{name: C declaration} of the wrapper functions that release's wrapper defines."""
    version = header_set_version(nccl_version)
    missing = _table().HEADER_SETS[version]["missing"]
    return {name: fn["declaration"] for name, fn in _table().FUNCTIONS.items() if name not in missing}


def missing_functions(nccl_version: int | str | None = None) -> dict[str, str | None]:
    """{name: the first release whose wrapper has it (None: none yet)} for every C-ABI function
    the release's wrapper leaves out, because its C++ device API lacks what the body calls."""
    return dict(_table().HEADER_SETS[header_set_version(nccl_version)]["missing"])


def require_function(name: str, nccl_version: int | str | None = None) -> None:
    """NcclSymbolNotFoundError unless the release's wrapper defines `name`, e.g.
    "ncclLsaReduceSum_F32 needs NCCL >= 2.29.7; loaded 2.28.9", or for one that only older
    releases provide, "... needs NCCL 2.29.7 to 2.32.3 (...); loaded 2.32.6"."""
    table = _table()
    if name not in table.FUNCTIONS:
        raise NcclInvalid(f"{name} is not a function of the device API's C ABI", "name")
    version = header_set_version(nccl_version)
    missing = table.HEADER_SETS[version]["missing"]
    if name in missing:
        code = nccl_version_code(nccl_version)
        loaded = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
        need, last = missing[name], table.HEADER_SETS[version]["dropped"].get(name)
        raise NcclSymbolNotFoundError(
            f"{name} needs NCCL {need} to {last} (NCCL {loaded}'s device API can no longer provide it); "
            f"loaded {loaded}" if last else
            f"{name} needs NCCL >= {need}; loaded {loaded}" if need else
            f"{name}: no NCCL release ncclbind binds can provide it; loaded {loaded}", function=name)


def _cuda_home() -> Path:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return Path(os.environ[var])
    return Path("/usr/local/cuda")


def _header_version(include: Path) -> int | None:
    try:
        text = (include / "nccl.h").read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r"^#define NCCL_VERSION_CODE (\d+)", text, re.M)
    return int(m.group(1)) if m else None


def _beside_loaded_library() -> list[Path]:
    """<lib>/../include for the libnccl ncclbind loaded (as named, then with links resolved): a
    wheel or an unpacked release keeps its headers there, and it is the one release that surely
    matches the library that runs."""
    from ..core.versions import library_info
    try:
        info = library_info("nccl")
    except Exception:  # no libnccl at all: the other places may still serve an explicit version
        return []
    if not info.loaded or not info.path:
        return []
    found = []
    for lib in (Path(info.path), Path(os.path.realpath(info.path))):
        include = lib.parent.parent / "include"
        if include not in found:
            found.append(include)
    return found


def _include_candidates() -> list[tuple[str, Path]]:
    found = []
    if os.environ.get("NCCLBIND_NCCL_INCLUDE"):
        return [("NCCLBIND_NCCL_INCLUDE", Path(os.environ["NCCLBIND_NCCL_INCLUDE"]))]
    found += [("beside the loaded libnccl", include) for include in _beside_loaded_library()]
    try:
        import nvidia.nccl  # the nvidia-nccl wheel
        for p in nvidia.nccl.__path__:
            found.append(("the nvidia-nccl wheel", Path(p) / "include"))
    except ImportError:
        pass
    found.append(("$CUDA_HOME/include", _cuda_home() / "include"))
    found.append(("/usr/include", Path("/usr/include")))
    return found


def nccl_include_dir(nccl_version: int | str | None = None) -> Path:
    """The folder holding nccl.h and nccl_device.h of the release `nccl_version` (default: the
    loaded libnccl's): NCCLBIND_NCCL_INCLUDE, else the include/ beside the loaded libnccl's lib/
    (an unpacked release or wheel named by NCCLBIND_NCCL_PATH), else the nvidia-nccl wheel's
    include/, else $CUDA_HOME/include, else /usr/include; the first whose nccl.h has that version.
    NcclInvalid when none has that release's headers: a kernel must see the layouts of the
    library that runs it."""
    want = nccl_version_code(nccl_version)
    seen = []
    for where, include in _include_candidates():
        if not (include / "nccl_device.h").is_file():
            seen.append(f"{where} ({include}): no nccl_device.h")
            continue
        got = _header_version(include)
        if got == want:
            return include
        seen.append(f"{where} ({include}): NCCL {got}")
    raise NcclInvalid(f"no NCCL {want} device headers: {'; '.join(seen)}. Set NCCLBIND_NCCL_INCLUDE to the "
                      f"include/ folder of the release that is loaded", "NCCLBIND_NCCL_INCLUDE")


def _nvcc() -> str:
    nvcc = _cuda_home() / "bin" / "nvcc"
    return str(nvcc) if nvcc.is_file() else "nvcc"


def compile_options(nccl_version: int | str | None = None, options: Iterable[str] = (), *,
                    include_dirs: Iterable[str | os.PathLike] | None = None) -> tuple[str, ...]:
    """The nvcc options a kernel using NCCL's device API needs: C++17, device lambdas (NCCL's
    reduce/copy templates use them), the release's headers (nccl_include_dir, or include_dirs when
    given) and CCCL (libcu++'s <cuda/atomic>), then `options`."""
    dirs = [Path(d) for d in include_dirs] if include_dirs is not None else [nccl_include_dir(nccl_version)]
    cccl = _cuda_home() / "include" / "cccl"
    base = ["-std=c++17", "--extended-lambda", *(f"-I{d}" for d in dirs)]
    if cccl.is_dir():
        base.append(f"-I{cccl}")
    return tuple(base) + tuple(options)


def compile_module(source: str, *, name_expressions: Iterable[str] | None = None, options: Iterable[str] = (),
                   nccl_version: int | str | None = None, include_wrapper: bool = False,
                   backend: str = "nvcc") -> Any:
    """A cupy.RawModule of `source` compiled against the headers of the loaded libnccl's release
    (or of `nccl_version`). include_wrapper=True puts the release's C-ABI wrapper
    (wrapper_source) before `source`, so its kernels can call ncclCoopAnyInitWarp & co.
    name_expressions: C++ names of templated kernels (CuPy's NVRTC backend only, which cannot
    include the CUDA runtime headers nccl.h includes); kernels declared extern "C" need none.
    On NCCL 2.30+ NCCL's own libnccl_device.ltoir defines the same C functions for LTO users
    (Numba): this path compiles the generated definitions into the module instead, so it needs
    no device link step on any release."""
    if not isinstance(source, str):
        raise NcclInvalid(f"source must be CUDA C++ text (str), not {type(source).__name__}", "source")
    if backend not in ("nvcc", "nvrtc"):
        raise NcclInvalid(f"backend is {backend!r}; expected 'nvcc' or 'nvrtc'", "backend")
    if isinstance(options, str):
        raise NcclInvalid("options must be a sequence of option strings, not one string", "options")
    import cupy
    code = (wrapper_source(nccl_version) + "\n" + source) if include_wrapper else source
    opts = compile_options(nccl_version, options)
    if backend == "nvcc" and "NVCC" not in os.environ and shutil.which("nvcc") is None:
        os.environ["NVCC"] = _nvcc()  # CuPy's nvcc backend runs $NVCC, else the one on PATH
    kwargs = {}
    if name_expressions is not None:
        if backend == "nvcc":
            raise NcclInvalid("name_expressions need backend='nvrtc' (CuPy's nvcc backend cannot look up "
                              "template instances); declare the kernels extern \"C\" instead", "name_expressions")
        kwargs["name_expressions"] = tuple(name_expressions)
    return cupy.RawModule(code=code, options=opts, backend=backend, **kwargs)



def dev_comm_buffer(dev_comm: Any) -> Any:
    """The device communicator's ncclDevComm bytes in device memory (a CuPy uint8 array, on the
    current CuPy device): pass it to a kernel parameter `const ncclDevComm *comm`. dev_comm: a
    DevCommResource (Communicator.create_dev_comm) or its record. The bytes are in the loaded
    release's layout, which is the layout of the headers compile_module compiles against."""
    import cupy
    import numpy
    raw = dev_comm.to_bytes() if hasattr(dev_comm, "to_bytes") else bytes(dev_comm)
    if not raw:
        raise NcclInvalid("dev_comm has no bytes: pass a DevCommResource or its ncclDevComm record", "dev_comm")
    return cupy.asarray(numpy.frombuffer(raw, dtype=numpy.uint8))


def window_handle(window: Any) -> Any:
    """A registered window (RegisteredWindowHandle) as a kernel argument of type ncclWindow_t:
    its device-side handle as a numpy.uint64."""
    import numpy
    handle = getattr(window, "window", window)
    if getattr(window, "_closed", False):
        raise NcclInvalid("window is deregistered", "window")
    if isinstance(handle, bool) or not isinstance(handle, int) or handle <= 0:
        raise NcclInvalid(f"window must be a RegisteredWindowHandle (Communicator.register_window) or its "
                          f"handle, not {window!r}", "window")
    return numpy.uint64(handle)
