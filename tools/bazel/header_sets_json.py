"""Print generator/header_sets.toml as JSON for the @ncclbind_inputs repository rule.

Starlark cannot parse TOML, so tools/bazel/inputs.bzl runs this with /usr/bin/python3
(3.11, which has tomllib). Usage: header_sets_json.py <header_sets.toml>

Each set's table, checked by the generator's own reader, with what the generator resolves:
`headers` and `device_headers` (discovered from the set's include/ when the table names none),
and the set's `capabilities` as its IR records them (bindings/ir/<set>.json, written by
`python -m generator generate`): BUILD loops filter on those, never on version numbers.
"""
import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def cuda_variant(table: dict, include: Path) -> str | None:
    """The CUDA major release the set's library is built for, as "cu12"/"cu13": from the wheel's
    name (nvidia-nccl-cu12), or the toolkit's cuda.h (CUDA_VERSION 13000); None when unknown."""
    found = re.search(r"-cu(\d+)\b", table.get("wheel", ""))
    if found:
        return f"cu{found.group(1)}"
    cuda_h = include / "cuda.h"
    if table["source"] == "cuda_toolkit" and cuda_h.is_file():
        version = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", cuda_h.read_text(errors="replace"))
        if version:
            return f"cu{int(version.group(1)) // 1000}"
    return None


def main() -> None:
    sys.path.insert(0, str(REPO))
    from generator.header_sets import load_header_sets, read_header_set_tables

    toml = Path(sys.argv[1])
    tables = read_header_set_tables(toml)
    resolved = {hs.name: hs for hs in load_header_sets(toml)}
    for table in tables:
        hs = resolved[table["name"]]
        table["headers"] = list(hs.headers)
        table["device_headers"] = None if hs.device_headers is None else list(hs.device_headers)
        table["cuda_variant"] = cuda_variant(table, hs.include_root)
        # Starlark cannot expand $VARIABLES: a directory set's `path` is expanded here (an unset
        # variable is left as it is, and the rule then reports the folder as missing).
        if table.get("source") == "directory":
            table["path"] = os.path.expandvars(table["path"])
        ir = REPO / "bindings" / "ir" / f"{hs.name}.json"
        if not ir.is_file() and not hs.default:  # not bound: no IR, and nothing offered
            table["capabilities"], table["ir"] = [], None
            continue
        if not ir.is_file():
            sys.exit(f"header set {hs.name}: {ir} does not exist: run `bash tools/regenerate.sh` "
                     f"(README's first command) after adding a set")
        table["capabilities"] = json.loads(ir.read_text()).get("capabilities", [])
        table["ir"] = str(ir.relative_to(REPO))
    json.dump(tables, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
