"""Runs pytest on the test files or node ids (file.py::test_name) given: the main of the
py_test targets in BUILD. Under Bazel the cases' results go to XML_OUTPUT_FILE, so each
target's test.xml lists its cases by name."""
import os
import sys

import pytest


def in_this_directory(arg: str) -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    path, sep, case = arg.partition("::")
    return os.path.join(here, os.path.basename(path)) + sep + case if path.endswith(".py") else arg


if __name__ == "__main__":
    args = [in_this_directory(a) for a in sys.argv[1:]]
    if os.environ.get("XML_OUTPUT_FILE"):
        args += ["--junitxml", os.environ["XML_OUTPUT_FILE"], "-o", "junit_family=xunit2"]
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-rs"] + args))
