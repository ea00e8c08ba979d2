"""A C++ exception thrown out of NCCL EP's C API (libnccl_ep 0.2.0 throws on host asserts and from
its destroy calls after a device fault) reaches Python as NcclForeignException naming the function,
the exception's type and its text, and the process goes on; without the runtime's guard it would
end in std::terminate.

Over two stand-ins, in a subprocess (the libraries are chosen once per process): a libnccl_ep whose
functions throw (tests/runtime/throwing_nccl_ep.cc; NCCLBIND_THROWING_NCCL_EP from Bazel, else built
here with the C++ compiler) and fake_nccl.c claiming the NCCL version NCCL EP depends on (the IR's).
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

from stand_ins import build_stand_in, given_or_built

ROOT = pathlib.Path(__file__).resolve().parents[2]

PROGRAM = """
    import json
    import ncclbind
    from ncclbind import _nccl, _nccl_ep
    seen = {"version": _nccl_ep.get_version()}
    for name, call in (("group_destroy", _nccl_ep.group_destroy), ("handle_destroy", _nccl_ep.handle_destroy)):
        try:
            call(16)
        except ncclbind.NcclForeignException as e:
            seen[name] = {"message": str(e), "function": e.function, "code": e.code, "name": e.name,
                          "runtime_code": _nccl.ERROR_FOREIGN_EXCEPTION}
    seen["version_after"] = _nccl_ep.get_version()
    print(json.dumps(seen))
"""


def throwing_stand_in(directory: pathlib.Path) -> str:
    return given_or_built("NCCLBIND_THROWING_NCCL_EP", directory / "libthrowing_nccl_ep.so",
                          ["-std=c++17", "-fvisibility=hidden", str(ROOT / "tests" / "runtime" / "throwing_nccl_ep.cc")],
                          cxx=True)


def test_nccl_eps_cpp_exceptions_are_raised_as_nccl_foreign_exception(tmp_path, api):
    ep_version_code = api["nccl_ep"]["version_codes"][api["nccl_ep"]["versions"][-1]]
    needed_nccl = api["nccl_ep"]["depends_on"].removeprefix("nccl-")
    libnccl = os.path.abspath(os.environ.get("NCCLBIND_FAKE_NCCL") or build_stand_in(tmp_path))
    env = dict(os.environ, NCCLBIND_NCCL_PATH=libnccl, NCCLBIND_NCCL_EP_PATH=throwing_stand_in(tmp_path),
               NCCLBIND_FAKE_NCCL_VERSION=str(api["nccl"]["version_codes"][needed_nccl]),
               THROWING_NCCL_EP_VERSION=str(ep_version_code), PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(PROGRAM)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-4000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["version"] == seen["version_after"] == ep_version_code
    group = seen["group_destroy"]
    assert group["message"] == ("ncclEpGroupDestroy threw a C++ exception (std::runtime_error): stand-in: CUDA "
                                "error: an illegal memory access was encountered")
    assert (group["function"], group["name"]) == ("ncclEpGroupDestroy", "NCCLBIND_ERROR_FOREIGN_EXCEPTION")
    assert group["code"] == group["runtime_code"]
    assert seen["handle_destroy"]["message"] == "ncclEpHandleDestroy threw a C++ exception (int)"
