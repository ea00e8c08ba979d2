"""Every function the IR binds for a header set is exported by that set's real
library, and every exported nccl* function that the headers declare is bound
(or reported in the skipped-items list): nothing is lost between header and
library."""
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(os.path.abspath(__file__)).parent.parent.parent
# Declared in the headers but exported by no library that declares it (NCCL 2.31.2 and 2.32.3 so
# far): a call gets the runtime's "not in the loaded libnccl" error. Checked both ways for every
# set that declares it, so a fixed library fails this test until the entry goes; keyed by
# function, so a new release (or a directory of unreleased headers) needs no entry here.
DECLARED_NOT_EXPORTED = {"ncclCftBarrierCreateRequirement"}


def exported(lib: Path) -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], check=True, capture_output=True,
                         text=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.split()[1] in ("T", "W", "i")}


def main() -> int:
    inputs = json.loads(Path(sys.argv[1]).read_text())
    root = Path(sys.argv[1]).parent
    failures = 0
    for hs in inputs["header_sets"]:
        if not hs["has_library"]:  # a directory set of headers without a build
            print(f"{hs['name']}: headers only, no library to check")
            continue
        ir = json.loads((REPO / "bindings" / "ir" / f"{hs['name']}.json").read_text())
        symbols = exported(root / hs["lib"])
        bound = {f["name"] for f in ir["functions"]}
        aliases = {f["profiling_alias"] for f in ir["functions"] if f.get("profiling_alias")}
        skipped = {s["name"] for s in ir["skipped"]}
        known = DECLARED_NOT_EXPORTED & bound
        missing = sorted((bound - symbols) ^ known)
        for name in missing:
            print(f"FAIL {hs['name']}: {name} is bound but {hs['lib']} does not export it"
                  if name not in known else f"FAIL {hs['name']}: {name} is now exported: drop it from "
                  "DECLARED_NOT_EXPORTED")
        prefix = "ncclEp" if hs["library"] == "nccl_ep" else "nccl"
        unbound = sorted(s for s in symbols if s.startswith(prefix) and s not in bound | aliases | skipped
                         and s in declared_names(ir))
        for name in unbound:
            print(f"FAIL {hs['name']}: {name} is exported and declared but neither bound nor skipped")
        failures += len(missing) + len(unbound)
        print(f"{hs['name']}: {len(bound)} bound functions; declared but not exported: "
              f"{', '.join(sorted(known)) or 'none'}")
    return 1 if failures else 0


def declared_names(ir) -> set[str]:
    return {f["name"] for f in ir["functions"]} | {s["name"] for s in ir["skipped"]}


if __name__ == "__main__":
    sys.exit(main())
