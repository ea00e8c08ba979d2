"""generator/header_sets.toml as the generator reads it: every source kind, and a
`directory` set (unreleased headers in a folder of include/ and lib/) resolved in place;
the schema (header_sets_broken/: one broken file per mistake, its first line the expected
message after the file name), and what `python -m generator` prints for a broken file or
a header clang cannot parse: the message, exit status 2, no traceback."""
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(os.path.abspath(__file__)).parent.parent.parent
sys.path.insert(0, str(REPO))

import pytest  # noqa: E402

from generator import header_sets  # noqa: E402
from generator.header_sets import HeaderSetsError, check_present, load_header_sets  # noqa: E402

BROKEN = Path(os.path.abspath(__file__)).parent / "header_sets_broken"
BROKEN_HEADER = Path(os.path.abspath(__file__)).parent / "headers" / "nccl_broken.h"

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


@pytest.mark.parametrize("case", sorted(p.name for p in BROKEN.glob("*.toml")))
def test_a_broken_file_is_refused_naming_the_line_and_the_mistake(case):
    path = BROKEN / case
    expected = path.read_bytes().split(b"\n")[0].decode().removeprefix("# expect: ")  # (one is not UTF-8)
    with pytest.raises(HeaderSetsError) as err:
        load_header_sets(path)
    assert str(err.value) == f"{path}{expected}"


def test_the_broken_corpus_is_there():
    assert len(list(BROKEN.glob("*.toml"))) >= 20


def test_every_schema_key_of_the_checked_in_file_is_known():
    text = (REPO / "generator" / "header_sets.toml").read_text()
    keys = {line.split("=")[0].strip() for line in text.splitlines()
            if "=" in line and not line.lstrip().startswith("#")}
    assert keys <= set(header_sets.SCHEMA) and {"name", "source", "default", "wheel"} <= keys


def generator_cli(*args, cwd=REPO):
    env = {k: v for k, v in os.environ.items() if k != "NCCLBIND_HEADER_ROOT"}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "generator", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_cli_stops_on_a_broken_file_with_status_2_and_no_traceback():
    path = BROKEN / "misspelled_default.toml"
    run = generator_cli("dump-ir", "--header-sets", str(path))
    assert run.returncode == 2, run.stderr
    assert run.stderr == f"error: {path}:9: header set 'nccl-9.9.9': unknown key 'defualt' (did you mean 'default'?)\n"


def test_the_cli_prints_clangs_diagnostics_for_a_header_that_does_not_parse(tmp_path):
    folder = tmp_path / "broken"
    (folder / "include").mkdir(parents=True)
    (folder / "lib").mkdir()
    (folder / "include" / "nccl.h").write_text(BROKEN_HEADER.read_text())
    toml = tmp_path / "header_sets.toml"
    toml.write_text(DIRECTORY_SET.format(path=folder).replace("nccl-9.9.9", "broken-9.9.9"))
    run = generator_cli("dump-ir", "--header-sets", str(toml), "--set", "broken-9.9.9")
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
    assert run.stderr.startswith("error: header set broken-9.9.9: clang could not parse nccl.h:\n")
    assert f"{folder / 'include' / 'nccl.h'}:2:39: error: expected ';' after top level declarator" in run.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
