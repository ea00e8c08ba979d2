"""The device API's C-ABI wrapper per NCCL release, as data: the package file
ncclbind/device/_generated/wrapper.json (generator/render/device_wrapper.py) and the wrappers'
CUDA sources, the generated bindings/device_wrapper/nccl_device_wrapper-<set>.cu, read when first asked
for: from the package (setup.py ships them in ncclbind/device/_generated/wrapper/), else from the
checkout beside it.

FUNCTIONS: name -> {"declaration": its C declaration (the newest header's), "since": the release
whose headers first declare it, "symbol": the symbol the wrapper defines (the name, or for a
function NCCL's headers define inline, the prefixed one)}.
HEADER_SETS: NCCL version -> {"version_code", "missing": {function: first release or None},
"dropped": {function: the last release with it, for a missing one only older releases have},
"source": the wrapper's .cu text}."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

__all__ = ["FUNCTIONS", "HEADER_SETS", "source_file"]

_GENERATED = Path(__file__).parent / "_generated"
# The places a wrapper's .cu may be: an installed package's, then a checkout's (Bazel's runfiles too).
_SOURCE_DIRS = (_GENERATED / "wrapper", Path(__file__).parent.parent.parent.parent / "device_wrapper")


@functools.lru_cache(maxsize=None)
def _table() -> dict[str, Any]:
    return json.loads((_GENERATED / "wrapper.json").read_text())


def source_file(name: str) -> Path:
    """The wrapper source of that file name, where the package or the checkout keeps it."""
    for folder in _SOURCE_DIRS:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"{name}: not in {' or '.join(str(d) for d in _SOURCE_DIRS)} (the package was "
                            "installed without its device wrappers, or bindings/device_wrapper/ is not generated)")


class _Release(dict):
    """One release's row; its "source" (the .cu text) is read on first use."""

    def __missing__(self, key):
        if key != "source":
            raise KeyError(key)
        text = source_file(self["source_file"]).read_text()
        self["source"] = text
        return text


class _HeaderSets(dict):
    def __init__(self):
        super().__init__((version, _Release(version_code=row["version_code"], missing=row["missing"],
                                            dropped=row.get("dropped", {}), source_file=row["source"]))
                         for version, row in _table()["header_sets"].items())


def __getattr__(name: str) -> Any:  # FUNCTIONS and HEADER_SETS, loaded on first use
    if name == "FUNCTIONS":
        value: Any = _table()["functions"]
    elif name == "HEADER_SETS":
        value = _HeaderSets()
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
