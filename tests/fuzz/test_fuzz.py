"""Fuzzing in CI: every fuzz class (driver.py) over the stand-in libraries, seeded and bounded,
must end clean: every bad input refused by name before NCCL is called, every valid one taken;
no raw exception, silent accept, crash or hang. The counts here are CI's; bench/fuzz_table.py
runs the same classes with larger counts, against another checkout too (the before/after
table).

    /usr/bin/python3 -m pytest tests/fuzz          # builds the stand-ins with cc
"""
from __future__ import annotations

import os
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import driver  # noqa: E402

SEED = 24
# cases per class: a few seconds each (the command-line classes start a process per case)
CI_COUNTS = {"calls": 1500, "prepare": 1500, "vcollectives": 1000, "config": 1000, "watchdog": 500,
             "misc": 1500, "ep": 1000, "threads": 60, "bench_flags": 30, "trace_input": 30, "header_sets": 60,
             "headers": 12}


def package_root() -> pathlib.Path:
    """This checkout: its generator and inputs, and the ncclbind this process imports (under Bazel
    the runfiles' copy, with the extension Bazel built: driver.package_path)."""
    return driver.ROOT


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    return driver.build_stand_ins(tmp_path_factory.mktemp("stand-ins"))


def test_every_class_is_run():
    assert set(CI_COUNTS) == set(driver.python_classes()) | set(driver.command_classes())


@pytest.mark.parametrize("name", sorted(CI_COUNTS))
def test_a_fuzz_class_ends_clean(name, libraries):
    tally = driver.run_class(name, CI_COUNTS[name], SEED, package_root(), libraries)
    print(f"{name}: {tally.tried} cases, {dict(tally.counts)}, {tally.seconds:.1f} s")
    assert tally.tried == CI_COUNTS[name]
    assert tally.counts["clean"] == tally.tried, "\n".join(tally.failures())


def test_the_driver_sorts_every_outcome(libraries, monkeypatch):
    """The self-test class (python_cases.SELF_TEST): a bad call accepted, a raw exception, a valid
    call refused, a crash and a hang are each counted as such, and the run goes on after them."""
    monkeypatch.setenv("NCCLBIND_FUZZ_SELF_TEST", "1")
    monkeypatch.setattr(driver, "CASE_TIMEOUT_S", 3)
    tally = driver.run_class("self_test", 7, SEED, package_root(), libraries)
    assert dict(tally.counts) == {"clean": 2, "silent": 1, "raw": 1, "refused": 1, "crash": 1, "hang": 1}, \
        tally.failures()


if __name__ == "__main__":  # Bazel's main: the cases in XML_OUTPUT_FILE, this shard's share of them
    from pytest_main import Shard
    args, plugins = [__file__], []
    if os.environ.get("TEST_TOTAL_SHARDS"):
        if os.environ.get("TEST_SHARD_STATUS_FILE"):
            open(os.environ["TEST_SHARD_STATUS_FILE"], "w").close()
        plugins.append(Shard(int(os.environ["TEST_SHARD_INDEX"]), int(os.environ["TEST_TOTAL_SHARDS"])))
    if os.environ.get("XML_OUTPUT_FILE"):
        args += ["--junitxml", os.environ["XML_OUTPUT_FILE"], "-o", "junit_family=xunit2"]
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-rs", *args], plugins=plugins))
