"""An API the loaded library lacks raises, naming the function, the version
that has it and the version loaded; versioned structs take the loaded
library's layout, stamped with the loaded library's version. Every fact about
versions comes from the merged IR (the `api` fixture). Other libraries are
loaded in a subprocess (the library choice is per process): the libnccl of every
release the IR lists (NCCLBIND_NCCL_LIBS, from BUILD; by hand, those
tools/fetch_inputs.py unpacked and the CUDA toolkit's), one case a release, a
release without its library here a skip naming its header set; and the stand-in
claiming versions no header set has."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import ncclbind._nccl as nccl
from ncclbind.errors import NcclSymbolNotFoundError
from conftest import nccl_library_of
from stand_ins import build_stand_in

ROOT = pathlib.Path(__file__).resolve().parents[2]


def nccl_releases():
    """(version, header set) of every NCCL release the merged IR lists, oldest first: the
    parameters of the per-release cases, read before the `api` fixture exists."""
    directory = pathlib.Path(os.environ.get("NCCLBIND_IR_DIR", ROOT / "bindings" / "ir")) / "api"
    nccl_api = json.loads((directory / "nccl.json").read_text())
    return list(zip(nccl_api["versions"], nccl_api["header_sets"]))


RELEASES = nccl_releases()


def version_name(code):
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def test_a_function_newer_than_the_loaded_library(api):
    grow = next(f for f in api["nccl"]["functions"] if f["name"] == "ncclCommGrow")
    since_code = api["nccl"]["version_codes"][grow["since"]]
    loaded = nccl.get_version()
    if loaded >= since_code:
        pytest.skip(f"the loaded libnccl has ncclCommGrow (since {grow['since']})")
    with pytest.raises(NcclSymbolNotFoundError) as info:
        nccl.comm_grow(0, 1, bytes(128), 0, None)
    message = str(info.value)
    assert "ncclCommGrow" in message and grow["since"] in message and version_name(loaded) in message
    assert info.value.function == "ncclCommGrow"


def test_the_since_table_names_the_first_version(api):
    codes = api["nccl"]["version_codes"]
    checked = 0
    for f in api["nccl"]["functions"]:
        if f["name"] in nccl.since:
            assert nccl.since[f["name"]] == (f["since"], codes[f["since"]]), f["name"]
            checked += 1
    assert checked > 50


def run_with_library(path, code, **env):
    env = dict(os.environ, NCCLBIND_NCCL_PATH=str(path), PYTHONPATH=os.pathsep.join(sys.path), **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=120)


# In the subprocess: each initializer's record as the loaded library gets it.
INITIALIZED = """
    import json
    import ncclbind._nccl as nccl
    records = {}
    for name in dir(nccl):
        if name.endswith("_initializer"):
            r = getattr(nccl, name)()
            layout = next(l for l in type(r).layouts if l["version"] == r.layout_version)
            stamp = r.version if "version" in layout["fields"] else None
            records[type(r).__name__] = (r.layout_version, r.nbytes, stamp)
    print(json.dumps({"loaded": nccl.get_version(), "records": records}))
"""


def expected_records(api, loaded):
    """{record: (layout version, size, stamp)} for a library of version code `loaded`: the
    newest layout whose first version is not newer (the oldest if none), stamped with the
    newest of that layout's header sets not newer than `loaded` (the oldest if none)."""
    codes = api["nccl"]["version_codes"]
    expected = {}
    for init in api["nccl"]["initializers"]:
        variants = api["nccl"]["record_variants"][init["record"]]
        chosen = variants[0]
        for variant in variants:
            if variant["version_code"] <= loaded:
                chosen = variant
        layout_codes = [codes[v] for v in chosen["versions"]]
        stamp = ([c for c in layout_codes if c <= loaded] or layout_codes[:1])[-1]
        has_initializer = any(i["record"] == init["record"] and set(i["versions"]) & set(chosen["versions"])
                              for i in api["nccl"]["initializers"])
        has_version = any(f["name"] == "version" for f in chosen["record"]["fields"])
        # a layout older than its initializer macro is zeroed
        expected[init["record"]] = (chosen["versions"][0], chosen["record"]["size"],
                                    (stamp if has_initializer else 0) if has_version else None)
    return expected


def assert_records_follow(api, result, loaded):
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout.splitlines()[-1])
    assert got["loaded"] == loaded
    assert {k: tuple(v) for k, v in got["records"].items()} == expected_records(api, loaded)


def test_every_libnccl_at_hand_is_a_release_the_cases_check():
    """Each libnccl BUILD hands the tests (NCCLBIND_NCCL_LIBS; by hand, those
    tools/fetch_inputs.py unpacked) is the header set's of exactly one release of the IR:
    none goes unchecked by the per-release cases."""
    names = [name for _, name in RELEASES]
    assert names, "the merged IR lists no NCCL release"
    at_hand = os.environ.get("NCCLBIND_NCCL_LIBS", "").split() or \
        [str(p) for p in ROOT.glob(".cache/header_sets/*/lib/libnccl.so.2")]
    for path in at_hand:
        owners = [name for name in names if f"/{name}/" in path]
        assert len(owners) == 1, f"{path} is the libnccl of {owners or 'no release'} of the IR ({names})"


@pytest.mark.parametrize("version, header_set", RELEASES, ids=[name for _, name in RELEASES])
def test_each_releases_library_gets_its_layouts_stamped_with_its_version(api, version, header_set):
    library = nccl_library_of(api, version)
    if library is None:
        pytest.skip(f"{header_set}: no libnccl of NCCL {version} here (NCCLBIND_NCCL_LIBS, "
                    f".cache/header_sets/{header_set}/lib or the CUDA toolkit's): run tools/setup.sh")
    result = run_with_library(library, INITIALIZED)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.splitlines()[-1])["loaded"]
    assert loaded == api["nccl"]["version_codes"][version], f"{library} is not {header_set}'s"
    assert_records_follow(api, result, loaded)


def test_a_version_between_or_beyond_the_header_sets_takes_the_newest_stamp_not_newer(api, tmp_path):
    """Over the stand-in, claiming versions no header set has: a layout shared by several
    header sets (ncclSimInfo_t has one layout for all) is stamped with the newest of them
    that is not newer than the library."""
    library = os.path.abspath(os.environ.get("NCCLBIND_FAKE_NCCL") or build_stand_in(tmp_path))
    codes = sorted(api["nccl"]["version_codes"].values())
    claims = [codes[0]] + [c + 1 for c in codes] + [codes[-1] + 10000]
    for claimed in claims:
        result = run_with_library(library, INITIALIZED, NCCLBIND_FAKE_NCCL_VERSION=str(claimed))
        assert_records_follow(api, result, claimed)


def test_both_ends_of_a_functions_releases_gate_it(api, monkeypatch):
    """A function a newer release dropped from the headers carries `until` (the first release
    without it) in the extension's table, and the idiomatic layer's check gates on both ends."""
    from ncclbind.core import communicator
    codes = api["nccl"]["version_codes"]
    removed = {f["name"]: (f["until"], codes[f["until"]]) for f in api["nccl"]["functions"] if f.get("until")}
    assert nccl.until == removed
    kept = {f["name"] for f in api["nccl"]["functions"] if not f.get("until")}
    assert not kept & set(nccl.until)
    has = communicator.Communicator._has
    for name, (until, until_code) in removed.items():
        since_code = nccl.since[name][1]
        monkeypatch.setattr(communicator, "loaded_version_code", lambda: since_code)
        assert has(None, name), f"{name} on {version_name(since_code)}"
        monkeypatch.setattr(communicator, "loaded_version_code", lambda: until_code)
        assert not has(None, name), f"{name} on {until}, which removed it"
        monkeypatch.setattr(communicator, "loaded_version_code", lambda: since_code - 1)
        assert not has(None, name)
