"""Print generator/header_sets.toml as JSON for the @ncclbind_inputs repository rule.

Starlark cannot parse TOML, so tools/bazel/inputs.bzl runs this with /usr/bin/python3
(3.11, which has tomllib). Usage: header_sets_json.py <header_sets.toml>
"""
import json
import os
import sys
import tomllib


def main() -> None:
    with open(sys.argv[1], "rb") as f:
        sets = tomllib.load(f).get("header_set", [])
    # Starlark cannot expand $VARIABLES: a directory set's `path` is expanded here (an unset
    # variable is left as it is, and the rule then reports the folder as missing).
    for hs in sets:
        if hs.get("source") == "directory":
            hs["path"] = os.path.expandvars(hs["path"])
    json.dump(sets, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
