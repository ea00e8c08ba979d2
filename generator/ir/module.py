from __future__ import annotations

from dataclasses import dataclass, field

from .constant import Constant, Initializer
from .device_function import DeviceFunction, DeviceStorage
from .enum import Enum
from .function import Function
from .record import Record
from .typedef import Typedef


@dataclass
class SkippedItem:
    name: str
    kind: str
    location: str    # header:line relative to the include root
    reason: str


@dataclass
class HeaderSetIR:
    """Everything bound from one header set."""
    name: str                      # e.g. nccl-2.28.9
    library: str                   # nccl | nccl_ep
    version: str                   # e.g. 2.28.9
    version_code: int
    headers: list[str]
    functions: list[Function] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    enums: list[Enum] = field(default_factory=list)
    typedefs: list[Typedef] = field(default_factory=list)
    constants: list[Constant] = field(default_factory=list)
    initializers: list[Initializer] = field(default_factory=list)
    skipped: list[SkippedItem] = field(default_factory=list)
    renamed: list[SkippedItem] = field(default_factory=list)  # bound under another name, and why
    depends_on: str | None = None  # the NCCL header set nccl_ep.h was parsed against
    # The NCCL header set whose device headers the library was compiled with (header_sets.toml's
    # kernel_headers): {"header_set", "library", "version", "version_code"}; set after extraction.
    kernel_headers: dict | None = None
    # The device API's C-callable functions and the storage types they point to (CUDA-mode parse).
    device_functions: list[DeviceFunction] = field(default_factory=list)
    device_storage: list[DeviceStorage] = field(default_factory=list)
    # Names of the C++ device API's templates, classes and functions (what a C-ABI wrapper can call).
    device_cxx_names: list[str] = field(default_factory=list)
    # The headers of the device-side (CUDA) parse beyond `headers`; None: the set has no device API.
    device_headers: list[str] | None = None
    # What the release offers (passes/capabilities.py), from the declarations above; set after extraction.
    capabilities: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {"functions": len(self.functions), "structs": len(self.records),
                "enums": len(self.enums), "typedefs": len(self.typedefs),
                "constants": len(self.constants), "initializers": len(self.initializers),
                "skipped": len(self.skipped)}
