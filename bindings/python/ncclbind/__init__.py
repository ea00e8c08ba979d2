"""ncclbind: NVIDIA NCCL for Python, generated from the real headers, over one C runtime.

    import ncclbind, torch
    uid = ncclbind.UniqueId()                          # share uid.to_bytes() with the other ranks
    with ncclbind.Communicator.init(nranks=1, rank=0, unique_id=uid) as comm:
        x = torch.ones(2, device="cuda")
        comm.all_reduce(x, x)
        y = ncclbind.empty(1024, "float32", like="torch", comm=comm)  # in ncclMemAlloc memory

Layers: ncclbind._nccl / ncclbind._nccl_ep are generated from nccl.h and
nccl_ep.h (every function in snake_case, pointers and handles as ints, struct
mirrors); ncclbind.nccl_enums and ncclbind.errors are generated too; the rest
(ncclbind.core) is the Pythonic API, imported on first use so that
`import ncclbind` stays cheap.
"""
from __future__ import annotations

import os
import sys

from . import _nccl  # the extension: loads no NCCL library until a function needs one

_nccl_ep = sys.modules["ncclbind._nccl_ep"]  # created by _nccl, which holds both modules' code

__version__ = "0.1.0"


def _add_wheel_search_dirs() -> None:
    """Tell the runtime where pip wheels keep the libraries (nvidia-nccl-cu*,
    nccl-extensions, nvidia-cuda-runtime-cu*), in sys.path order. A library
    already loaded in the process (e.g. by torch) is used before any of these."""
    wanted = ((_nccl.LIB_NCCL, ("nvidia", "nccl", "lib")),
              (_nccl.LIB_NCCL_EP, ("nccl", "ep", "lib", "cu13")),
              (_nccl.LIB_NCCL_EP, ("nccl", "ep", "lib", "cu12")),
              (None, ("nvidia", "cuda_runtime", "lib")),
              (None, ("nvidia", "cu13", "lib")))
    seen = set()
    for entry in sys.path:
        if not entry or entry in seen or not os.path.isdir(entry):
            continue
        seen.add(entry)
        for lib, parts in wanted:
            directory = os.path.join(entry, *parts)
            if os.path.isdir(directory):
                if lib is None:
                    _nccl.cuda_add_search_dir(directory)
                else:
                    try:
                        _nccl.add_search_dir(lib, directory)
                    except Exception:  # already loaded: the search is over
                        pass


_add_wheel_search_dirs()

# name -> module under ncclbind that defines it, imported on first access
_EXPORTS = {
    "Communicator": "core.communicator",
    "NcclBuffer": "core.buffer",
    "UniqueId": "core.unique_id",
    "group": "core.group", "group_start": "core.group", "group_end": "core.group", "GroupSimInfo": "core.group",
    "RegisteredBufferHandle": "core.resources", "RegisteredWindowHandle": "core.resources",
    "CustomRedOp": "core.resources", "DevCommResource": "core.resources",
    "NCCLDevCommRequirements": "core.resources",
    "mem_alloc": "core.memory", "mem_free": "core.memory", "NcclMemoryResource": "core.memory",
    "NcclMemoryBlock": "core.memory",
    "empty": "core.arrays", "zeros": "core.arrays",
    "CudaDeviceContext": "core.cuda",
    "get_version": "core.versions", "show_versions": "core.versions", "version_info": "core.versions",
    "library_info": "core.versions", "Version": "core.versions", "LibraryInfo": "core.versions",
    "VersionInfo": "core.versions",
    "stream_handle": "core.streams",
    "NcclError": "errors", "NcclInvalid": "errors", "NcclLibraryNotFoundError": "errors",
    "NcclSymbolNotFoundError": "errors", "NcclStateError": "errors", "NcclTimeout": "errors",
    "NcclDataType": "nccl_enums", "NcclRedOp": "nccl_enums", "NcclResult": "nccl_enums",
    "NcclGinType": "nccl_enums", "NcclScalarResidence": "nccl_enums",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        if name in ("errors", "nccl_enums", "nccl_ep_enums", "core"):
            import importlib
            return importlib.import_module(f".{name}", __name__)
        raise AttributeError(f"module 'ncclbind' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
