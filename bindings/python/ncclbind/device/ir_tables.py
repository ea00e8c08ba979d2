"""The IR that ncclbind.device reads at run time: the device API's C-ABI surface
(`device_functions`, `device_storage` of bindings/ir/api/nccl.json) and each header set's
record layouts (bindings/ir/<set>.json). Nothing here restates a layout or a "since": a new
release is a new IR file, and this module picks it up.

The IR lives in the checkout (bindings/ir/), beside this package; a copy of the package
installed elsewhere finds it through NCCLBIND_IR_DIR."""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from ..errors import NcclInvalid

__all__ = ["ir_dir", "api", "header_set", "header_set_versions", "header_set_for", "version_text",
           "reduce_copy_function"]


def ir_dir() -> Path:
    """NCCLBIND_IR_DIR, else bindings/ir/ of the checkout this package is part of."""
    if os.environ.get("NCCLBIND_IR_DIR"):
        where = Path(os.environ["NCCLBIND_IR_DIR"])
    else:
        where = Path(__file__).resolve().parents[3] / "ir"
    if not (where / "api" / "nccl.json").is_file():
        raise NcclInvalid(f"ncclbind.device reads the IR (bindings/ir/api/nccl.json), and {where} has none: "
                          "set NCCLBIND_IR_DIR to the bindings/ir folder of the ncclbind checkout",
                          "NCCLBIND_IR_DIR")
    return where


@functools.lru_cache(maxsize=None)
def api() -> dict[str, Any]:
    """The merged API of every NCCL header set (bindings/ir/api/nccl.json)."""
    return json.loads((ir_dir() / "api" / "nccl.json").read_text())


@functools.lru_cache(maxsize=None)
def header_set(version: str) -> dict[str, Any]:
    """The IR of one NCCL header set, by its version ('2.32.3')."""
    path = ir_dir() / f"nccl-{version}.json"
    if not path.is_file():
        raise NcclInvalid(f"no IR for NCCL {version} ({path}); the header sets are "
                          f"{', '.join(header_set_versions())}", "nccl_version")
    return json.loads(path.read_text())


def header_set_versions() -> list[str]:
    """The NCCL header sets' versions, oldest first."""
    return list(api()["versions"])


def version_text(code: int) -> str:
    """"2.28.9" for 22809."""
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def header_set_for(code: int) -> str:
    """The header set that describes a release: the same one, else the newest older one."""
    codes = dict(api()["version_codes"])
    fitting = [v for v, c in codes.items() if c <= code]
    if not fitting:
        raise NcclInvalid(f"NCCL {version_text(code)} is older than every header set "
                          f"({', '.join(codes)})", "nccl_version")
    return max(fitting, key=lambda v: codes[v])


# NumPy element type -> the C type of the C ABI's per-type families (their suffix comes from the IR).
_C_ELEMENT = {"int8": "int8_t", "uint8": "uint8_t", "int32": "int32_t", "uint32": "uint32_t", "int64": "int64_t",
              "uint64": "uint64_t", "float16": "half", "float32": "float", "float64": "double"}


def reduce_copy_function(family: str, dtype: Any) -> str:
    """The C-ABI function of a per-type family ("ncclLsaReduceSum") for a NumPy dtype, found in
    the IR by its element pointer type: ncclLsaReduceSum_F32 for float32."""
    import numpy as np
    name = np.dtype(dtype).name
    c_type = _C_ELEMENT.get(name)
    members = [fn for fn in api()["device_functions"] if fn["name"].startswith(family + "_")]
    for fn in members:
        if c_type and any(p["type"]["kind"] == "pointer" and p["type"]["pointee"].get("name") == c_type
                          for p in fn.get("params", ())):
            return fn["name"]
    raise NcclInvalid(f"{family} has no variant for {name} (it has "
                      f"{', '.join(fn['name'][len(family) + 1:] for fn in members)})", "dtype")
