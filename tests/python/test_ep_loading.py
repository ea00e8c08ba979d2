"""libnccl_ep over a libnccl older than the one its header set depends on: loading it fails
with one sentence first, naming libnccl_ep's version and file, the libnccl in use (version
and file) and the NCCL version needed (the IR's depends_on), then every place tried.

Each case runs in a subprocess (the libraries are chosen once per process), with the CUDA
driver stub (SONAME libcuda.so.1) loaded first, so that only libnccl can be wrong. The
libraries: the real libnccl_ep of the EP header set (NCCLBIND_NCCL_EP_LIB, else the one
tools/fetch_inputs.py unpacked), the oldest header set's real libnccl (the CUDA toolkit's),
the needed set's, and the stand-in fake_nccl.c claiming a version (NCCLBIND_FAKE_NCCL_VERSION).
"""
from __future__ import annotations

import ctypes
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from conftest import nccl_library_of
from stand_ins import build_stand_in

ROOT = pathlib.Path(__file__).resolve().parents[2]

PROBE = """
    import ctypes, json, os, sys
    ctypes.CDLL(os.environ["PROBE_CUDA_STUB"], mode=ctypes.RTLD_GLOBAL)
    import ncclbind
    from ncclbind import _nccl_ep
    from ncclbind.errors import NcclLibraryNotFoundError
    nccl, ep = ncclbind.library_info("nccl"), ncclbind.library_info("nccl_ep")
    raised = None
    try:
        _nccl_ep.get_version()
    except NcclLibraryNotFoundError as e:
        raised = str(e)
    print(json.dumps({"nccl_version": str(nccl.version), "nccl_path": str(nccl.path or ""), "ep_loaded": ep.loaded,
                      "ep_version": str(ep.version), "error": ep.error, "raised": raised}))
"""


def version_name(code: int) -> str:
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


@pytest.fixture(scope="module")
def ep_set(api):
    """(libnccl_ep's version, the NCCL version it needs, that version's code), from the IR."""
    ep = api["nccl_ep"]
    needed_set = ep["depends_on"]
    nccl = api["nccl"]
    needed = nccl["versions"][nccl["header_sets"].index(needed_set)]
    return ep["versions"][-1], needed, nccl["version_codes"][needed]


@pytest.fixture(scope="module")
def ep_library(api) -> pathlib.Path:
    listed = os.environ.get("NCCLBIND_NCCL_EP_LIB")
    path = pathlib.Path(listed) if listed else ROOT / ".cache/header_sets" / api["nccl_ep"]["header_sets"][-1] / "lib/libnccl_ep.so"
    assert path.is_file(), f"no libnccl_ep at {path}: tools/setup.sh fetches the pinned wheels"
    return path.resolve()


@pytest.fixture(scope="module")
def cuda_stub() -> pathlib.Path:
    listed = os.environ.get("NCCLBIND_CUDA_STUB")
    home = pathlib.Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda")
    path = pathlib.Path(listed) if listed else home / "lib64/stubs/libcuda.so"
    assert path.is_file(), f"no CUDA driver stub at {path} (the CUDA toolkit ships it)"
    return path


def probe(ep_library, cuda_stub, nccl_path, **env) -> dict:
    """nccl_path None: the libnccl the runtime finds (NCCLBIND_NCCL_PATH under Bazel: the oldest set's)."""
    env = dict(os.environ, NCCLBIND_NCCL_EP_PATH=str(ep_library), PROBE_CUDA_STUB=str(cuda_stub),
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **env)
    if nccl_path:
        env["NCCLBIND_NCCL_PATH"] = str(nccl_path)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE)], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def headline(ep_version, ep_library, needed, nccl_version, nccl_path) -> str:
    return (f"libnccl_ep {ep_version} at {ep_library} needs NCCL {needed} or newer, "
            f"but the libnccl in use is NCCL {nccl_version} ({nccl_path})")


def assert_explains_too_old(got, ep_set, ep_library, nccl_path, nccl_version):
    ep_version, needed, _ = ep_set
    assert not got["ep_loaded"]
    error = got["error"]
    assert error.startswith(headline(ep_version, ep_library, needed, nccl_version, nccl_path)), error
    assert f"Load a libnccl.so.2 of NCCL {needed} or newer first (set NCCLBIND_NCCL_PATH" in error
    assert "\nlibnccl_ep could not be loaded; tried, in order:\n" in error
    assert f"{ep_library} [NCCLBIND_NCCL_EP_PATH]: undefined symbol: " in error
    assert got["raised"] == error  # a raw call raises NcclLibraryNotFoundError with the same text
    lacks = error.split(", which lacks ", 1)[1].split(".", 1)[0]
    assert not hasattr(ctypes.CDLL(str(nccl_path)), lacks), f"{nccl_path} has {lacks}"


def test_real_libnccl_ep_on_the_oldest_real_libnccl(api, ep_set, ep_library, cuda_stub):
    oldest = api["nccl"]["versions"][0]
    path = nccl_library_of(api, oldest)
    assert path is not None, f"no libnccl of NCCL {oldest}: tools/setup.sh fetches the pinned wheels"
    got = probe(ep_library, cuda_stub, path)
    assert got["nccl_version"] == oldest, f"{got['nccl_path']} is NCCL {got['nccl_version']}, not {oldest}"
    assert api["nccl"]["version_codes"][oldest] < ep_set[2]
    assert_explains_too_old(got, ep_set, ep_library, got["nccl_path"], oldest)


def test_real_libnccl_ep_on_the_stand_in_claiming_an_older_version(api, ep_set, ep_library, cuda_stub, tmp_path):
    fake = pathlib.Path(os.environ.get("NCCLBIND_FAKE_NCCL") or build_stand_in(tmp_path)).resolve()
    older = api["nccl"]["version_codes"][api["nccl"]["versions"][0]]
    got = probe(ep_library, cuda_stub, fake, NCCLBIND_FAKE_NCCL_VERSION=str(older))
    assert got["nccl_version"] == version_name(older) and got["nccl_path"] == str(fake)
    assert_explains_too_old(got, ep_set, ep_library, fake, version_name(older))


def test_a_libnccl_of_the_needed_version_is_not_blamed(ep_set, ep_library, cuda_stub, tmp_path):
    """The stand-in claims the needed version but lacks what libnccl_ep links against: the
    load fails, the note names both versions, and nothing claims libnccl is too old."""
    _, needed, needed_code = ep_set
    fake = pathlib.Path(os.environ.get("NCCLBIND_FAKE_NCCL") or build_stand_in(tmp_path)).resolve()
    got = probe(ep_library, cuda_stub, fake, NCCLBIND_FAKE_NCCL_VERSION=str(needed_code))
    error = got["error"]
    assert not got["ep_loaded"] and error.startswith("libnccl_ep could not be loaded; tried, in order:\n"), error
    assert "but the libnccl in use is" not in error
    assert f"  (libnccl_ep needs libnccl.so.2 of NCCL {needed} or newer; the one in use is {needed} at {fake})" in error


def test_real_libnccl_ep_loads_on_the_libnccl_it_needs(api, ep_set, ep_library, cuda_stub):
    ep_version, needed, _ = ep_set
    library = nccl_library_of(api, needed)
    assert library, f"no libnccl of NCCL {needed} (tools/setup.sh fetches the pinned wheels)"
    got = probe(ep_library, cuda_stub, library)
    assert got["nccl_version"] == needed
    assert got["ep_loaded"] and got["ep_version"] == ep_version, got["error"]
