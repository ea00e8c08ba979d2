"""ncclbind.device.cuda_source on the CPU: which headers a kernel is compiled against. The loaded
libnccl is the stand-in (fake_nccl.c) placed as an unpacked release would be (<release>/lib/
libnccl.so.2 beside <release>/include, the pinned header set's real headers) and claiming that
header set's version; NCCLBIND_NCCL_INCLUDE is unset, so the include/ beside the library is the
answer, and a library of another version is told that it has none, naming every place tried."""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from stand_ins import build_stand_in

REPO = pathlib.Path(__file__).resolve().parents[2]
HEADER_SETS = REPO / ".cache" / "header_sets"


def _newest_nccl_set() -> tuple[pathlib.Path, int, int]:
    """(its include/, its NCCL_VERSION_CODE, an older set's code) of the newest pinned header set."""
    sets = []
    for include in HEADER_SETS.glob("nccl-[0-9]*/include"):
        m = re.search(r"^#define NCCL_VERSION_CODE (\d+)", (include / "nccl.h").read_text(), re.M)
        if m and (include / "nccl_device.h").is_file():
            sets.append((int(m.group(1)), include))
    if len(sets) < 2:
        pytest.skip("the pinned NCCL header sets are not unpacked (tools/setup.sh fills .cache/header_sets)")
    sets.sort()
    return sets[-1][1], sets[-1][0], sets[0][0]


def _release(tmp_path: pathlib.Path) -> tuple[pathlib.Path, int, int]:
    """An unpacked release: tmp/release/lib/libnccl.so.2 (the stand-in) and tmp/release/include."""
    include, code, older = _newest_nccl_set()
    lib = tmp_path / "release" / "lib"
    lib.mkdir(parents=True)
    stand_in = os.environ.get("NCCLBIND_FAKE_NCCL") or build_stand_in(tmp_path)
    shutil.copy(stand_in, lib / "libnccl.so.2")
    (tmp_path / "release" / "include").symlink_to(include)
    return tmp_path / "release", code, older


def _include_dir(release: pathlib.Path, claimed: int, tmp_path: pathlib.Path, library: pathlib.Path | None = None):
    import ncclbind
    env = {k: v for k, v in os.environ.items() if k not in ("NCCLBIND_NCCL_INCLUDE", "NCCLBIND_NCCL_LIBS")}
    env.update(NCCLBIND_NCCL_PATH=str(library or release / "lib" / "libnccl.so.2"),
               NCCLBIND_FAKE_NCCL_VERSION=str(claimed), CUDA_VISIBLE_DEVICES="",
               CUDA_HOME=str(tmp_path / "no-cuda"),  # no toolkit headers to fall back on
               PYTHONPATH=str(pathlib.Path(os.path.abspath(ncclbind.__file__)).parent.parent))
    probe = ("from ncclbind.device import cuda_source\n"
             "try:\n    print(cuda_source.nccl_include_dir())\n"
             "except Exception as e:\n    print(f'{type(e).__name__}: {e}')\n")
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_headers_beside_the_loaded_library_are_found(tmp_path):
    release, code, _ = _release(tmp_path)
    assert _include_dir(release, code, tmp_path) == str(release / "include")


def test_a_library_reached_through_a_link_finds_its_release_headers(tmp_path):
    release, code, _ = _release(tmp_path)
    elsewhere = tmp_path / "links"
    elsewhere.mkdir()
    (elsewhere / "libnccl.so.2").symlink_to(release / "lib" / "libnccl.so.2")
    assert _include_dir(release, code, tmp_path, elsewhere / "libnccl.so.2") == str(release / "include")


def test_headers_of_another_version_beside_the_library_are_refused(tmp_path):
    release, code, older = _release(tmp_path)
    text = _include_dir(release, older, tmp_path)
    assert text.startswith(f"NcclInvalid: no NCCL {older} device headers"), text
    assert f"beside the loaded libnccl ({release / 'include'}): NCCL {code}" in text
    assert "NCCLBIND_NCCL_INCLUDE" in text
