"""The API contract on the real header sets: the events from NCCL 2.28.9 to 2.32.3
against a golden file and against the headers (checked by hand), the event model's
"only the fields a kind needs", replaying each checked-in log to every header set's
surface, and the log staying append-only.

The IRs are the checked-in bindings/ir/*.json (the freshness test keeps them current).
Update the golden file after an intended change:
    /usr/bin/python3 tests/contract/contract_test.py --update-golden
"""
import copy
import dataclasses
import difflib
import io
import json
import os
import sys
from collections import Counter
from contextlib import redirect_stdout
from pathlib import Path

HERE = Path(os.path.abspath(__file__)).parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

import pytest  # noqa: E402

from generator.__main__ import main as generator_main  # noqa: E402
from generator.contract import events as ev  # noqa: E402
from generator.contract.compat import check_compat  # noqa: E402
from generator.contract.diff import ReplayError, diff_surfaces, replay  # noqa: E402
from generator.contract.ir_json import ir_from_json, load_ir  # noqa: E402
from generator.contract.log import (ContractLogError, LogEntry, entry_text, extend_log, log_path,  # noqa: E402
                                    log_text, parse_log, replay_log)
from generator.contract.surface import api_surface, empty_surface  # noqa: E402
from generator.header_sets import load_header_sets  # noqa: E402
from generator.passes.merge import version_key  # noqa: E402
from generator.pipeline import ir_json_text  # noqa: E402

IR_DIR = REPO / "bindings" / "ir"
GOLDEN = HERE / "golden" / "nccl-2.28.9_to_nccl-2.32.3.events.json"
# library -> its default header sets, oldest first, as generator/header_sets.toml lists them.
LIBRARIES = {}
for _hs in load_header_sets():
    if _hs.default:
        LIBRARIES.setdefault(_hs.library, []).append(_hs.name)


@pytest.fixture(scope="module")
def irs():
    return {p.stem: load_ir(p) for p in sorted(IR_DIR.glob("*.json"))}


@pytest.fixture(scope="module")
def events_28_to_32(irs):
    return diff_surfaces(api_surface(irs["nccl-2.28.9"]), api_surface(irs["nccl-2.32.3"]))


def golden_text(events) -> str:
    return "[\n" + ",\n".join(" " + json.dumps(e.to_json()) for e in events) + "\n]\n"


def by_kind(events, kind, **match):
    return [e for e in events if e.KIND == kind and all(getattr(e, k) == v for k, v in match.items())]


# --- reading IRs back ---------------------------------------------------------------

@pytest.mark.parametrize("path", sorted(IR_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_ir_json_reads_back_to_the_same_json(path):
    text = path.read_text()
    assert ir_json_text(ir_from_json(json.loads(text))) == text


def test_ir_json_rejects_unknown_keys(irs):
    raw = json.loads((IR_DIR / "nccl-2.28.9.json").read_text())
    raw["functions"][0]["colour"] = "blue"
    with pytest.raises(ValueError, match="Function: unknown keys"):
        ir_from_json(raw)


# --- the events from 2.28.9 to 2.32.3 ------------------------------------------------

def test_events_match_golden(events_28_to_32):
    text = golden_text(events_28_to_32)
    expected = GOLDEN.read_text()
    diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                        f"golden/{GOLDEN.name}", "computed"))
    assert not diff, f"the events differ from the golden file (if intended, run --update-golden):\n{diff}"


def test_functions_added_after_2_28(events_28_to_32):
    added = {e.name: e for e in by_kind(events_28_to_32, "function_added")}
    # nccl.h 2.32.3: ncclCommGrow(comm, nRanks, const ncclUniqueId* uniqueId, rank, newcomm, config)
    grow = added["ncclCommGrow"]
    assert grow.result == "ncclResult_t"
    assert [(p["name"], p["type"]) for p in grow.params] == [
        ("comm", "ncclComm_t"), ("nRanks", "int"), ("uniqueId", "const ncclUniqueId *"), ("rank", "int"),
        ("newcomm", "ncclComm_t *"), ("config", "ncclConfig_t *")]
    assert [(p["name"], p["type"]) for p in added["ncclCommSuspend"].params] == [("comm", "ncclComm_t"),
                                                                                  ("flags", "int")]
    assert added["ncclAllReduceConfig"].params[-1] == {"name": "config", "type": "const ncclCollConfig_t *"}
    assert {"ncclCommResume", "ncclCommMemStats", "ncclCommQueryProperties"} <= set(added)
    assert len(added) == 43
    # Still exported by 2.32.3's libnccl, but no longer declared by its nccl.h.
    assert [e.name for e in by_kind(events_28_to_32, "function_removed")] == ["ncclResetDebugInit"]


def test_config_grows_at_the_end(events_28_to_32):
    assert by_kind(events_28_to_32, "record_size_changed", name="ncclConfig_t")[0].to_json() == {
        "kind": "record_size_changed", "name": "ncclConfig_t", "size": 120, "old_size": 80}
    added = by_kind(events_28_to_32, "field_added", record="ncclConfig_t")
    # nccl.h 2.32.3 after nvlinkCentricSched (offset 76): graphUsageMode ... nvlsHostMode, all int.
    assert [(e.index, e.field["name"], e.field["offset"]) for e in added] == [
        (17, "graphUsageMode", 80), (18, "numRmaCtx", 84), (19, "maxP2pPeers", 88),
        (20, "graphStreamOrdering", 92), (21, "launchOrderImplicit", 96), (22, "numRmaSig", 100),
        (23, "rmaEagerInit", 104), (24, "hostCftMode", 108), (25, "nvlsHostMode", 112)]
    assert not [e for e in events_28_to_32 if e.item == "ncclConfig_t" and e.KIND not in
                ("record_size_changed", "field_added")]


def test_dev_comm_requirements_gains_a_versioned_header(events_28_to_32):
    """nccl_device/host.h 2.32.3: size, magic, version now open ncclDevCommRequirements,
    and every 2.28.9 field moves 16 bytes down."""
    added = by_kind(events_28_to_32, "field_added", record="ncclDevCommRequirements_t")
    assert [(e.index, e.field) for e in added[:3]] == [
        (0, {"name": "size", "type": "size_t", "offset": 0}),
        (1, {"name": "magic", "type": "unsigned int", "offset": 8}),
        (2, {"name": "version", "type": "unsigned int", "offset": 12})]
    moved = by_kind(events_28_to_32, "field_offset_changed", record="ncclDevCommRequirements_t")
    assert len(moved) == 12 and all(e.offset == e.old_offset + 16 for e in moved)
    assert moved[0].name == "resourceRequirementsList" and (moved[0].old_offset, moved[0].offset) == (0, 16)
    assert by_kind(events_28_to_32, "record_size_changed", name="ncclDevCommRequirements_t")[0].size == 120


def test_dev_comm_and_enums(events_28_to_32):
    assert by_kind(events_28_to_32, "record_size_changed", name="ncclDevComm_t")[0].old_size == 200
    assert by_kind(events_28_to_32, "field_offset_changed", record="ncclDevComm_t", name="rank")[0].offset == 8
    # ncclGinCtx and ncclGinDescriptorSmem are not removed: 2.32.3 declares them only for
    # device compilation (#ifdef __CUDACC__), and the generator's device-side parse sees them.
    assert {e.name for e in by_kind(events_28_to_32, "record_removed")} == {"ncclWindow_vidmem"}
    assert by_kind(events_28_to_32, "record_size_changed", name="ncclGinDescriptorSmem")[0].size == 128
    assert by_kind(events_28_to_32, "enum_value_added", enum="ncclResult_t")[0].to_json() == {
        "kind": "enum_value_added", "enum": "ncclResult_t", "name": "ncclTimeout", "value": 8}
    changed = by_kind(events_28_to_32, "enum_value_changed")
    assert [(e.enum, e.name, e.old_value, e.value) for e in changed] == [
        ("ncclGinProxyGfdQwordIdx_t", "ncclGinProxyGfdQwords", 8, 16), ("ncclResult_t", "ncclNumResults", 8, 9)]
    assert by_kind(events_28_to_32, "initializer_value_changed", initializer="NCCL_CONFIG_INITIALIZER",
                   field="version")[0].value == 23203


# --- the event model ----------------------------------------------------------------

def test_every_kind_holds_only_required_fields_it_names():
    for kind, cls in ev.EVENT_CLASSES.items():
        assert cls.KIND == kind and cls.SECTION and kind.replace("_", "").isalpha()
        for f in dataclasses.fields(cls):
            assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, \
                f"{kind}.{f.name} has a default: every field of a kind must be one it needs"
        assert cls.ITEM in {f.name for f in dataclasses.fields(cls)}


def test_events_carry_exactly_their_kinds_fields(events_28_to_32):
    logged = [e for lib in LIBRARIES for entry in parse_log((REPO / log_path(lib)).read_text())[1]
              for e in entry.events]
    for e in events_28_to_32 + logged:
        raw = e.to_json()
        assert set(raw) == {"kind"} | {f.name for f in dataclasses.fields(type(e))}
        assert all(v is not None or f in ("value", "old_value") for f, v in raw.items()), raw
        assert ev.event_from_json(raw) == e


def test_events_fail_loudly_on_missing_unknown_or_mistyped_fields():
    raw = {"kind": "field_offset_changed", "record": "r", "name": "f", "offset": 8, "old_offset": 0}
    assert ev.event_from_json(raw) == ev.FieldOffsetChanged("r", "f", 8, 0)
    with pytest.raises(ValueError, match=r"missing \['old_offset'\]"):
        ev.event_from_json({k: v for k, v in raw.items() if k != "old_offset"})
    with pytest.raises(ValueError, match=r"unknown \['size'\]"):
        ev.event_from_json({**raw, "size": 4})
    with pytest.raises(ValueError, match="unknown event kind"):
        ev.event_from_json({**raw, "kind": "field_renamed"})
    with pytest.raises(TypeError, match="offset"):
        ev.FieldOffsetChanged("r", "f", "8", 0)
    with pytest.raises(TypeError):
        ev.FunctionRemoved("f", result="int")
    with pytest.raises(TypeError, match="field"):
        ev.FieldAdded("r", 0, {"name": "f", "type": "int"})          # no offset
    with pytest.raises(TypeError, match="params"):
        ev.FunctionAdded("f", "int", [{"name": "x", "type": "int", "direction": "in"}])


# --- replay and the log -------------------------------------------------------------

@pytest.mark.parametrize("library", sorted(LIBRARIES))
def test_replaying_the_log_gives_every_header_sets_surface(irs, library):
    logged_library, entries = parse_log((REPO / log_path(library)).read_text())
    assert logged_library == library
    assert [e.header_set for e in entries] == LIBRARIES[library]
    assert entries[0].base is None and all(e.KIND.endswith("_added") for e in entries[0].events)
    states = replay_log(entries)
    for name in LIBRARIES[library]:
        assert states[name] == api_surface(irs[name]), f"replaying {library}'s log up to {name}"


@pytest.mark.parametrize("library", sorted(LIBRARIES))
def test_log_is_a_prefix_of_itself_regenerated(irs, library):
    text = (REPO / log_path(library)).read_text()
    _, checked_in = parse_log(text)
    regenerated = extend_log(checked_in, [irs[n] for n in LIBRARIES[library]])
    assert [entry_text(e) for e in regenerated[:len(checked_in)]] == [entry_text(e) for e in checked_in]
    assert log_text(library, regenerated) == text


def test_a_new_header_set_appends_and_rewrites_nothing(irs):
    nccl = LIBRARIES["nccl"]
    _, full = parse_log((REPO / log_path("nccl")).read_text())
    all_but_newest = extend_log([], [irs[n] for n in nccl[:-1]])
    assert [entry_text(e) for e in all_but_newest] == [entry_text(e) for e in full[:-1]]
    extended = extend_log(all_but_newest, [irs[n] for n in nccl])
    assert [entry_text(e) for e in extended] == [entry_text(e) for e in full]
    assert extended[-1].base == nccl[-2]


def test_the_log_is_in_version_order(irs):
    _, full = parse_log((REPO / log_path("nccl")).read_text())
    assert [e.header_set for e in full] == sorted(LIBRARIES["nccl"], key=lambda n: version_key(irs[n].version))


def test_a_back_filled_release_is_inserted_in_version_order(irs):
    nccl = LIBRARIES["nccl"]
    _, full = parse_log((REPO / log_path("nccl")).read_text())
    oldest_and_newest = extend_log([], [irs[nccl[0]], irs[nccl[-1]]])
    back_filled = extend_log(oldest_and_newest, [irs[n] for n in nccl])
    assert [entry_text(e) for e in back_filled] == [entry_text(e) for e in full]
    assert replay_log(back_filled) == {n: api_surface(irs[n]) for n in nccl}
    # Only the entries after the first back-filled release change.
    assert entry_text(back_filled[0]) == entry_text(oldest_and_newest[0])


def test_a_header_set_no_longer_at_hand_keeps_its_entry(irs):
    _, full = parse_log((REPO / log_path("nccl")).read_text())
    assert extend_log(full, [irs["nccl-2.32.3"]]) == full


def test_a_log_that_no_longer_matches_its_header_set_fails_loudly(irs):
    _, full = parse_log((REPO / log_path("nccl")).read_text())
    tampered = LogEntry(full[0].header_set, full[0].version, full[0].version_code, None,
                        [e for e in full[0].events if getattr(e, "name", "") != "ncclAllReduce"])
    first, second = full[0].header_set, full[1].header_set
    with pytest.raises(ContractLogError, match=f"{first}: the contract log no longer matches") as err:
        extend_log([tampered, full[1]], [irs[first], irs[second]])
    assert "ncclAllReduce" in str(err.value.code)


def test_replay_refuses_events_that_do_not_fit():
    with pytest.raises(ReplayError, match="removes an item that is not there"):
        replay([ev.FunctionRemoved("ncclNothing")])
    surface = replay([ev.EnumAdded("e_t", 4, False, {"a": 0})])
    with pytest.raises(ReplayError, match="a is not 1"):
        replay([ev.EnumValueChanged("e_t", "a", 2, 1)], surface)


def test_diff_then_replay_gives_the_new_surface_in_both_directions(irs):
    a, b = api_surface(irs["nccl-2.28.9"]), api_surface(irs["nccl-2.32.3"])
    assert replay(diff_surfaces(a, b), a) == b
    assert replay(diff_surfaces(b, a), b) == a
    assert diff_surfaces(a, a) == []
    assert replay(diff_surfaces(empty_surface(), b)) == b


# --- sentinels on the real pair -------------------------------------------------------

def test_a_sentinel_that_counts_one_more_is_not_a_break(irs):
    old, new = copy.deepcopy(irs["nccl-2.28.9"]), copy.deepcopy(irs["nccl-2.32.3"])
    for ir in (old, new):
        for value in next(e for e in ir.enums if e.name == "ncclResult_t").values:
            value.sentinel = value.name == "ncclNumResults"
    report = check_compat(old, new)
    assert "enum ncclResult_t" not in {f.subject for f in report.breaks}
    note = next(f for f in report.not_breaks if f.subject == "enum ncclResult_t")
    assert note.what == "ncclResult_t.ncclNumResults: 8 -> 9" and "sentinel" in note.reason


def test_the_ir_marks_ncclNumResults_as_a_sentinel(irs):
    report = check_compat(irs["nccl-2.28.9"], irs["nccl-2.32.3"])
    assert "enum ncclResult_t" not in {f.subject for f in report.breaks}


# --- the command line ---------------------------------------------------------------

def run_cli(*argv):
    out = io.StringIO()
    with redirect_stdout(out):
        rc = generator_main(list(argv))
    return rc, out.getvalue()


def test_diff_command_reads_ir_files_for_people_and_tools():
    """The diff command's counts and events are the golden file's (the events from 2.28.9 to
    2.32.3, held against the headers above), and its sizes the IRs'."""
    a, b = str(IR_DIR / "nccl-2.28.9.json"), str(IR_DIR / "nccl-2.32.3.json")
    golden = [ev.event_from_json(raw) for raw in json.loads(GOLDEN.read_text())]
    functions = [e for e in golden if e.SECTION == "functions"]
    added = {e.item for e in functions if e.KIND == "function_added"}
    removed = {e.item for e in functions if e.KIND == "function_removed"}
    changed = {e.item for e in functions} - added - removed
    assert added and removed and changed
    rc, text = run_cli("diff", a, b)
    assert rc == 0
    assert text.startswith(f"nccl-2.28.9 -> nccl-2.32.3: {len(golden)} changes\n"
                           f"  functions     {len(added)} added, {len(removed)} removed, {len(changed)} changed\n")
    assert "  + ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags)\n" in text
    config_size = {name: next(r["size"] for r in json.loads((IR_DIR / f"{name}.json").read_text())["records"]
                              if r["name"] == "ncclConfig_t") for name in ("nccl-2.28.9", "nccl-2.32.3")}
    assert config_size["nccl-2.28.9"] != config_size["nccl-2.32.3"]
    assert f"  ~ ncclConfig_t: size {config_size['nccl-2.28.9']} -> {config_size['nccl-2.32.3']} bytes\n" in text
    rc, raw = run_cli("diff", a, b, "--json")
    data = json.loads(raw)
    assert (data["old"], data["new"]) == ("nccl-2.28.9", "nccl-2.32.3")
    assert data["events"] == [e.to_json() for e in golden]
    assert data["kinds"] == dict(Counter(e.KIND for e in golden))


def test_check_compat_on_the_real_pair():
    a, b = str(IR_DIR / "nccl-2.28.9.json"), str(IR_DIR / "nccl-2.32.3.json")
    rc, text = run_cli("check-compat", a, b)
    assert rc == 1
    assert "BREAK: struct ncclDevCommRequirements_t\n" in text
    assert "not a break: struct ncclConfig_t\n" in text and "a versioned struct" in text
    rc, text = run_cli("check-compat", a, a)
    assert rc == 0 and text.endswith("no ABI breaks for users of nccl-2.28.9\n")


if __name__ == "__main__":
    if "--update-golden" in sys.argv:
        a, b = (load_ir(IR_DIR / f"{n}.json") for n in ("nccl-2.28.9", "nccl-2.32.3"))
        GOLDEN.write_text(golden_text(diff_surfaces(api_surface(a), api_surface(b))))
        print(f"wrote {GOLDEN}")
        sys.exit(0)
    sys.exit(pytest.main([__file__, "-q"]))
