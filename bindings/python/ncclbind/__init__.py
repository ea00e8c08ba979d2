"""ncclbind: NVIDIA NCCL for Python, generated from the real headers, over one C runtime.

    import ncclbind, torch
    uid = ncclbind.get_unique_id()                          # share uid.to_bytes() with the other ranks
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

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~8 ms); checkers read it as True

from . import _nccl  # the extension: loads no NCCL library until a function needs one

# The extensions rely on the GIL to order a communicator's calls against its destroy() and abort()
# (bindings/python/src/call_gate.h) and to guard their caches. A free-threaded build turns the GIL
# back on when it imports them (they do not declare Py_mod_gil); with PYTHON_GIL=0 it stays off,
# and then ncclbind refuses to load rather than race.
if not getattr(sys, "_is_gil_enabled", lambda: True)():
    raise ImportError("ncclbind needs the GIL, and this free-threaded interpreter runs without it "
                      "(PYTHON_GIL=0 or -X gil=0): run with PYTHON_GIL=1, or a standard (GIL) build of Python")

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

# name -> module under ncclbind that defines it, imported on first access (importing them
# all would cost `import ncclbind` ~40 ms). The TYPE_CHECKING block below says the same
# for type checkers; tests/python/test_public_names.py holds the two equal.
_EXPORTS = {
    "Communicator": "core.communicator",
    "NcclBuffer": "base.buffer",
    "UniqueId": "base.unique_id",
    "group": "core.group", "group_start": "core.group", "group_end": "core.group", "GroupSimInfo": "core.group",
    "RegisteredBufferHandle": "core.resources", "RegisteredWindowHandle": "core.resources",
    "CftLeInfo": "_generated.policy_records", "WaitSignalDesc": "core.signals",
    "CustomRedOp": "core.resources", "DevCommResource": "core.dev_comm",
    "NCCLDevCommRequirements": "core.dev_comm", "TeamRequirement": "core.dev_comm",
    "LsaBarrierRequirement": "core.dev_comm", "GinBarrierRequirement": "core.dev_comm",
    "LLA2ARequirement": "core.dev_comm", "MultimemHandle": "core.dev_comm", "LsaBarrierHandle": "core.dev_comm",
    "GinBarrierHandle": "core.dev_comm", "LLA2AHandle": "core.dev_comm",
    "NCCLConfig": "_generated.nccl_records", "NCCLCollConfig": "_generated.nccl_records",
    "NCCLCommProperties": "_generated.nccl_records", "NCCLTeam": "_generated.nccl_records",
    "VendorOption": "base.config",
    "mem_alloc": "core.memory", "mem_free": "core.memory", "NcclMemoryResource": "core.memory",
    "NcclMemoryBlock": "core.memory",
    "empty": "core.arrays", "zeros": "core.arrays",
    "CudaDeviceContext": "base.cuda",
    "get_version": "core.versions", "show_versions": "core.versions", "version_info": "core.versions",
    "library_info": "core.versions", "Version": "core.versions", "LibraryInfo": "core.versions",
    "VersionInfo": "core.versions", "CudaVersion": "core.versions", "version_code": "core.versions",
    "CudaDevice": "base.cuda",
    "stream_handle": "base.streams",
    "Param": "params", "Team": "base.calls", "prepare": "base.calls", "PreparedCall": "base.calls",
    "NcclError": "errors", "NcclInvalid": "errors", "NcclLibraryNotFoundError": "errors",
    "NcclSymbolNotFoundError": "errors", "NcclStateError": "errors", "NcclTimeout": "errors",
    "NcclForeignException": "errors",
    "NcclDataType": "nccl_enums", "NcclRedOp": "nccl_enums", "NcclResult": "nccl_enums",
    "NcclGinType": "nccl_enums", "NcclScalarResidence": "nccl_enums",
    "NcclSymPool": "symmetric", "SymmAllocator": "symmetric", "SymmTensor": "symmetric", "torch_pool": "symmetric",
    # nccl4py 0.6.0's names (tests/conformance): enums, flag groups and module-level members of
    # policy/python_api.toml (the list is checked against nccl_enums.__all__ by
    # tests/python/test_public_names.py), and the module-level functions.
    **dict.fromkeys(("NcclGinConnectionType", "NcclHostCftMode", "NcclNvlsHostMode", "NcclCftTeamMode",
                     "NcclCftCap", "NcclCommMemStat", "CTAPolicy", "CommShrinkFlag", "CommSuspendFlag",
                     "WindowFlag", "INT8", "CHAR", "UINT8", "INT32", "INT", "UINT32", "INT64", "UINT64",
                     "FLOAT16", "HALF", "FLOAT32", "FLOAT", "FLOAT64", "DOUBLE", "BFLOAT16", "FLOAT8E4M3",
                     "FLOAT8E5M2", "SUM", "PROD", "MAX", "MIN", "AVG"), "nccl_enums"),
    "get_unique_id": "base.unique_id", "get_error_string": "core.versions", "dump_params": "params",
}

if TYPE_CHECKING:
    from . import (core as core, dev_comm as dev_comm, errors as errors, nccl_enums as nccl_enums,
                   nccl_ep_enums as nccl_ep_enums, params as params)
    from . import ep as ep
    from .interop import cupy as cupy, torch as torch
    from .core.arrays import empty as empty, zeros as zeros
    from .base.buffer import NcclBuffer as NcclBuffer
    from .core.communicator import Communicator as Communicator
    from .base.cuda import CudaDevice as CudaDevice, CudaDeviceContext as CudaDeviceContext
    from .core.group import (GroupSimInfo as GroupSimInfo, group as group, group_end as group_end,
                             group_start as group_start)
    from .core.memory import (NcclMemoryBlock as NcclMemoryBlock, NcclMemoryResource as NcclMemoryResource,
                              mem_alloc as mem_alloc, mem_free as mem_free)
    from ._generated.policy_records import CftLeInfo as CftLeInfo
    from .core.signals import WaitSignalDesc as WaitSignalDesc
    from .core.resources import (CustomRedOp as CustomRedOp, RegisteredBufferHandle as RegisteredBufferHandle,
                                 RegisteredWindowHandle as RegisteredWindowHandle)
    from .core.dev_comm import (DevCommResource as DevCommResource, GinBarrierHandle as GinBarrierHandle,
                                GinBarrierRequirement as GinBarrierRequirement, LLA2AHandle as LLA2AHandle,
                                LLA2ARequirement as LLA2ARequirement, LsaBarrierHandle as LsaBarrierHandle,
                                LsaBarrierRequirement as LsaBarrierRequirement, MultimemHandle as MultimemHandle,
                                NCCLDevCommRequirements as NCCLDevCommRequirements,
                                TeamRequirement as TeamRequirement)
    from .base.config import VendorOption as VendorOption
    from ._generated.nccl_records import (NCCLCollConfig as NCCLCollConfig,
                                          NCCLCommProperties as NCCLCommProperties, NCCLConfig as NCCLConfig,
                                          NCCLTeam as NCCLTeam)
    from .base.calls import PreparedCall as PreparedCall, Team as Team, prepare as prepare
    from .params import Param as Param
    from .base.streams import stream_handle as stream_handle
    from .base.unique_id import UniqueId as UniqueId
    from .core.versions import (LibraryInfo as LibraryInfo, Version as Version, VersionInfo as VersionInfo,
                                get_version as get_version, library_info as library_info,
                                CudaVersion as CudaVersion, version_code as version_code,
                                show_versions as show_versions, version_info as version_info)
    from .errors import (NcclError as NcclError, NcclForeignException as NcclForeignException,
                         NcclInvalid as NcclInvalid,
                         NcclLibraryNotFoundError as NcclLibraryNotFoundError, NcclStateError as NcclStateError,
                         NcclSymbolNotFoundError as NcclSymbolNotFoundError, NcclTimeout as NcclTimeout)
    from .nccl_enums import (NcclDataType as NcclDataType, NcclGinType as NcclGinType, NcclRedOp as NcclRedOp,
                             NcclResult as NcclResult, NcclScalarResidence as NcclScalarResidence)
    from .nccl_enums import (AVG as AVG, BFLOAT16 as BFLOAT16, CHAR as CHAR, DOUBLE as DOUBLE, FLOAT as FLOAT,
                             FLOAT8E4M3 as FLOAT8E4M3, FLOAT8E5M2 as FLOAT8E5M2, FLOAT16 as FLOAT16,
                             FLOAT32 as FLOAT32, FLOAT64 as FLOAT64, HALF as HALF, INT as INT, INT8 as INT8,
                             INT32 as INT32, INT64 as INT64, MAX as MAX, MIN as MIN, PROD as PROD, SUM as SUM,
                             UINT8 as UINT8, UINT32 as UINT32, UINT64 as UINT64, CTAPolicy as CTAPolicy,
                             CommShrinkFlag as CommShrinkFlag, CommSuspendFlag as CommSuspendFlag,
                             NcclCftCap as NcclCftCap, NcclCftTeamMode as NcclCftTeamMode,
                             NcclCommMemStat as NcclCommMemStat, NcclGinConnectionType as NcclGinConnectionType,
                             NcclHostCftMode as NcclHostCftMode, NcclNvlsHostMode as NcclNvlsHostMode,
                             WindowFlag as WindowFlag)
    from .base.unique_id import get_unique_id as get_unique_id
    from .core.versions import get_error_string as get_error_string
    from .params import dump_params as dump_params
    from .symmetric import (NcclSymPool as NcclSymPool, SymmAllocator as SymmAllocator, SymmTensor as SymmTensor,
                            torch_pool as torch_pool)

# nccl4py's nccl.core.cupy / nccl.core.torch helpers: submodules loaded when first used.
_INTEROP = {"cupy": "interop.cupy", "torch": "interop.torch"}

__all__ = sorted(_EXPORTS) + sorted(_INTEROP) + ["__version__"]

# nccl4py's names of the annotation aliases (its NcclBufferSpec, ...): attributes for code written
# for nccl4py, outside __all__ since they are open (Any) aliases, not types.
_ANNOTATION_ALIASES = ("NcclBufferSpec", "NcclScalarSpec", "NcclDeviceSpec", "NcclStreamSpec", "NcclEventSpec")


if not TYPE_CHECKING:  # hidden from type checkers, which would otherwise take any name as valid
    def __getattr__(name: str) -> object:
        module = _EXPORTS.get(name) or ("core.argument_types" if name in _ANNOTATION_ALIASES else None)
        if module is None and name in _INTEROP:
            import importlib
            value = importlib.import_module(f".{_INTEROP[name]}", __name__)
            globals()[name] = value
            return value
        if module is None:
            if name in ("errors", "nccl_enums", "nccl_ep_enums", "core", "params", "dev_comm", "ep"):
                import importlib
                return importlib.import_module(f".{name}", __name__)
            raise AttributeError(f"module 'ncclbind' has no attribute {name!r}")
        import importlib
        value = getattr(importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value
        return value


    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(_EXPORTS) | set(_INTEROP))
