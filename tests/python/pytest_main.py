"""Runs pytest on the test files or node ids (file.py::test_name) given: the main of the
py_test targets in BUILD. Under Bazel the cases' results go to XML_OUTPUT_FILE, so each
target's test.xml lists its cases by name, and a target with shard_count runs every
TEST_TOTAL_SHARDS-th case from TEST_SHARD_INDEX (Bazel's test sharding protocol)."""
import os
import sys

import pytest


def in_this_directory(arg: str) -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    path, sep, case = arg.partition("::")
    return os.path.join(here, os.path.basename(path)) + sep + case if path.endswith(".py") else arg


class Shard:
    """Keeps this shard's cases: the collected cases in order, every total-th from index."""

    def __init__(self, index: int, total: int):
        self.index, self.total = index, total

    def pytest_collection_modifyitems(self, config, items):
        mine = [item for i, item in enumerate(items) if i % self.total == self.index]
        config.hook.pytest_deselected(items=[item for item in items if item not in mine])
        items[:] = mine


if __name__ == "__main__":
    args = [in_this_directory(a) for a in sys.argv[1:]]
    plugins = []
    if os.environ.get("TEST_TOTAL_SHARDS"):
        if os.environ.get("TEST_SHARD_STATUS_FILE"):
            open(os.environ["TEST_SHARD_STATUS_FILE"], "w").close()  # this runner shards
        plugins.append(Shard(int(os.environ["TEST_SHARD_INDEX"]), int(os.environ["TEST_TOTAL_SHARDS"])))
    if os.environ.get("XML_OUTPUT_FILE"):
        args += ["--junitxml", os.environ["XML_OUTPUT_FILE"], "-o", "junit_family=xunit2"]
    code = pytest.main(["-q", "-p", "no:cacheprovider", "-rs"] + args, plugins=plugins)
    # a shard that drew no case (fewer cases than shards) has nothing to fail
    sys.exit(0 if plugins and code == pytest.ExitCode.NO_TESTS_COLLECTED else code)
