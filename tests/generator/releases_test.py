"""What each release offers, from two small header sets written here: the merged IR's since and
until (a function, an enum value, a struct field and a constant a newer release dropped), the
capabilities read from what the headers declare, the headers a set without a `headers` line
takes from its include/, the message for a header the release does not ship, and a function in
neither the policy nor the coverage file (raw only, not a stop)."""
import os
import sys
from pathlib import Path

HERE = Path(os.path.abspath(__file__)).parent
sys.path.insert(0, str(HERE.parent.parent))

import pytest  # noqa: E402

from generator.policy.conventions import load_conventions  # noqa: E402
from generator.header_sets import HeaderSet, check_present, discover_headers  # noqa: E402
from generator.passes.capabilities import CAPABILITIES, capabilities_of  # noqa: E402
from generator.passes.extract import extract_header_set  # noqa: E402
from generator.passes.merge import merge_library  # noqa: E402

OLD = """
#define NCCL_OLD_LIMIT 4
#define NCCL_KEPT 1
typedef enum { ncclOk = 0, ncclSlow = 1, ncclGone = 2 } ncclState_t;
typedef struct { int size; int legacy; int kept; } ncclKnobs_t;
int ncclKept(int x);
int ncclRetired(int x);
"""
NEW = """
#define NCCL_KEPT 1
typedef enum { ncclOk = 0, ncclSlow = 1 } ncclState_t;
typedef struct { int size; int kept; int fresh; } ncclKnobs_t;
int ncclKept(int x);
int ncclFresh(int x);
"""
NEWEST = NEW + "int ncclCommWindowRegister(void *comm, void *buff, unsigned long size, void **win, int flags);\n"


C_LINKAGE = '#ifdef __cplusplus\nextern "C" {\n#endif\n%s#ifdef __cplusplus\n}\n#endif\n'


def header_set(tmp_path, version, text, device=False):
    include = tmp_path / version / "include"
    include.mkdir(parents=True)
    (include / "nccl.h").write_text(C_LINKAGE % text)
    if device:
        (include / "nccl_device.h").write_text("/* a device API */\n")
    headers, device_headers = discover_headers("nccl", include)
    return HeaderSet(f"nccl-{version}", "nccl", version, headers, include, include, "libnccl.so.2", None, True,
                     "directory", device_headers)


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("releases")
    sets = [header_set(tmp, "2.1.0", OLD), header_set(tmp, "2.2.0", NEW), header_set(tmp, "2.3.0", NEWEST)]
    irs = [extract_header_set(hs, {hs.name: hs}, load_conventions()) for hs in sets]
    for ir in irs:  # as the pipeline does after extraction
        ir.capabilities = capabilities_of(ir)
    return merge_library(irs), irs


def named(items, name):
    return next(i for i in items if i.name == name)


def test_items_a_newer_release_dropped_carry_the_release_that_removed_them(merged):
    api, _ = merged
    assert (named(api.functions, "ncclRetired").since, named(api.functions, "ncclRetired").until) == ("2.1.0", "2.2.0")
    assert named(api.functions, "ncclKept").until is None
    assert (named(api.functions, "ncclFresh").since, named(api.functions, "ncclFresh").until) == ("2.2.0", None)
    assert named(api.constants, "NCCL_OLD_LIMIT").until == "2.2.0" and named(api.constants, "NCCL_KEPT").until is None
    state = named(api.enums, "ncclState_t")
    assert named(state.values, "ncclGone").until == "2.2.0"  # kept in the merged enum: an old library returns it
    assert named(state.values, "ncclSlow").until is None
    oldest = api.record_variants["ncclKnobs_t"][0].record
    assert named(oldest.fields, "legacy").until == "2.2.0" and named(oldest.fields, "kept").until is None
    assert named(api.record_variants["ncclKnobs_t"][-1].record.fields, "fresh").since == "2.2.0"


def test_capabilities_are_read_from_what_the_headers_declare(merged, tmp_path):
    _, irs = merged
    assert [("windows" in ir.capabilities) for ir in irs] == [False, False, True]
    assert not any("device_api" in ir.capabilities for ir in irs)
    assert set(capabilities_of(irs[-1])) <= set(CAPABILITIES)
    device = header_set(tmp_path, "2.4.0", NEWEST, device=True)
    assert device.headers == ("nccl.h", "nccl_device.h") and device.device_headers == ()


def test_a_set_takes_the_headers_its_release_ships(tmp_path):
    plain = header_set(tmp_path, "2.1.0", OLD)
    assert plain.headers == ("nccl.h",) and plain.device_headers is None
    wrapper = tmp_path / "2.5.0" / "include"
    wrapper.mkdir(parents=True)
    for name in ("nccl.h", "nccl_device.h", "nccl_device_wrapper.h"):
        (wrapper / name).write_text("\n")
    assert discover_headers("nccl", wrapper) == (("nccl.h", "nccl_device.h"), ("nccl_device_wrapper.h",))


def test_a_header_the_release_does_not_ship_is_named_as_such(tmp_path):
    hs = header_set(tmp_path, "2.1.0", OLD)
    asked = HeaderSet(hs.name, "nccl", hs.version, ("nccl.h", "nccl_device.h"), hs.include_root, hs.lib_dir,
                      hs.soname, None, True, "nvidia-nccl-cu12==2.1.0", ())
    with pytest.raises(SystemExit) as err:
        check_present(asked)
    message = str(err.value)
    assert "nvidia-nccl-cu12==2.1.0 has no nccl_device.h (its include/ holds nccl.h)" in message
    assert "tools/setup.sh" not in message
    missing = HeaderSet(hs.name, "nccl", hs.version, ("nccl.h",), tmp_path / "absent", tmp_path / "absent",
                        hs.soname, None, True, "nvidia-nccl-cu12==2.1.0")
    with pytest.raises(SystemExit, match="run tools/setup.sh"):
        check_present(missing)


def test_a_function_in_neither_the_policy_nor_the_coverage_file_is_raw_only():
    """The real merged API with one function no policy or coverage entry names (as a new release
    brings): it is raw only, with its reason, and nothing stops."""
    import copy
    import json
    from generator.contract.ir_json import ir_from_json
    from generator.policy.coverage import load_coverage
    ir_dir = HERE.parent.parent / "bindings" / "ir"
    irs = [ir_from_json(json.loads(p.read_text())) for p in sorted(ir_dir.glob("nccl-[0-9]*.json"))]
    api = merge_library(irs)
    fresh = copy.deepcopy(named(api.functions, "ncclCommCount"))
    fresh.name, fresh.since = "ncclFooBar", api.versions[-1]
    api.functions.append(fresh)
    row = next(c for c in load_coverage(api) if c.function == "ncclFooBar")
    assert row.pending and row.python is None and row.rust is None
    assert row.raw.startswith(f"new in {api.versions[-1]}: not yet in the policy") and row.line.startswith("raw only")


def real_api():
    import json
    from generator.contract.ir_json import ir_from_json
    ir_dir = HERE.parent.parent / "bindings" / "ir"
    return merge_library([ir_from_json(json.loads(p.read_text())) for p in sorted(ir_dir.glob("nccl-[0-9]*.json"))])


def api_with_a_newer_release(change):
    """The real merged API with one more release: a copy of the newest set's IR, changed by
    `change(ir)`, as a new release would bring it."""
    import copy
    import json
    from generator.contract.ir_json import ir_from_json
    ir_dir = HERE.parent.parent / "bindings" / "ir"
    irs = [ir_from_json(json.loads(p.read_text())) for p in sorted(ir_dir.glob("nccl-[0-9]*.json"))]
    newest = max(irs, key=lambda ir: ir.version_code)
    fresh = copy.deepcopy(newest)
    major, minor, patch = (int(x) for x in newest.version.split("."))
    fresh.version, fresh.version_code = f"{major}.{minor}.{patch + 1}", newest.version_code + 1
    fresh.name = f"nccl-{fresh.version}"
    change(fresh)
    return merge_library(irs + [fresh]), newest, fresh


def test_a_renamed_parameter_binds_by_position_with_one_warning(capsys):
    """A release that renames a parameter the policy names (ncclAllReduce's count), at the same
    position with the same type: the entry still applies, bound by position, with one warning
    naming the entry and both names; the config variant, which kept the old name, still matches."""
    from generator.policy.nccl import load_policy

    def rename(ir):
        named(ir.functions, "ncclAllReduce").params[2].name = "numElements"
    api, _, fresh = api_with_a_newer_release(rename)
    policy = load_policy(api)
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: nccl.toml:[all_reduce]: ncclAllReduce's parameter 'count' is 'numElements' in the "
                        f"newest release ({fresh.version}): bound by position (parameter 3, the same type)"]
    method = next(m for m in policy.methods if m.name == "all_reduce")
    assert [r.param for r in method.params][:3] == ["sendbuff", "recvbuff", "numElements"]
    assert method.params[2].role == "count"
    load_policy(api)
    assert "warning:" not in capsys.readouterr().err  # once per run


def test_a_parameter_whose_type_changed_stops_generation_naming_the_entry_and_the_release():
    from generator.policy.common import PolicyError
    from generator.policy.nccl import load_policy
    from generator.ir.types import TypeRef

    def retype(ir):
        param = named(ir.functions, "ncclAllReduce").params[2]
        param.name, param.type = "numElements", TypeRef("int", name="int32_t", signed=True, size=4, align=4)
    api, newest, fresh = api_with_a_newer_release(retype)
    with pytest.raises(PolicyError) as err:
        load_policy(api)
    assert str(err.value) == (f"nccl.toml:[all_reduce]: ncclAllReduce's parameter 'count' changed position or type "
                              f"after NCCL {newest.version} (the newest release, {fresh.version}, has sendbuff, "
                              f"recvbuff, numElements, datatype, op, comm, stream): say the roles of the newest "
                              f"parameters")


def test_a_config_variant_that_no_longer_matches_names_the_parameter_that_differs():
    from generator.policy.common import PolicyError
    from generator.policy.nccl import load_policy
    api = real_api()
    named(api.functions, "ncclAllReduceConfig").params[2].name = "numElements"
    with pytest.raises(PolicyError, match="config_variant ncclAllReduceConfig is not ncclAllReduce's parameters plus "
                                        "a trailing config: its parameter 3 is 'numElements' where ncclAllReduce "
                                        "has 'count'"):
        load_policy(api)


def test_the_generator_cli_says_a_policy_error_in_one_line(tmp_path):
    """No traceback: `python -m generator` prints `error: <file>:<entry>: ...` and exits 2."""
    import subprocess
    script = ("import sys; from generator import __main__ as m\n"
              "from generator.policy.common import PolicyError\n"
              "def broken(args): raise PolicyError('nccl.toml:[x]: what is wrong')\n"
              "m.cmd_coverage = broken\n"
              "sys.exit(m.main(['coverage']))\n")
    run = subprocess.run([sys.executable, "-c", script], cwd=HERE.parent.parent, capture_output=True, text=True)
    assert run.returncode == 2, run.stderr
    assert run.stderr == "error: nccl.toml:[x]: what is wrong\n"


def test_a_call_that_takes_a_stream_releases_the_gil_whatever_its_name(tmp_path):
    """blocking (the bindings release the GIL) is read from the header for every call that
    enqueues on a CUDA stream: a collective a new release adds needs no conventions.toml entry."""
    text = ("typedef struct CUstream_st *cudaStream_t;\n"
            "int ncclAllFutureReduce(const void *send, void *recv, unsigned long count, cudaStream_t stream);\n"
            "int ncclQuickQuery(int *value);\n")
    hs = header_set(tmp_path, "2.9.0", text)
    ir = extract_header_set(hs, {hs.name: hs}, load_conventions())
    assert named(ir.functions, "ncclAllFutureReduce").blocking
    assert not named(ir.functions, "ncclQuickQuery").blocking
