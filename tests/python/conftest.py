"""Shared setup of the Python binding's tests.

ncclbind is imported from wherever it is installed (pip, Bazel's runfiles);
failing that, from bindings/python after an in-place build
(`/usr/bin/python3 setup.py build_ext --inplace`). Tests marked `gpu` are
skipped, with the reason, when no CUDA device is visible.
"""
from __future__ import annotations

import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

try:
    import ncclbind  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "bindings" / "python"))
    import ncclbind  # noqa: F401


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU and NCCL that can create a communicator")
    # A GPU run on another release than torch's (NCCLBIND_NCCL_PATH=...2.32.3) loads that libnccl now,
    # before a test module imports torch, which loads its own first (and ncclbind rightly refuses then).
    if "gpu" in (config.getoption("markexpr") or "") and os.environ.get("NCCLBIND_NCCL_PATH"):
        ncclbind.library_info("nccl")


def _gpu_count() -> int:
    from ncclbind.base.cuda import device_count
    return device_count()


def pytest_collection_modifyitems(config, items):
    if not any("gpu" in item.keywords for item in items):
        return
    count = _gpu_count()
    if count:
        return
    skip = pytest.mark.skip(reason="no CUDA device visible (cudaGetDeviceCount returned 0 or no driver)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def has_gpu() -> bool:
    return _gpu_count() > 0


@pytest.fixture(scope="session")
def ir():
    """The IR JSON of every header set: {set name: dict}."""
    import json
    directory = pathlib.Path(os.environ.get("NCCLBIND_IR_DIR", ROOT / "bindings" / "ir"))
    return {p.stem: json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))}


@pytest.fixture(scope="session")
def api():
    """The merged API of each library, as the renderers read it: {library: dict} from
    bindings/ir/api/<library>.json (versions, version_codes, and since/versions per item)."""
    import json
    directory = pathlib.Path(os.environ.get("NCCLBIND_IR_DIR", ROOT / "bindings" / "ir")) / "api"
    return {p.stem: json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))}
