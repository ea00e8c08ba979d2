"""The IR that ncclbind.device reads at run time: the device API's C-ABI surface
(`device_functions`, `device_storage` and the enums they name, of bindings/ir/api/nccl.json) and
each header set's layouts of the records those functions take (bindings/ir/<set>.json), as the
generator cut them into the package data file ncclbind/device/_generated/ir.json
(generator/render/device_wrapper.py), read once, so an installed package needs no checkout. Nothing here restates a layout or a "since": a new
release is a new IR file, and regenerating picks it up."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from .._generated.vocabulary import DEVICE_ELEMENTS
from ..errors import NcclInvalid

__all__ = ["api", "header_set", "header_set_versions", "header_set_for", "version_text",
           "reduce_copy_function", "reduce_copy_member"]


@functools.lru_cache(maxsize=None)
def _generated() -> dict[str, Any]:
    return json.loads((Path(__file__).parent / "_generated" / "ir.json").read_text())


def api() -> dict[str, Any]:
    """The merged NCCL API's device part: versions, version_codes, device_functions,
    device_storage, and the enums those name (JSON form, as in bindings/ir/api/nccl.json)."""
    return _generated()["api"]


def header_set(version: str) -> dict[str, Any]:
    """One NCCL header set's ('2.32.3') records that the device functions take, and its
    device_storage (JSON form, as in bindings/ir/nccl-<set>.json)."""
    sets = _generated()["header_sets"]
    if version not in sets:
        raise NcclInvalid(f"no IR for NCCL {version}; the header sets are {', '.join(sets)}", "nccl_version")
    return sets[version]


def header_set_versions() -> list[str]:
    """The versions of the NCCL header sets with a device API (capability device_api), oldest first."""
    return list(api()["versions"])


def version_text(code: int) -> str:
    """"2.28.9" for 22809."""
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def header_set_for(code: int) -> str:
    """The header set that describes a release: the same one, else the newest older one."""
    codes = dict(api()["version_codes"])
    fitting = [v for v, c in codes.items() if c <= code]
    if not fitting:
        raise NcclInvalid(f"NCCL {version_text(code)} has no device API (nccl_device.h): it first appears in "
                          f"NCCL {min(codes, key=codes.get)} (the releases with one here: {', '.join(codes)})",
                          "nccl_version")
    return max(fitting, key=lambda v: codes[v])


# NumPy element type -> the C type of the C ABI's per-type families (their suffix comes from the
# IR), as policy/vocabulary.toml states it (c_element).
_C_ELEMENT = {name: c_element for name, c_element, _ in DEVICE_ELEMENTS}


def reduce_copy_member(family: str, c_type: str | None, what: str) -> str:
    """The C-ABI function of a per-type family ("ncclLsaReduceSum") for element C type `c_type`:
    the member whose suffix the reduce/copy functions give that type, found in the IR by a member
    of any family that takes a pointer to it (the window-only families, ncclLsaReduceSumCopy, take
    none). `what` names the element type in the error."""
    functions = api()["device_functions"]
    suffixes = {fn["name"].rsplit("_", 1)[1] for fn in functions
                if c_type and any(p["name"] == "count" for p in fn.get("params", ()))
                and any(p["type"]["kind"] == "pointer" and p["type"]["pointee"].get("name") == c_type
                        for p in fn.get("params", ()))}
    members = [fn["name"] for fn in functions if fn["name"].rsplit("_", 1)[0] == family]
    for member in members:
        if member.rsplit("_", 1)[1] in suffixes:
            return member
    raise NcclInvalid(f"{family} has no variant for {what} (it has "
                      f"{', '.join(m.rsplit('_', 1)[1] for m in members)})", "dtype")


def reduce_copy_function(family: str, dtype: Any) -> str:
    """The C-ABI function of a per-type family for a NumPy dtype: ncclLsaReduceSum_F32 for float32."""
    import numpy as np
    name = np.dtype(dtype).name
    return reduce_copy_member(family, _C_ELEMENT.get(name), name)
