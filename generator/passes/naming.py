"""Names and ownership from conventions.toml: snake_case names for Python and
Rust, and the function that releases each handle type."""
from __future__ import annotations

import re

from ..ir import HeaderSetIR

_PREFIXES = ("ncclEp", "nccl")


def snake_case(name: str, rename: dict) -> str:
    if name in rename:
        return rename[name]
    for prefix in _PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix) and name[len(prefix)].isupper():
            name = name[len(prefix):]
            break
    # LsaBarrier -> lsa_barrier; LLA2ACalcSlots -> lla2a_calc_slots; GetCftDeviceLeInfo -> get_cft_device_le_info
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def apply(ir: HeaderSetIR, conv) -> None:
    for fn in ir.functions:
        fn.snake_name = snake_case(fn.name, conv.rename)
    for td in ir.typedefs:
        td.destructor = conv.ownership.get(td.name)
    names = [fn.snake_name for fn in ir.functions]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"{ir.name}: functions collide in snake_case: {sorted(dupes)} "
                         "(add a [rename] entry to conventions.toml)")
