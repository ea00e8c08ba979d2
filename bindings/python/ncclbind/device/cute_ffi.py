"""Which bitcode a CuTe kernel links for the release in use, registered as the linker of the
generated declarations (ncclbind.device.base.cute_abi.set_linker), and the release's record layouts.

The release is the loaded libnccl's (ncclbind's loader: NCCLBIND_NCCL_PATH, else the usual
search). A release that ships lib/libnccl_device.bc (NCCL 2.30 on; the IR's device_c_abi
capability) links NCCL's own, found beside the loaded libnccl (or named by
NCCLBIND_NCCL_DEVICE_BC); an older one links ncclbind's C-ABI wrapper for it, built to LLVM bitcode
by clang (ncclbind.device.linking.wrapper_bitcode_path, cached), one unit per call family so a
kernel links only what it calls. NCCL's bitcode names a function as the C ABI does
(ncclTeamWorld); ncclbind's names a function NCCL's headers define inline with the wrapper's
prefix (nb_ncclTeamWorld): the wrapper table says which.

A function the release lacks is refused while the kernel is traced, before anything is compiled:
NcclSymbolNotFoundError "ncclLsaReduceSum_F32 needs NCCL >= 2.29.7; loaded 2.28.9"."""
from __future__ import annotations

import functools
import os
from pathlib import Path

from .base import cute_abi
from .base.cute_abi import ByVal, Bytes, Ptr, by_value, entry_alloca, entry_block, load, store, to_ptr  # noqa: F401
from ..errors import NcclInvalid
from . import cuda_source, ir_tables, layouts, linking

__all__ = ["target_release", "bitcode_for", "entry_alloca", "record_layout", "Ptr", "ByVal", "Bytes", "to_ptr",
           "by_value", "load", "store", "entry_block"]


def target_release() -> int:
    """The version code of the release kernels are compiled for: the loaded libnccl's."""
    return cuda_source.nccl_version_code(None)


def _ships_bitcode(code: int) -> bool:
    """Whether the release's headers declare NCCL's own C ABI (nccl_device_wrapper.h), which it
    ships compiled as lib/libnccl_device.bc (the IR's device_c_abi capability)."""
    return bool(ir_tables.header_set(ir_tables.header_set_for(code)).get("device_c_abi"))


def _nccl_bitcode(code: int) -> Path:
    """NCCL's libnccl_device.bc for the release: NCCLBIND_NCCL_DEVICE_BC, else beside the loaded
    libnccl (its lib/), else in the lib/ beside the release's headers."""
    if os.environ.get("NCCLBIND_NCCL_DEVICE_BC"):
        path = Path(os.environ["NCCLBIND_NCCL_DEVICE_BC"])
        if not path.is_file():
            raise NcclInvalid(f"NCCLBIND_NCCL_DEVICE_BC names {path}, which is not a file", "NCCLBIND_NCCL_DEVICE_BC")
        return path
    seen = []
    from ..core.versions import library_info
    try:
        info = library_info("nccl")
        loaded = [Path(info.path).parent, Path(os.path.realpath(info.path)).parent] if info.loaded and info.path else []
    except Exception:  # noqa: BLE001 - no libnccl: the headers' lib/ may still have it
        loaded = []
    try:
        beside_headers = [cuda_source.nccl_include_dir(code).parent / "lib"]
    except NcclInvalid:
        beside_headers = []
    for folder in loaded + beside_headers:
        path = folder / "libnccl_device.bc"
        if path.is_file():
            return path
        seen.append(str(folder))
    raise NcclInvalid(f"NCCL {ir_tables.version_text(code)} ships lib/libnccl_device.bc, but it is not in "
                      f"{' or '.join(seen) or 'any lib/ beside the loaded libnccl'}; set NCCLBIND_NCCL_DEVICE_BC to it",
                      "NCCLBIND_NCCL_DEVICE_BC")


def bitcode_for(name: str, coop: str | None = None, code: int | None = None) -> tuple[Path, str]:
    """_bitcode_for for the release kernels are compiled for (the loaded libnccl's by default)."""
    return _bitcode_for(name, coop, target_release() if code is None else code)


@functools.lru_cache(maxsize=None)  # every call a kernel traces asks; the answer is per release
def _bitcode_for(name: str, coop: str | None, code: int) -> tuple[Path, str]:
    """(the bitcode file that defines C-ABI function `name` for the release, the symbol it has
    there); NcclSymbolNotFoundError when the release lacks it. `coop`: the stateless coop kind the
    call is made with ("Cta", "Warp", "Thread"): where ncclbind's wrapper has the function's twin
    for it (nb_cta_<name>, over NCCL's C++ API instantiated for that coop, records by address),
    that twin from the bitcode of its unit's twins (no C-ABI definition: beside NCCL's own); it
    is what NCCL's C++ kernels compile to, where the C ABI goes through ncclCoopAny's table of
    functions (indirect calls LLVM does not resolve)."""
    cuda_source.require_function(name, code)
    from .wrapper_table import FUNCTIONS
    if coop:
        twin = linking.twin(code, name, coop)
        if twin and twin.startswith(linking.COOP_PREFIX.format(kind=coop.lower())):
            return linking.wrapper_bitcode_path(code, unit=linking.TWINS_OF + linking.unit_of(name), twins=True), twin
    if not _ships_bitcode(code):
        return linking.wrapper_bitcode_path(code, unit=linking.unit_of(name)), FUNCTIONS[name]["symbol"]
    if ir_tables.header_set_for(code) in _declared_in(name):
        return _nccl_bitcode(code), name
    # in ncclbind's wrapper for the release but not in NCCL's C ABI of it (a session's Destroy
    # before 2.32): that one definition, beside NCCL's bitcode
    return (linking.wrapper_bitcode_path(code, unit=linking.ONE_FUNCTION + name), FUNCTIONS[name]["symbol"])


@functools.lru_cache(maxsize=None)
def _declared_in(name: str) -> frozenset[str]:
    """The header sets whose C ABI (nccl_device_wrapper.h) declares function `name`."""
    return frozenset(next(fn.get("versions", ()) for fn in ir_tables.api()["device_functions"] if fn["name"] == name))


def record_layout(name: str) -> layouts.RecordLayout:
    """The IR's layout of record `name` for the release kernels are compiled for."""
    return layouts.record_layout(name, target_release())


cute_abi.set_linker(bitcode_for)
