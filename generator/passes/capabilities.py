"""What a release offers, as IR facts read from what its headers declare.

Each capability names the declaration that proves it; `capabilities_of(ir)` lists the ones a
header set has, in CAPABILITIES' order, and the pipeline stores them in the set's IR
(bindings/ir/<set>.json "capabilities"). The generator, the Bazel loops (through
tools/bazel/header_sets_json.py) and the tests filter on them instead of on version numbers
or on which headers a set names.
"""
from __future__ import annotations

from ..header_sets import DEVICE_API_HEADER

# name -> (what proves it, what it means). A proof is ("header", file), ("device_function", name)
# (a C-ABI device function the headers declare, header_inline ones aside), ("function", name) or
# ("record", name); the header names are header_sets.py's.
CAPABILITIES = {
    "device_api": (("header", DEVICE_API_HEADER["nccl"]),
                   "the device API: kernels call NCCL (nccl_device.h, NCCL 2.28 on); ncclbind renders a "
                   "C-ABI wrapper of it and the Numba front end"),
    "device_c_abi": (("device_function", "ncclCoopAnyInitCta"),
                     "NCCL's own C-ABI device functions over ncclCoopAny and the *_C session storage, the C ABI "
                     "ncclbind's wrapper renders on every release (nccl_device_wrapper.h, with "
                     "libnccl_device.bc/.ltoir, 2.30 to 2.32.3)"),
    "device_ir": (("device_function", "ncclIrCoopInitCta"),
                  "NCCL's device IR C ABI: ncclIr* device functions over opaque ncclIr* storage "
                  "(nccl_device_ir.h, with libnccl_device.bc/.ltoir, 2.32.6 on)"),
    "windows": (("function", "ncclCommWindowRegister"),
                "symmetric memory windows (ncclCommWindowRegister)"),
    "config": (("record", "ncclConfig_t"), "communicator configuration (ncclConfig_t)"),
    "expert_parallel": (("function", "ncclEpCreateGroup"), "NCCL EP's dispatch and combine"),
}
# A capability a newer release has in place of one it no longer has: the same service through
# another interface. The main job and check-compat call that loss a move, not a removal.
SUCCESSORS = {"device_c_abi": "device_ir"}


def _has(ir, proof) -> bool:
    kind, name = proof
    if kind == "header":
        return name in ir.headers
    if kind == "device_function":
        return any(f.name == name and not f.header_inline for f in ir.device_functions)
    if kind == "function":
        return any(f.name == name for f in ir.functions)
    if kind == "record":
        return any(r.name == name and not r.device_only for r in ir.records)
    raise ValueError(f"capabilities: unknown proof kind {kind!r}")


def capabilities_of(ir) -> list[str]:
    return [name for name, (proof, _) in CAPABILITIES.items() if _has(ir, proof)]


def interface_functions(device_functions, capability: str) -> list:
    """The C-ABI device functions of one interface capability (device_c_abi, device_ir): those
    declared in the header that declares its proof, header_inline ones aside. [] where no
    function proves it."""
    (kind, proof), _ = CAPABILITIES[capability]
    if kind != "device_function":
        raise ValueError(f"capabilities: {capability} is not proved by a device function")
    headers = {f.header for f in device_functions if f.name == proof and not f.header_inline}
    return [f for f in device_functions if f.header in headers and not f.header_inline]


def _names(items) -> set[str]:
    return {item.name for item in items}


def losses(previous, ir) -> list[str]:
    """What `ir` (a header set) offers less than `previous` (the set before it of the same
    library), as phrases: each lost capability (a move where SUCCESSORS names the one it has in
    its place), then the host functions, records and fields, and device functions it no longer
    declares. [] where it lost nothing."""
    out = []
    for name in previous.capabilities:
        if name in ir.capabilities:
            continue
        successor = SUCCESSORS.get(name)
        if successor in ir.capabilities:
            out.append(f"{name} moved to {successor}")
        else:
            out.append(f"{name} ({CAPABILITIES[name][1]})")

    def gone(kind: str, before, now) -> None:
        names = sorted(before - now)
        if names:
            shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
            out.append(f"{len(names)} {kind}{'s' if len(names) != 1 else ''} ({shown})")

    gone("function", _names(previous.functions), _names(ir.functions))
    records = {r.name: r for r in ir.records}
    gone("record", _names(previous.records), set(records))
    fields = {f"{r.name}.{f.name}" for r in previous.records if r.name in records for f in r.fields}
    gone("field", fields, {f"{r.name}.{f.name}" for r in ir.records for f in r.fields})
    gone("device function", {f.name for f in previous.device_functions}, {f.name for f in ir.device_functions})
    return out
