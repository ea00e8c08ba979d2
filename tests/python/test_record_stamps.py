"""A versioned record the binding fills for NCCL (here ncclCommQueryProperties' properties, an
output record) carries the loaded release's version stamp, not the newest release of its layout:
NCCL refuses a stamp newer than itself ("This application was compiled with NCCL version 2.32.6,
but is running with NCCL library version 2.32.3", seen on an H100 with 2.32.3 when 2.32.6 joined
its layout). For every release of every layout of ncclCommProperties_t that more than one
release shares (read from the IR), the stand-in libnccl (fake_nccl.c built with -DFAKE_NCCL_RMA)
claims that release and accepts only its own stamp."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from stand_ins import HERE, build_shared

REPO = pathlib.Path(__file__).resolve().parents[2]
RECORD = "ncclCommProperties_t"


def _shared_layout_releases() -> list[tuple[str, int]]:
    """(release, version code) of each release in a layout of RECORD that several releases share."""
    api = json.loads((REPO / "bindings" / "ir" / "api" / "nccl.json").read_text())
    return [(v, api["version_codes"][v]) for variant in api["record_variants"][RECORD]
            if len(variant["versions"]) > 1 for v in variant["versions"]]


RELEASES = _shared_layout_releases()

PROBE = """
import ncclbind
from ncclbind import Communicator, UniqueId, _nccl
comm = Communicator.init(1, 0, UniqueId.generate())
try:
    props = _nccl.comm_query_properties(comm._handle)
    print("ok", props.nRanks)
except Exception as error:
    print(type(error).__name__, error)
finally:
    comm.destroy()
"""


def test_some_layout_is_shared_by_several_releases():
    assert RELEASES, f"no layout of {RECORD} in the IR is shared by two releases: this test holds nothing"


@pytest.mark.parametrize("release,code", RELEASES, ids=[r for r, _ in RELEASES])
def test_the_output_record_is_stamped_with_the_loaded_release(release, code, tmp_path):
    import ncclbind
    library = build_shared(tmp_path / "libnccl.so.2",
                           ["-O1", "-fvisibility=hidden", "-DFAKE_NCCL_RMA", str(HERE / "fake_nccl.c")])
    env = dict(os.environ, NCCLBIND_NCCL_PATH=library, NCCLBIND_FAKE_NCCL_ACTIVE="1",
               NCCLBIND_FAKE_NCCL_VERSION=str(code), CUDA_VISIBLE_DEVICES="", NCCLBIND_CUDA_BACKEND="helper",
               PYTHONPATH=str(pathlib.Path(os.path.abspath(ncclbind.__file__)).parent.parent))
    env.pop("NCCLBIND_NCCL_LIBS", None)
    run = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "ok 1", f"NCCL {release}: {run.stdout.strip()}"
