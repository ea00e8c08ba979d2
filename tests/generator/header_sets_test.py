"""generator/header_sets.toml as the generator reads it: every source kind, and a
`directory` set (unreleased headers in a folder of include/ and lib/) resolved in place."""
import os
import sys
from pathlib import Path

REPO = Path(os.path.abspath(__file__)).parent.parent.parent
sys.path.insert(0, str(REPO))

import pytest  # noqa: E402

from generator import header_sets  # noqa: E402
from generator.header_sets import check_present, load_header_sets  # noqa: E402

DIRECTORY_SET = """
[[header_set]]
name = "nccl-9.9.9"
library = "nccl"
version = "9.9.9"
source = "directory"
path = "{path}"
headers = ["nccl.h"]
soname = "libnccl.so.2"
"""


@pytest.fixture(autouse=True)
def no_header_root(monkeypatch):
    monkeypatch.setattr(header_sets, "HEADER_ROOT", None)


def write_set(tmp_path, path: str) -> Path:
    toml = tmp_path / "header_sets.toml"
    toml.write_text(DIRECTORY_SET.format(path=path))
    return toml


def unreleased_nccl(tmp_path) -> Path:
    """A copy of an NCCL header set's layout: include/nccl.h and lib/libnccl.so.2."""
    folder = tmp_path / "nccl-build"
    (folder / "include").mkdir(parents=True)
    (folder / "lib").mkdir()
    (folder / "include" / "nccl.h").write_text("#define NCCL_VERSION_CODE 90909\n")
    (folder / "lib" / "libnccl.so.2").write_bytes(b"")
    return folder


def test_a_directory_set_is_read_in_place_from_a_variable(tmp_path, monkeypatch):
    folder = unreleased_nccl(tmp_path)
    monkeypatch.setenv("NCCLBIND_TEST_NCCL_HOME", str(folder))
    [hs] = load_header_sets(write_set(tmp_path, "$NCCLBIND_TEST_NCCL_HOME"))
    assert (hs.include_root, hs.lib_dir) == (folder / "include", folder / "lib")
    assert hs.source == f"directory {folder}" and hs.version_code == 90909 and not hs.default
    check_present(hs)


def test_a_relative_directory_is_from_the_repository_root(tmp_path):
    [hs] = load_header_sets(write_set(tmp_path, "some/nccl"))
    assert hs.include_root == REPO / "some" / "nccl" / "include"


def test_an_unset_variable_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.delenv("NCCLBIND_TEST_UNSET", raising=False)
    with pytest.raises(SystemExit, match="NCCLBIND_TEST_UNSET"):
        load_header_sets(write_set(tmp_path, "$NCCLBIND_TEST_UNSET/nccl"))


def test_the_checked_in_sets_are_oldest_first_per_library():
    from generator.passes.merge import version_key
    sets = load_header_sets()
    for library in {hs.library for hs in sets}:
        versions = [hs.version for hs in sets if hs.library == library]
        assert versions == sorted(versions, key=version_key), library


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
