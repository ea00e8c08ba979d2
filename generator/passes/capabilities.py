"""What a release offers, as IR facts read from what its headers declare.

Each capability names the declaration that proves it; `capabilities_of(ir)` lists the ones a
header set has, in CAPABILITIES' order, and the pipeline stores them in the set's IR
(bindings/ir/<set>.json "capabilities"). The generator, the Bazel loops (through
tools/bazel/header_sets_json.py) and the tests filter on them instead of on version numbers
or on which headers a set names.
"""
from __future__ import annotations

from ..header_sets import DEVICE_API_HEADER, LIBRARY_DEVICE_HEADERS

# name -> (what proves it, what it means). A proof is ("header", file), ("device_header", file),
# ("function", name) or ("record", name); the header names are header_sets.py's.
CAPABILITIES = {
    "device_api": (("header", DEVICE_API_HEADER["nccl"]),
                   "the device API: kernels call NCCL (nccl_device.h, NCCL 2.28 on); ncclbind renders a "
                   "C-ABI wrapper of it and the Numba front end"),
    "device_c_abi": (("device_header", LIBRARY_DEVICE_HEADERS["nccl"][0]),
                     "NCCL's own C-ABI device functions (nccl_device_wrapper.h, with libnccl_device.bc/.ltoir)"),
    "windows": (("function", "ncclCommWindowRegister"),
                "symmetric memory windows (ncclCommWindowRegister)"),
    "config": (("record", "ncclConfig_t"), "communicator configuration (ncclConfig_t)"),
    "expert_parallel": (("function", "ncclEpCreateGroup"), "NCCL EP's dispatch and combine"),
}


def _has(ir, proof) -> bool:
    kind, name = proof
    if kind == "header":
        return name in ir.headers
    if kind == "device_header":
        return name in (ir.device_headers or [])
    if kind == "function":
        return any(f.name == name for f in ir.functions)
    if kind == "record":
        return any(r.name == name and not r.device_only for r in ir.records)
    raise ValueError(f"capabilities: unknown proof kind {kind!r}")


def capabilities_of(ir) -> list[str]:
    return [name for name, (proof, _) in CAPABILITIES.items() if _has(ir, proof)]
