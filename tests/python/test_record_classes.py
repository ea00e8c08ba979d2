"""nccl4py 0.6.0's record classes (NCCLConfig, NCCLCollConfig, NCCLCommProperties, NCCLTeam,
TeamRequirement, NCCLDevCommRequirements, the handle views), generated from
policy/python_api.toml [records] over the IR's structs: their field names and defaults,
the strict error for a field the loaded layout lacks, the round trip into the C struct of the
loaded layout, and the structs NCCL fills read back. Every layout fact is read from the merged
IR (the api fixture) or the extension's layouts."""
import inspect
import json
import os
import subprocess
import sys

import pytest

import ncclbind
import ncclbind._nccl as nccl
from ncclbind.base.config import as_struct, comm_config, record_struct
from ncclbind.core.dev_comm import requirements_struct
from ncclbind.errors import NcclInvalid

STAMPS = {"size", "magic", "version"}


def c_fields(api, struct):
    """Every field of any layout of `struct` in the merged IR: {name: since}."""
    out = {}
    for variant in api["nccl"]["record_variants"][struct]:
        for f in variant["record"]["fields"]:
            out.setdefault(f["name"], f["since"])
    return out


def loaded_fields(struct):
    cls = getattr(nccl, struct)
    version = cls().layout_version
    return next(layout["fields"] for layout in cls.layouts if layout["version"] == version)


def newer_field(api, cls):
    """(C name, since) of a field of record class `cls` newer than the loaded library, or None."""
    loaded = nccl.get_version()
    codes = api["nccl"]["version_codes"]
    return next(((name, since) for name, since in c_fields(api, cls.C_STRUCT).items()
                 if codes[since] > loaded and name in cls.C_NAMES.values()), None)


# ---- names and defaults ---------------------------------------------------------------------------

def test_field_names_are_nccl4pys(api):
    config = ncclbind.NCCLConfig
    # not the mechanical snake_case of the C names (min_ct_as): python_api.toml [records] names them
    assert {"min_ctas", "max_ctas", "nvls_ctas", "cta_policy", "comm_name", "cga_cluster_size",
            "n_channels_per_net_peer"} <= set(config.__dataclass_fields__)
    assert config.C_NAMES["min_ctas"] == "minCTAs" and config.C_NAMES["cta_policy"] == "CTAPolicy"
    reqs = ncclbind.NCCLDevCommRequirements
    assert reqs.C_NAMES["lsa_ll_a2a_block_count"] == "lsaLLA2ABlockCount"
    assert reqs.C_NAMES["lsa_ll_a2a_slot_count"] == "lsaLLA2ASlotCount"
    assert ncclbind.MultimemHandle.C_NAMES == {"mc_base_pointer": "mcBasePtr"}
    assert "available_gin_types" in ncclbind.NCCLCommProperties.__dataclass_fields__
    # every C field but the stamp (and the lists, which are tuples) is a field, from the IR
    for cls, lists in ((ncclbind.NCCLConfig, set()), (ncclbind.NCCLCollConfig, {"ext"}),
                       (ncclbind.NCCLDevCommRequirements, {"teamRequirementsList", "resourceRequirementsList"})):
        assert set(cls.C_NAMES.values()) == set(c_fields(api, cls.C_STRUCT)) - STAMPS - lists, cls.__name__
        assert set(cls.SEQUENCES.values()) == lists


def test_defaults_are_nccl4pys(api):
    for cls in (ncclbind.NCCLConfig, ncclbind.NCCLCollConfig, ncclbind.NCCLDevCommRequirements):
        params = inspect.signature(cls).parameters.values()
        named = [p for p in params if p.kind == p.KEYWORD_ONLY]
        assert named and all(p.default == (() if p.name in cls.SEQUENCES else None) for p in named), cls.__name__
    assert list(inspect.signature(ncclbind.NCCLDevCommRequirements).parameters)[-3:] == ["teams", "resources",
                                                                                         "c_fields"]
    team = inspect.signature(ncclbind.NCCLTeam).parameters
    assert list(team) == ["n_ranks", "rank", "stride"] and all(p.default is p.empty for p in team.values())
    assert inspect.signature(ncclbind.TeamRequirement).parameters["multimem"].default is False
    # NCCLCommProperties: the oldest layout's fields are required, the newer ones None
    first = api["nccl"]["record_variants"]["ncclCommProperties_t"][0]["versions"][0]
    since = c_fields(api, "ncclCommProperties_t")
    props = inspect.signature(ncclbind.NCCLCommProperties).parameters
    for name, c_name in ncclbind.NCCLCommProperties.C_NAMES.items():
        assert (props[name].default is props[name].empty) == (since[c_name] == first), name
    assert props["available_gin_types"].default is None


def test_c_names_are_accepted_too(on_release_with):
    if on_release_with(struct="ncclDevCommRequirements_t", fields=["lsaBarrierCount", "ginContextCount",
                                                                    "ginSignalCount"]):
        return
    reqs = ncclbind.NCCLDevCommRequirements(lsa_barrier_count=1, ginContextCount=2)
    reqs.ginSignalCount = 3
    assert (reqs.lsaBarrierCount, reqs.gin_context_count, reqs.gin_signal_count) == (1, 2, 3)
    with pytest.raises(TypeError, match="unexpected keyword"):
        ncclbind.NCCLDevCommRequirements(noSuchField=1)
    with pytest.raises(TypeError, match="twice"):
        ncclbind.NCCLDevCommRequirements(lsa_barrier_count=1, lsaBarrierCount=2)


def test_unknown_attributes_raise_attribute_error():
    reqs = ncclbind.NCCLDevCommRequirements()
    assert not hasattr(reqs, "no_such_field") and hasattr(reqs, "gin_context_count")
    with pytest.raises(AttributeError):
        reqs.no_such_field = 1


def test_vendor_option_takes_exactly_one_value():
    assert ncclbind.VendorOption(1, 2, int_value=3) == ncclbind.VendorOption(1, 2, int_value=3)
    for values in ({}, {"int_value": 1, "raw_value": 2}):
        with pytest.raises(NcclInvalid, match="exactly one"):
            ncclbind.VendorOption(1, 2, **values)


# ---- strict: a field the loaded layout lacks --------------------------------------------------------

def test_a_field_the_loaded_layout_lacks_raises_naming_its_release(api):
    found = newer_field(api, ncclbind.NCCLConfig)
    if found is None:
        pytest.skip("the loaded libnccl has every ncclConfig_t field")
    c_name, since = found
    name = next(n for n, c in ncclbind.NCCLConfig.C_NAMES.items() if c == c_name)
    with pytest.raises(NcclInvalid) as info:
        ncclbind.NCCLConfig(**{name: 1})
    assert name in str(info.value) and c_name in str(info.value) and since in str(info.value)
    assert info.value.argument == name
    config = ncclbind.NCCLConfig()
    with pytest.raises(NcclInvalid, match=since):
        setattr(config, name, 1)
    setattr(config, name, None)  # None: NCCL's default, in every layout
    assert comm_config(config) is not None


def test_a_struct_newer_than_the_loaded_library_lacks_every_field(api):
    first = api["nccl"]["record_variants"]["ncclCollConfig_t"][0]
    if nccl.get_version() >= first["version_code"]:
        pytest.skip("the loaded libnccl has ncclCollConfig_t")
    with pytest.raises(NcclInvalid, match=first["versions"][0]):
        ncclbind.NCCLCollConfig(min_ctas=2)
    ncclbind.NCCLCollConfig()  # nothing set: nothing to refuse


# ---- round trip into the loaded layout --------------------------------------------------------------

def test_config_round_trip_in_the_loaded_layout(on_release_with):
    if on_release_with(struct="ncclConfig_t", fields=["minCTAs", "maxCTAs", "commName", "blocking", "CTAPolicy"]):
        return
    config = ncclbind.NCCLConfig(min_ctas=2, comm_name="trainer", blocking=False, cta_policy=ncclbind.CTAPolicy(0))
    struct = comm_config(config)
    default = nccl.nccl_config_initializer()
    assert isinstance(struct, nccl.ncclConfig_t)
    assert (struct.layout_version, struct.version) == (default.layout_version, default.version)
    assert (struct.minCTAs, struct.commName, struct.blocking, struct.CTAPolicy) == (2, "trainer", 0, 0)
    assert struct.maxCTAs == default.maxCTAs  # unset: the initializer's value
    # keywords beside the record, and the dict and keyword forms, name the same fields
    assert comm_config(config, max_ctas=4).maxCTAs == 4
    assert comm_config({"min_ctas": 3}).minCTAs == 3
    assert comm_config(ncclbind.NCCLConfig()) is not None


def test_team_from_and_to_its_struct():
    struct = nccl.ncclTeam_t(nRanks=4, rank=1, stride=2)
    team = ncclbind.NCCLTeam.from_struct(struct)
    assert team == ncclbind.NCCLTeam(4, 1, 2) and hash(team) == hash(ncclbind.NCCLTeam(4, 1, 2))
    assert (team.n_ranks, team.nRanks, team.rank, team.stride) == (4, 4, 1, 2)
    back = as_struct(team, "team")
    assert isinstance(back, nccl.ncclTeam_t) and bytes(back) == bytes(struct)
    with pytest.raises(NcclInvalid, match="ncclTeam_t"):
        ncclbind.NCCLTeam.from_struct(nccl.ncclConfig_t())
    with pytest.raises(Exception):
        team.rank = 0  # frozen


def test_team_is_taken_where_an_ncclTeam_t_is():
    from ncclbind.base import argument_checks
    checked = argument_checks.record(ncclbind.NCCLTeam(2, 0, 1), "team", nccl.ncclTeam_t)
    assert isinstance(checked, nccl.ncclTeam_t) and (checked.nRanks, checked.rank, checked.stride) == (2, 0, 1)
    with pytest.raises(NcclInvalid, match="not a rank of team"):
        argument_checks.rank_of(2, "rank", "int", -2 ** 31, 2 ** 31 - 1, checked, "team")


def test_comm_properties_from_each_layout(api):
    for variant in api["nccl"]["record_variants"]["ncclCommProperties_t"]:
        struct = nccl.ncclCommProperties_t(layout=variant["versions"][0])
        struct.nRanks = 8
        fields = {f["name"] for f in variant["record"]["fields"]}
        if "ginSupport" in fields:
            struct.ginSupport = [False, True] + [False] * (len(struct.ginSupport) - 2)
        props = ncclbind.NCCLCommProperties.from_struct(struct)
        assert props.n_ranks == 8 and props.nRanks == 8
        assert isinstance(props.gin_type, ncclbind.NcclGinType)
        for name, c_name in ncclbind.NCCLCommProperties.C_NAMES.items():
            assert (getattr(props, name) is None) == (c_name not in fields), (variant["versions"], name)
        if "ginSupport" in fields:
            assert props.available_gin_types == frozenset({ncclbind.NcclGinType(1)})
        else:
            assert props.available_gin_types is None


def test_handle_views_read_the_struct_nccl_writes():
    with pytest.raises(TypeError):
        ncclbind.LsaBarrierHandle()
    struct = nccl.ncclLsaBarrierHandle_t()
    view = ncclbind.LsaBarrierHandle.from_struct(struct)
    struct.nBarriers = 4  # NCCL writes it later: the view reads it live
    assert view.n_barriers == 4 and view.buf_handle == 0 and view.struct is struct
    assert view == ncclbind.LsaBarrierHandle.from_struct(struct) and repr(view).startswith("LsaBarrierHandle(")
    multimem = nccl.ncclMultimemHandle_t()
    multimem.mcBasePtr = 0x1000
    assert ncclbind.MultimemHandle.from_struct(multimem).mc_base_pointer == 0x1000
    assert ncclbind.LLA2AHandle.from_struct(nccl.ncclLLA2AHandle_t()).n_slots == 0
    assert ncclbind.GinBarrierHandle.from_struct(nccl.ncclGinBarrierHandle_t()).signal0 == 0
    with pytest.raises(NcclInvalid):
        ncclbind.LLA2AHandle.from_struct(struct)


# ---- device communicator requirements ---------------------------------------------------------------

def _chain(address, record_class):
    out = []
    while address:
        node = record_class.from_address(address)
        out.append(node)
        address = node.next
    return out


def test_requirements_link_teams_and_resources(on_release_with):
    if on_release_with(struct="ncclDevCommRequirements_t", fields=["lsaBarrierCount", "lsaLLA2ABlockCount",
                                                                    "teamRequirementsList", "resourceRequirementsList"]):
        return
    world, lsa = ncclbind.NCCLTeam(4, 1, 1), ncclbind.NCCLTeam(2, 1, 1)
    reqs = ncclbind.NCCLDevCommRequirements(
        lsa_barrier_count=2, lsa_ll_a2a_block_count=3,
        teams=(ncclbind.TeamRequirement(world), ncclbind.TeamRequirement(lsa, multimem=True),
               ncclbind.TeamRequirement(world, multimem=True)),  # merged with the first: one node, multimem
        resources=(ncclbind.LsaBarrierRequirement(lsa, 4), ncclbind.LLA2ARequirement(2, 64, 8)))
    struct, multimem, handles = requirements_struct(None, reqs)
    assert (struct.lsaBarrierCount, struct.lsaLLA2ABlockCount) == (2, 3)
    teams = _chain(struct.teamRequirementsList, nccl.ncclTeamRequirements_t)
    assert [(t.team.nRanks, bool(t.multimem)) for t in teams] == [(4, True), (2, True)]
    assert set(multimem) == {world, lsa}
    assert [t.outMultimemHandle for t in teams] == [multimem[world].address, multimem[lsa].address]
    nodes = _chain(struct.resourceRequirementsList, nccl.ncclDevResourceRequirements_t)
    assert len(nodes) == 2
    assert [type(h).__name__ for h in handles] == ["ncclLsaBarrierHandle_t", "ncclLLA2AHandle_t"]
    with pytest.raises(NcclInvalid, match="resources"):
        requirements_struct(None, ncclbind.NCCLDevCommRequirements(resources=(ncclbind.NCCLTeam(1, 0, 1),)))
    with pytest.raises(NcclInvalid, match="teams"):
        requirements_struct(None, ncclbind.NCCLDevCommRequirements(teams=(world,)))


def test_requirements_fields_the_loaded_layout_lacks_raise(api):
    found = newer_field(api, ncclbind.NCCLDevCommRequirements)
    if found is None:
        pytest.skip("the loaded libnccl has every ncclDevCommRequirements_t field")
    c_name, since = found
    with pytest.raises(NcclInvalid, match=since):
        ncclbind.NCCLDevCommRequirements(**{c_name: 1})


# ---- a newer layout: the stand-in claiming the newest release ---------------------------------------

NEWEST_SCRIPT = r"""
import json
import ncclbind
from ncclbind.base.config import as_struct
config = ncclbind.NCCLCollConfig(min_ctas=2, alg_selection="ring", launch_completion_event=0x1234,
                                 vendor_options=(ncclbind.VendorOption(7, 1, int_value=5),
                                                 ncclbind.VendorOption(7, 2, str_value="x")))
s = as_struct(config, "config")
nodes, address = [], s.ext
while address:
    node = ncclbind._nccl.ncclConfigExt_t.from_address(address)
    # a union: read the member each option set (val.s of an int would be read as an address)
    nodes.append([node.key.vendorId, node.key.optionId, node.val.s if len(nodes) else node.val.i])
    address = node.next
try:
    ncclbind.NCCLCollConfig(vendor_options=ncclbind.VendorOption(7, 1, int_value=5)).min_ctas
    as_struct(ncclbind.NCCLCollConfig(vendor_options=ncclbind.VendorOption(7, 1, int_value=5)), "config")
    refused = False
except ncclbind.NcclInvalid:
    refused = True
print(json.dumps({"layout": s.layout_version, "min": s.minCTAs, "alg": s.algSelection,
                  "event": s.launchCompletionEvent, "nodes": nodes, "refused": refused,
                  "nvls_host_mode": ncclbind.NCCLConfig(nvls_host_mode=1).nvls_host_mode}))
"""


def test_coll_config_round_trip_in_the_newest_layout(api, tmp_path):
    from stand_ins import given_or_built
    fake = given_or_built("NCCLBIND_FAKE_NCCL", tmp_path / "libnccl.so.2",
                          ["-O1", "-fvisibility=hidden", os.path.join(os.path.dirname(__file__), "fake_nccl.c")])
    newest = api["nccl"]["versions"][-1]
    env = dict(os.environ, NCCLBIND_NCCL_PATH=fake, CUDA_VISIBLE_DEVICES="",
               NCCLBIND_FAKE_NCCL_VERSION=str(api["nccl"]["version_codes"][newest]),
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run([sys.executable, "-c", NEWEST_SCRIPT], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["layout"] == api["nccl"]["record_variants"]["ncclCollConfig_t"][-1]["versions"][0]
    assert (got["min"], got["alg"], got["event"]) == (2, "ring", 0x1234)
    assert got["nodes"] == [[7, 1, 5], [7, 2, "x"]]
    assert got["refused"] and got["nvls_host_mode"] == 1


def test_documented_ranges_and_flags_are_refused_before_nccl():
    """Every int field with a documented range (python_api.toml's ranges) and every flag field (a
    flag group) of an input record: a value past either end, a negative one or an unknown flag is
    NcclInvalid naming the field, set as an attribute or passed in a dict of C names; the ends
    themselves and every flag or-ed are taken. Fields the loaded layout lacks are refused for that
    first (test_fields_newer_than_the_library...), so only the loaded layout's are tried."""
    from ncclbind._generated import nccl_records
    classes = {cls.C_STRUCT: cls for cls in vars(nccl_records).values()
               if isinstance(cls, type) and hasattr(cls, "SINCE")}
    rules = [(c_struct, c_name, (lo, hi), (lo - 1, hi + 1))
             for c_struct, fields in nccl_records.DOCUMENTED_RANGES.items() for c_name, (lo, hi) in fields.items()]
    rules += [(c_struct, c_name, (0, mask), (-1, (mask + 1) << 1 | mask))
              for c_struct, fields in nccl_records.DOCUMENTED_FLAGS.items() for c_name, (mask, _) in fields.items()]
    tried = 0
    for c_struct, c_name, good, bad in rules:
        cls = classes[c_struct]
        name = {c: n for n, c in cls.C_NAMES.items()}[c_name]
        if c_name not in nccl_records._loaded_layout(c_struct)[1]:
            continue
        for value in good:
            assert getattr(cls(**{name: value}), name) == value
        for value in bad:
            with pytest.raises(NcclInvalid, match=f"{c_struct}.{c_name} {value} is out of range") as e:
                cls(**{name: value})
            assert e.value.argument == name
            if c_struct == "ncclConfig_t":
                with pytest.raises(NcclInvalid, match="is out of range") as e:
                    comm_config({c_name: value})
                assert e.value.argument == c_name
        tried += 1
    assert tried, f"no documented field is in the loaded layouts: {rules}"
