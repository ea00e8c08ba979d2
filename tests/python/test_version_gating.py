"""An API the loaded library lacks raises, naming the function, the version
that has it and the version loaded; versioned structs take the loaded
library's layout, stamped with the loaded library's version. Every fact about
versions comes from the merged IR (the `api` fixture). Other libraries are
loaded in a subprocess (the library choice is per process): every header set's
libnccl (NCCLBIND_NCCL_LIBS, from BUILD; by hand, those tools/fetch_inputs.py
unpacked), and the stand-in claiming versions no header set has."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import ncclbind._nccl as nccl
from ncclbind.errors import NcclSymbolNotFoundError
from stand_ins import build_stand_in

ROOT = pathlib.Path(__file__).resolve().parents[2]


def nccl_libraries():
    listed = os.environ.get("NCCLBIND_NCCL_LIBS")
    if listed:
        return [pathlib.Path(p).absolute() for p in listed.split()]
    by_hand = sorted(ROOT.glob(".cache/header_sets/nccl-*/lib/libnccl.so.2"))
    loaded = os.environ.get("NCCLBIND_NCCL_PATH")  # e.g. the CUDA toolkit's
    return ([pathlib.Path(loaded).absolute()] if loaded else []) + by_hand


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


@pytest.mark.parametrize("index", range(8))
def test_each_header_sets_library_gets_its_layouts_stamped_with_its_version(api, index):
    libraries = nccl_libraries()
    if index >= len(libraries):
        pytest.skip(f"{len(libraries)} libnccl here")
    result = run_with_library(libraries[index], INITIALIZED)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.splitlines()[-1])["loaded"]
    assert loaded in api["nccl"]["version_codes"].values(), f"{libraries[index]} is no header set's"
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
