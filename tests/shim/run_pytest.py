"""The main of //tests/shim's py_test: pytest on test_shim.py beside it, its cases in
XML_OUTPUT_FILE under Bazel."""
import os
import sys

import pytest

if __name__ == "__main__":
    args = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_shim.py")] + sys.argv[1:]
    if os.environ.get("XML_OUTPUT_FILE"):
        args += ["--junitxml", os.environ["XML_OUTPUT_FILE"], "-o", "junit_family=xunit2"]
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-rs"] + args))
