"""check-compat on synthetic header pairs (headers/): a 3.1.0 base, a 3.2.0 that only
grows compatibly, and a 3.2.0 that breaks code built against 3.1.0 in every way
check-compat knows; and one old/new pair per rule: layout changes that keep the size
(nccl_compat_layout_*.h), versioned structs that grow into and past their tail padding
(nccl_compat_stamped_*.h), handles whose pointee is renamed (nccl_compat_handle_*.h).
Also: every kind of event appears in some diff here or in the real 2.28.9 -> 2.32.3 one,
and each of those diffs replays exactly, both ways."""
import dataclasses
import io
import json
import os
import sys
from contextlib import redirect_stdout
from pathlib import Path

HERE = Path(os.path.abspath(__file__)).parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

import pytest  # noqa: E402

from generator.__main__ import main as generator_main  # noqa: E402
from generator.contract import events as ev  # noqa: E402
from generator.contract.compat import _BREAK_REASON, _NOT_BREAK_REASON, check_compat  # noqa: E402
from generator.contract.diff import diff_surfaces, replay  # noqa: E402
from generator.contract.ir_json import load_ir  # noqa: E402
from generator.contract.surface import api_surface  # noqa: E402
from generator.policy.conventions import load_conventions  # noqa: E402
from generator.header_sets import HeaderSet  # noqa: E402
from generator.passes.extract import extract_header_set  # noqa: E402
from generator.pipeline import ir_json_text  # noqa: E402

HEADERS = HERE / "headers"
# The sentinel is named here rather than in conventions.toml: these headers are not NCCL's.
CONVENTIONS = dataclasses.replace(load_conventions(), sentinels=frozenset({"compatNumResults"}))


def synth_set(header: str, version: str) -> HeaderSet:
    return HeaderSet(f"compat-{version}-{header[len('nccl_compat_'):-2]}", "nccl", version, (header,), HEADERS,
                     HEADERS, "libcompat.so", None, True, "tests/contract/headers")


@pytest.fixture(scope="module")
def sets():
    out = {}
    for key, header, version in (("base", "nccl_compat_base.h", "3.1.0"),
                                 ("additions", "nccl_compat_additions.h", "3.2.0"),
                                 ("breaks", "nccl_compat_breaks.h", "3.2.0")):
        hs = synth_set(header, version)
        out[key] = extract_header_set(hs, {hs.name: hs}, CONVENTIONS)
    return out


@pytest.fixture(scope="module")
def pairs():
    """rule -> (old IR, new IR) of nccl_compat_<rule>_old.h and nccl_compat_<rule>_new.h."""
    out = {}
    for rule in ("layout", "stamped", "handle"):
        sets = [synth_set(f"nccl_compat_{rule}_{side}.h", v) for side, v in (("old", "3.1.0"), ("new", "3.2.0"))]
        out[rule] = tuple(extract_header_set(hs, {hs.name: hs}, CONVENTIONS) for hs in sets)
    return out


def whats(findings):
    return [(f.subject, f.what) for f in findings]


def verdicts(findings, sections=("struct", "union", "typedef")):
    """(subject, what, reason) of the findings about records and typedefs."""
    return [(f.subject, f.what, f.reason) for f in findings if f.subject.startswith(sections)]


def test_the_synthetic_headers_bind_completely(sets, pairs):
    for ir in sets.values():
        assert len(ir.functions) >= 5
    for ir in [*sets.values(), *(ir for pair in pairs.values() for ir in pair)]:
        assert not [s for s in ir.skipped if s.kind != "macro"], ir.skipped


def test_compatible_growth_is_not_a_break_and_says_why(sets):
    report = check_compat(sets["base"], sets["additions"])
    assert report.breaks == []
    notes = {f.subject: f for f in report.not_breaks}
    grown = notes["struct compatConfig_t"]
    assert grown.what == "compatConfig_t: grows at the end, 32 -> 40 bytes: priority, flags added"
    assert "versioned struct" in grown.reason
    assert "sentinel" in notes["enum compatResult_t"].reason
    assert notes["function compatSend"].what == "compatSend: parameter 0 renamed buf -> buffer"
    assert "spelled through a typedef" in notes["struct compatTeam_t"].reason
    assert "compile-time constant" in notes["constant COMPAT_LIMIT"].reason


def test_every_kind_of_break_is_reported(sets):
    report = check_compat(sets["base"], sets["breaks"])
    assert whats(report.breaks) == [
        ("function compatGone", "compatGone"),
        ("function compatInit", "compatInit: parameter 3 added: int flags"),
        ("function compatReduce", "compatReduce: parameter 3 removed: op"),
        ("function compatSend", "compatSend: parameter 1 count: type int -> size_t"),
        ("function compatTeamSize", "compatTeamSize: returns size_t (was int)"),
        ("struct compatConfig_t", "compatConfig_t: size 32 -> 40 bytes"),
        ("struct compatConfig_t", "compatConfig_t: field added at offset 24: const char *label"),
        ("struct compatConfig_t", "compatConfig_t.name: offset 24 -> 32"),
        ("struct compatFlags_t", "compatFlags_t: field added at offset 0, bit 1: unsigned int : 2 spare"),
        ("struct compatFlags_t", "compatFlags_t.mode: bit offset 1 -> 3"),
        ("struct compatLegacy_t", "compatLegacy_t"),
        ("struct compatPair_t", "compatPair_t: align 4 -> 8"),
        ("struct compatTeam_t", "compatTeam_t: size 8 -> 12 bytes"),
        ("struct compatTeam_t", "compatTeam_t: field added at offset 8: int stride"),
        ("union compatValue_t", "compatValue_t: a struct (was a union)"),
        ("union compatValue_t", "compatValue_t: size 4 -> 8 bytes"),
        ("union compatValue_t", "compatValue_t.f: offset 0 -> 4"),
        ("enum compatMode_t", "compatMode_t"),
        ("enum compatOp_t", "compatOp_t: compatProd removed"),
        ("enum compatOp_t", "compatOp_t.compatMax: 1 -> 2"),
        ("enum compatWidth_t", "compatWidth_t: underlying type 4-byte unsigned -> 8-byte unsigned"),
        ("typedef compatAllocFn_t",
         "compatAllocFn_t: int (*)(void **, size_t) -> int (*)(void **, size_t, void *)"),
        ("typedef compatHandle_t", "compatHandle_t"),
    ]
    # A field inserted in the middle of a versioned struct is a break: the growth rule is for the end only.
    assert "struct compatConfig_t" not in {f.subject for f in report.not_breaks}


ADDED = "layout changed: a field was added (code built against the old header neither sets nor expects it)"
VERSIONED = ("a versioned struct (size, magic, version first): the caller passes the size and version it was "
             "built with, and the library reads only the fields that stamp covers (nothing past that size; the "
             "version says which fields in the old tail padding the caller knows), so old code keeps working "
             "(NCCL's rule for versioned structs)")


def test_a_layout_change_that_keeps_the_size_is_still_a_break(pairs):
    report = check_compat(*pairs["layout"])
    assert verdicts(report.not_breaks) == []
    assert verdicts(report.breaks) == [
        ("struct compatBits_t", "compatBits_t.mode: type unsigned int : 3 -> unsigned int : 5",
         "layout changed: a field's type"),
        ("struct compatGap_t", "compatGap_t: field added at offset 4: int hole", ADDED),
        ("struct compatRenamed_t", "compatRenamed_t: field removed: tag", "layout changed: a field went away"),
        ("struct compatRenamed_t", "compatRenamed_t: field added at offset 4: int label", ADDED),
        ("struct compatRetyped_t", "compatRetyped_t: size 4 -> 8 bytes", "layout changed: the size"),
        ("struct compatRetyped_t", "compatRetyped_t: align 4 -> 8", "layout changed: the alignment"),
        ("struct compatRetyped_t", "compatRetyped_t.count: type int -> long", "layout changed: a field's type"),
        ("struct compatShrunk_t", "compatShrunk_t: size 8 -> 4 bytes", "layout changed: the size"),
        ("struct compatShrunk_t", "compatShrunk_t: field removed: dropped", "layout changed: a field went away"),
        # sizeof(compatSlot_t) is 16 before and after: the field went into the old tail padding.
        ("struct compatSlot_t", "compatSlot_t: field added at offset 12: int flags", ADDED),
    ]


def test_a_versioned_struct_may_grow_at_the_end_whatever_its_size(pairs):
    report = check_compat(*pairs["stamped"])
    assert verdicts(report.not_breaks) == [
        # priority lands in the old tail padding (offset 20 of 24), flags past it: 24 -> 32 bytes.
        ("struct compatCommConfig_t", "compatCommConfig_t: grows at the end, 24 -> 32 bytes: priority, flags added",
         VERSIONED),
        ("struct compatTuning_t",
         "compatTuning_t: grows at the end, into its tail padding, still 24 bytes: minCtas added", VERSIONED),
    ]
    # The same growth of an unversioned struct passed by value is a break.
    assert verdicts(report.breaks) == [
        ("struct compatPlace_t", "compatPlace_t: size 8 -> 12 bytes", "layout changed: the size"),
        ("struct compatPlace_t", "compatPlace_t: field added at offset 8: int stride", ADDED),
    ]


def test_an_opaque_handles_pointee_may_be_renamed(pairs):
    report = check_compat(*pairs["handle"])
    assert verdicts(report.not_breaks) == [
        ("struct compatSegment", "compatSegment: now named compatSegment_v_t",
         "the same struct tag, named through a typedef or not: a C name, not part of the ABI "
         "(its layout is compared as one record)"),
        ("typedef compatSegment_t", "compatSegment_t: compatSegment * -> compatSegment_v_t *",
         "the same type, spelled through a typedef (compatSegment *)"),
        ("typedef compatWindow_t", "compatWindow_t: struct compatWindow_vidmem * -> struct compatWindow *",
         "an opaque handle: old code only holds and passes the pointer, never the struct behind it, so the "
         "pointee's name is not part of the ABI"),
    ]
    # A handle whose struct the old header defines (old code may read it) is not opaque: a break.
    assert verdicts(report.breaks) == [
        ("struct compatQueue", "compatQueue",
         "code built against the old header uses a type that no longer exists"),
        ("struct compatSegment", "compatSegment: size 8 -> 16 bytes", "layout changed: the size"),
        ("struct compatSegment", "compatSegment: field added at offset 8: size_t bytes", ADDED),
        ("typedef compatQueue_t", "compatQueue_t: compatQueue * -> compatQueueImpl *",
         "the type behind the name changed"),
    ]


def test_no_kind_of_change_goes_without_a_verdict():
    """Only new items (and new members of enums and initializers) pass without a word."""
    unjudged = set(ev.EVENT_CLASSES) - set(_BREAK_REASON) - set(_NOT_BREAK_REASON)
    assert sorted(unjudged) == ["constant_added", "enum_added", "enum_value_added", "function_added",
                                "initializer_added", "initializer_field_added", "record_added", "typedef_added"]


def test_going_back_is_not_compatible_either(sets):
    report = check_compat(sets["additions"], sets["base"])
    subjects = {f.subject for f in report.breaks}
    assert {"function compatGetStats", "struct compatConfig_t", "struct compatStats_t"} <= subjects
    assert "enum compatResult_t" in {f.subject for f in report.not_breaks}   # the sentinel still


def test_every_event_kind_appears_and_replays(sets):
    real = [load_ir(REPO / "bindings" / "ir" / f"{n}.json") for n in ("nccl-2.28.9", "nccl-2.32.3")]
    pairs = [(sets["base"], sets["additions"]), (sets["base"], sets["breaks"]), (real[0], real[1])]
    seen = set()
    for old, new in pairs + [(b, a) for a, b in pairs]:
        a, b = api_surface(old), api_surface(new)
        events = diff_surfaces(a, b)
        assert replay(events, a) == b, f"{old.name} -> {new.name}"
        seen |= {e.KIND for e in events}
    # An initializer that starts filling another record takes a conventions change; build it by hand.
    a = replay([ev.InitializerAdded("X_INITIALIZER", "x_t", {"size": 8})])
    b = replay([ev.InitializerAdded("X_INITIALIZER", "y_t", {"size": 8})])
    assert diff_surfaces(a, b) == [ev.InitializerRecordChanged("X_INITIALIZER", "y_t", "x_t")]
    seen.add("initializer_record_changed")
    assert sorted(set(ev.EVENT_CLASSES) - seen) == []


def run_cli(*argv):
    out = io.StringIO()
    with redirect_stdout(out):
        rc = generator_main(list(argv))
    return rc, out.getvalue()


def test_check_compat_command_exit_status(sets, tmp_path):
    paths = {}
    for key, ir in sets.items():
        paths[key] = tmp_path / f"{key}.json"
        paths[key].write_text(ir_json_text(ir))
    rc, text = run_cli("check-compat", str(paths["base"]), str(paths["additions"]))
    assert rc == 0, text
    assert "not a break: struct compatConfig_t\n" in text
    assert text.endswith("no ABI breaks for users of compat-3.1.0-base\n")
    rc, text = run_cli("check-compat", str(paths["base"]), str(paths["breaks"]))
    assert rc == 1
    assert "BREAK: enum compatOp_t\n" in text
    assert text.endswith("23 ABI breaks in 16 items for users of compat-3.1.0-base\n")
    rc, raw = run_cli("check-compat", "--json", str(paths["base"]), str(paths["breaks"]))
    assert rc == 1 and len(json.loads(raw)["breaks"]) == 23


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
