"""Print generator/header_sets.toml as JSON for the @ncclbind_inputs repository rule.

Starlark cannot parse TOML, so tools/bazel/inputs.bzl runs this with /usr/bin/python3
(3.11, which has tomllib). Usage: header_sets_json.py <header_sets.toml>
"""
import json
import sys
import tomllib


def main() -> None:
    with open(sys.argv[1], "rb") as f:
        sets = tomllib.load(f).get("header_set", [])
    json.dump(sets, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
