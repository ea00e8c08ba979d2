"""Struct mirrors against the C layout: each layout's size and every field's
offset and size, as clang reported them (the IR JSON); the layout a record
takes for a library version; fields a layout lacks; views and the buffer
protocol."""
import pytest

import ncclbind._nccl as nccl
import ncclbind._nccl_ep as nccl_ep
from ncclbind.errors import NcclInvalid


def record_class(library, name):
    return getattr(nccl_ep if library == "nccl_ep" else nccl, name)


def layout_for(cls, version_code):
    chosen = cls.layouts[0]
    for layout in cls.layouts:
        if layout["version_code"] <= version_code:
            chosen = layout
    return chosen


def test_every_record_of_every_header_set_matches_its_mirror(ir):
    checked = 0
    for set_name, data in ir.items():
        # the type of an anonymous member has no class: its fields are its parent's
        flattened = {f["type"]["name"] for r in data["records"] for f in r.get("fields", []) if f.get("anonymous")}
        for record in data["records"]:
            if record["name"] in flattened:
                continue
            cls = record_class(data["library"], record["name"])
            layout = layout_for(cls, data["version_code"])
            where = f"{set_name}: {record['name']} (layout {layout['version']})"
            assert layout["size"] == record["size"], where
            assert layout["align"] == record["align"], where
            named = [f for f in record.get("fields", []) if not f.get("anonymous")]
            assert set(layout["fields"]) == {f["name"] for f in named}, where
            for f in named:
                offset, size = layout["fields"][f["name"]]
                if f.get("bit_width") is None:
                    assert offset == f["offset"], f"{where}.{f['name']} offset"
                    if f["type"].get("size"):
                        assert size == f["type"]["size"], f"{where}.{f['name']} size"
            checked += 1
    assert checked > 50


def config_variants(api):
    """ncclConfig_t's layouts in the merged IR, oldest first."""
    return api["nccl"]["record_variants"]["ncclConfig_t"]


def test_layout_follows_the_loaded_library(api):
    codes = api["nccl"]["version_codes"]
    variants = config_variants(api)
    loaded = nccl.get_version()
    cfg = nccl.nccl_config_initializer()
    chosen = [v for v in variants if v["version_code"] <= loaded][-1]
    assert (cfg.layout_version, cfg.nbytes, cfg.size) == (chosen["versions"][0],) + (chosen["record"]["size"],) * 2
    assert cfg.version == max(c for c in (codes[v] for v in chosen["versions"]) if c <= loaded)
    assert cfg.magic == 0xCAFEBEEF
    for variant in variants:
        first = variant["versions"][0]
        by_name = nccl.nccl_config_initializer(first)
        assert (by_name.layout_version, by_name.nbytes, by_name.version) == (first, variant["record"]["size"],
                                                                             codes[first])
        assert nccl.ncclConfig_t(layout=codes[first]).nbytes == variant["record"]["size"]
    # a library between two layouts' first versions takes the older layout
    for older, newer in zip(variants, variants[1:]):
        between = newer["version_code"] - 1
        if between >= older["version_code"]:
            assert nccl.nccl_config_initializer(between).layout_version == older["versions"][0]


def test_a_field_the_layout_lacks_raises_at_once(api):
    variants = config_variants(api)
    oldest, newest = variants[0], variants[-1]
    field = next(f["name"] for f in newest["record"]["fields"] if f["since"] != oldest["versions"][0])
    since = next(f["since"] for f in newest["record"]["fields"] if f["name"] == field)
    cfg = nccl.nccl_config_initializer(oldest["versions"][0])
    with pytest.raises(NcclInvalid) as info:
        setattr(cfg, field, 1)
    message = str(info.value)
    assert field in message and oldest["versions"][0] in message and since in message
    assert info.value.argument == field
    with pytest.raises(NcclInvalid):
        getattr(cfg, field)
    newer = nccl.nccl_config_initializer(newest["versions"][0])
    setattr(newer, field, 1)
    assert getattr(newer, field) == 1


def test_fields_convert_and_check_ranges(api, on_release_with):
    if on_release_with(struct="ncclConfig_t", fields=["blocking", "commName"]):
        return
    cfg = nccl.nccl_config_initializer()
    cfg.blocking = 0
    cfg.commName = "trainer"
    assert cfg.commName == "trainer" and cfg.blocking == 0
    with pytest.raises(NcclInvalid):
        cfg.blocking = 2 ** 31
    with pytest.raises(NcclInvalid):
        cfg.blocking = "1"
    with pytest.raises(NcclInvalid):
        cfg.commName = 5
    props = nccl.ncclCommProperties_t(layout=api["nccl"]["versions"][-1])
    props.deviceApiSupport = True
    assert props.deviceApiSupport is True
    props.ginSupport = [True] + [False] * 63
    assert props.ginSupport[:2] == (True, False)
    with pytest.raises(NcclInvalid):
        props.ginSupport = [True]


def test_unique_id_bytes_and_views():
    uid = nccl.get_unique_id()
    data = bytes(uid)
    assert len(data) == 128 and uid.internal == data
    copy = nccl.ncclUniqueId.from_buffer(bytearray(data))
    assert copy.internal == data
    view = nccl.ncclUniqueId.from_address(uid.address, owner=uid)
    view.internal = b"\x01" * 128
    assert bytes(uid) == b"\x01" * 128


def test_nested_records_are_views_into_the_parent():
    reqs = nccl.ncclTeamRequirements_t()
    reqs.team.nRanks = 4
    reqs.team.rank = 1
    assert (reqs.team.nRanks, reqs.team.rank) == (4, 1)
    team = nccl.ncclTeam_t(nRanks=8, rank=2, stride=1)
    reqs.team = team
    assert reqs.team.nRanks == 8
    raw = bytes(reqs)
    assert int.from_bytes(raw[8:12], "little") == 8  # ncclTeam_t at offset 8


def test_pointer_fields_keep_their_targets():
    head = nccl.ncclDevResourceRequirements_t()
    tail = nccl.ncclDevResourceRequirements_t()
    head.next = tail
    assert head.next == tail.address
    del tail  # the head keeps it alive
    import gc
    gc.collect()
    assert nccl.ncclDevResourceRequirements_t.from_address(head.next).next == 0


def test_every_record_constructs_and_prints():
    for module in (nccl, nccl_ep):
        for cls in vars(module).values():
            if isinstance(cls, type) and issubclass(cls, nccl.Record) and cls is not nccl.Record:
                for layout in cls.layouts:
                    record = cls(layout=layout["version_code"])
                    assert record.nbytes == layout["size"]
                    assert repr(record).startswith(cls.__name__ + "(")


def test_initializers_fill_as_the_macros_do(ir):
    ep = next(d for d in ir.values() if d["library"] == "nccl_ep")
    for init in ep["initializers"]:
        record = getattr(nccl_ep, init["name"].lower())()
        for value in init["values"]:
            got = getattr(record, value["field"])
            assert got == (0 if value.get("value") is None else value["value"]), f"{init['name']}.{value['field']}"


def test_records_reject_positional_arguments_and_bad_layouts():
    with pytest.raises(TypeError):
        nccl.ncclTeam_t(1, 2, 3)
    with pytest.raises(NcclInvalid):
        nccl.ncclTeam_t(layout="two")
    with pytest.raises(NcclInvalid):
        nccl.ncclUniqueId.from_buffer(bytearray(10))
    with pytest.raises(NcclInvalid):
        nccl.ncclUniqueId.from_buffer(bytes(128))  # read-only


def test_a_field_a_newer_release_removed_says_so(api):
    """A record in a layout from the release that dropped one of its fields (the IR's until):
    the error says which release removed it and which have it, not "first appears"."""
    # a record a release removed whole takes its fields with it: not this case
    ends = {name: variants[-1]["record"].get("until") for name, variants in api["nccl"]["record_variants"].items()}
    for name, variants in api["nccl"]["record_variants"].items():
        for variant in variants:
            gone = next((f for f in variant["record"].get("fields", [])
                         if f.get("until") and f["until"] != ends.get(name)), None)
            cls = getattr(nccl, name, None)
            if gone is None or cls is None or gone["until"] not in api["nccl"]["versions"]:
                continue
            record = cls(layout=gone["until"])
            with pytest.raises(NcclInvalid, match=f"NCCL {gone['until']} removed it "
                                                  f"\\(from {gone['since']} to before {gone['until']} it is there\\)"):
                getattr(record, gone["name"])
            return
    pytest.fail("no record field of the IR was removed by a later release")


def test_text_that_is_not_unicode_is_refused_naming_the_field():
    """A lone surrogate has no UTF-8 for NCCL: NcclInvalid naming the field, not UnicodeEncodeError."""
    cfg = nccl.nccl_config_initializer()
    with pytest.raises(NcclInvalid, match="netName is not valid Unicode text"):
        cfg.netName = "\ud800"
