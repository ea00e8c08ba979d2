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


def nccl_library_of(api: dict, version: str) -> pathlib.Path | None:
    """The real libnccl of the header set of NCCL `version`: from NCCLBIND_NCCL_LIBS (BUILD),
    else the one tools/fetch_inputs.py unpacked (or the CUDA toolkit's, for its set)."""
    name = api["nccl"]["header_sets"][api["nccl"]["versions"].index(version)]
    listed = [pathlib.Path(p) for p in os.environ.get("NCCLBIND_NCCL_LIBS", "").split()]
    home = pathlib.Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda")
    candidates = [p for p in listed if f"/{name}/" in str(p)] + [ROOT / ".cache/header_sets" / name / "lib/libnccl.so.2"]
    if not (ROOT / ".cache/header_sets" / name).is_dir():  # the CUDA toolkit's set
        candidates += [home / "lib64/libnccl.so.2", home / "lib/libnccl.so.2"]
    return next((p.resolve() for p in candidates if p.is_file()), None)


@pytest.fixture
def on_release_with(request, api):
    """For a test of something the loaded libnccl may lack (a struct field, a function): call
    on_release_with(struct=..., fields=[...]) or on_release_with(function=...) first. When the
    loaded release has it, it returns False and the test goes on here. Otherwise it runs this
    same test in a subprocess on the oldest release that has it (read from the IR), asserts that
    it passed there, and returns True: the test then returns. Nothing is skipped either way."""
    def run(struct: str | None = None, fields=(), function: str | None = None) -> bool:
        import subprocess
        import ncclbind._nccl as nccl
        nccl_api = api["nccl"]
        codes = nccl_api["version_codes"]
        if struct is not None:
            variants = nccl_api["record_variants"][struct]
            having = [v for var in variants for v in var["versions"]
                      if set(fields) <= {f["name"] for f in var["record"]["fields"]}]
        else:
            having = next(fn["versions"] for fn in nccl_api["functions"] if fn["name"] == function)
        assert having, f"no release in the IR has {struct or function} {list(fields)}"
        loaded = nccl.get_version()
        loaded_version = next((v for v, c in codes.items() if c == loaded), None)
        if loaded_version in having:
            return False
        assert not os.environ.get("NCCLBIND_RERUN"), f"re-run on a release without {struct or function}"
        target = min(having, key=lambda v: codes[v])
        library = nccl_library_of(api, target)
        assert library is not None, f"no libnccl of NCCL {target} here: run tools/setup.sh"
        env = dict(os.environ, NCCLBIND_NCCL_PATH=str(library), NCCLBIND_RERUN="1",
                   PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                 f"{request.node.path}::{request.node.name}"],
                                env=env, capture_output=True, text=True, timeout=300, cwd=str(HERE))
        import re
        assert result.returncode == 0 and re.search(r"^1 passed", result.stdout, re.M), \
            f"on NCCL {target} ({library}):\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}"
        return True
    return run


def c_param(function: str, index: int, library: str = "nccl") -> str:
    """The name of parameter `index` of C function `function` in the newest header set, from
    the merged IR: tests that name a raw call's argument read it here, never spell it."""
    import json
    path = pathlib.Path(os.environ.get("NCCLBIND_IR_DIR", ROOT / "bindings" / "ir")) / "api" / f"{library}.json"
    fn = next(f for f in json.loads(path.read_text())["functions"] if f["name"] == function)
    return fn["params"][index]["name"]
