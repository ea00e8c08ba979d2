"""policy/nccl_ep.toml as the generator reads it, against the merged EP API
(bindings/ir/api/nccl_ep.json): the real file loads and covers every EP function; each kind of
mistake (an unknown function, parameter, role, key, rule, symbol, dtype, mode or precondition; a
role whose C type does not fit; a parameter without a role) stops the load with the file, the entry and what
is wrong; the generated ep_checks module holds what the TOML says."""
from __future__ import annotations

import copy
import json
import re
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from generator.ir.types import TypeRef  # noqa: E402
from generator.policy.common import PolicyError  # noqa: E402
from generator.policy.nccl import load_policy  # noqa: E402
from generator.policy.coverage import load_coverage  # noqa: E402
from generator.policy.ep import PolicyError as EpPolicyError, build_ep_policy, parse_dim  # noqa: E402

SPEC = ROOT / "policy" / "nccl_ep.toml"


def _type(d):
    if d is None:
        return None
    return TypeRef(d["kind"], d.get("name"), pointee=_type(d.get("pointee")), element=_type(d.get("element")),
                   length=d.get("length"), const=d.get("const", False), signed=d.get("signed"),
                   size=d.get("size", 0), align=d.get("align", 0))


@pytest.fixture(scope="module")
def ep_api(api):
    """The merged EP API (bindings/ir/api/nccl_ep.json) with the attributes the policy loader reads."""
    d = api["nccl_ep"]
    functions = [SimpleNamespace(name=f["name"], result=_type(f["result"]), snake_name=f.get("snake_name", ""),
                                 params=[SimpleNamespace(name=p["name"], type=_type(p["type"]),
                                                         direction=p.get("direction")) for p in f["params"]])
                 for f in d["functions"]]
    records = [SimpleNamespace(name=name, fields=[SimpleNamespace(name=f["name"], type=_type(f["type"]),
                                                                  doc=f.get("doc", ""))
                                                  for f in variants[-1]["record"]["fields"]])
               for name, variants in d["record_variants"].items()]
    enums = [SimpleNamespace(name=e["name"], values=[SimpleNamespace(name=v["name"], value=v["value"])
                                                      for v in e["values"]]) for e in d["enums"]]
    initializers = [(SimpleNamespace(name=i["name"], record=i["record"]), None) for i in d["initializers"]]
    return SimpleNamespace(library="nccl_ep", functions=functions, records=records, enums=enums,
                           initializers=initializers)


@pytest.fixture()
def raw():
    with open(SPEC, "rb") as f:
        return tomllib.load(f)


def test_the_policy_loads_and_with_the_coverage_file_covers_every_ep_function(ep_api):
    spec = load_policy(ep_api)
    coverage = load_coverage(ep_api)
    assert sorted(c.function for c in coverage) == sorted(fn.name for fn in ep_api.functions)
    generated = {c.function for c in coverage if c.generated}
    assert generated == {m.function for m in spec.methods}
    # every tensor field of every tensor-set record has a rule
    for record in spec.records.values():
        c_record = next(r for r in ep_api.records if r.name == record.c_name)
        pointers = [f.name for f in c_record.fields if f.type.kind == "pointer" and f.type.pointee.name == "ncclEpTensor_t"]
        assert [f for f, _ in record.fields] == pointers


def test_the_coverage_json_is_the_coverage(ep_api):
    written = json.loads((ROOT / "bindings" / "ir" / "coverage" / "nccl_ep.json").read_text())
    assert [f["name"] for f in written["functions"]] == [c.function for c in load_coverage(ep_api)]


def _mutate(raw, path, value):
    node = raw
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return raw


_DELETE = object()

BROKEN = [
    (("methods", "dispatch", "function"), "ncclEpDispatchNope", "[methods.dispatch]: function ncclEpDispatchNope is not in the headers"),
    (("methods", "dispatch", "params", "nope"), "stream", "ncclEpDispatch has no parameter 'nope'"),
    (("methods", "dispatch", "params", "stream"), _DELETE, "no role for ncclEpDispatch's parameter(s) stream"),
    (("methods", "dispatch", "params", "stream"), "streams", "unknown role 'streams'"),
    (("methods", "dispatch", "params", "inputs"), {"role": "tensor", "name": "inputs", "rule": "topk_idx"},
     "'tensor' needs an ncclEpTensor_t *"),
    (("methods", "dispatch", "params", "inputs"), {"role": "tensors", "name": "inputs", "colour": "red"},
     "unknown key(s) ['colour']"),
    (("methods", "dispatch", "owner"), "Nobody", "owner 'Nobody' is not an [owners] entry"),
    (("methods", "dispatch", "params", "handle"), "comm", "'comm' is an ncclComm_t, not ncclEpHandle_t"),
    (("methods", "create_handle", "params", "topk_idx", "rule"), "no_rule", "rule 'no_rule' is not a [tensors] rule"),
    (("methods", "create_handle", "binds", "hidden"), "topk_idx.0", "binds.hidden: not a symbol of source \"handle\""),
    (("methods", "create_handle", "binds", "top_k"), "topk_idx.5", "binds.top_k: 'topk_idx.5' is not"),
    (("methods", "mask_update", "params", "mask", "length"), "nobody", "length 'nobody' is not a symbol"),
    (("methods", "get_version", "params", "version"), {"role": "out", "makes": "Group"},
     "makes = 'Group': the out-pointer is to int"),
    (("methods", "create", "kind"), "factory", "kind must be one of ['method', 'create']"),
    (("tensors", "topk_idx", "dtypes"), "indices", "dtypes 'indices' is not a [dtypes] group"),
    (("tensors", "topk_idx", "shape"), ["num_tokens", "topk"], "'topk' is not a symbol"),
    (("tensors", "topk_idx", "shape"), ["num_tokens", "top_k +1"], "is not a symbol, an int"),
    (("dtypes", "index"), ["int32", "int128"], "'int128' is not an element type name"),
    (("records", "ncclEpDispatchOutputs_t", "fields", "topk_idx", "dtypes"), {"ll_rank_major": "count32", "ll_flat": ["int64"]},
     "[records.ncclEpDispatchOutputs_t].fields.topk_idx: dtypes.ll_flat: not a mode"),
    (("records", "ncclEpDispatchOutputs_t", "fields", "topk_idx", "dtypes"), {"ll_rank_major": "count33", "ht_flat": ["int64"]},
     "[records.ncclEpDispatchOutputs_t].fields.topk_idx: dtypes.ll_rank_major 'count33' is not a [dtypes] group"),
    (("records", "ncclEpDispatchOutputs_t", "fields", "topk_idx", "dtypes"), {"ll_rank_major": "count32", "ht_flat": ["int63"]},
     "[records.ncclEpDispatchOutputs_t].fields.topk_idx: dtypes.ht_flat: 'int63' is not an element type name"),
    (("records", "ncclEpDispatchOutputs_t", "fields", "topk_idx", "dtypes"), {"ll_rank_major": "count32", "ht_flat": []},
     "dtypes.ht_flat: a dtype group is a non-empty list"),
    (("records", "ncclEpDispatchOutputs_t", "fields", "topk_idx", "dtypes"), {"ll_rank_major": "count32"},
     "[records.ncclEpDispatchOutputs_t].fields.topk_idx: dtypes: no element types for mode ht_flat"),
    (("records", "ncclEpLayoutInfo_t", "fields", "expert_counters", "dtypes"), {"ll": "count32"},
     "[records.ncclEpLayoutInfo_t].fields.expert_counters: dtypes: no element types for mode ht_flat"),
    (("records", "ncclEpLayoutInfo_t", "fields", "expert_counters", "dtypes"), {},
     "dtypes: a table by mode needs at least one entry"),
    (("records", "ncclEpDispatchOutputs_t", "fields", "topk_idx", "modes"), ["ll_flat"], "'ll_flat' is not a mode"),
    (("records", "ncclEpDispatchOutputs_t", "fields", "tokens", "shape", "lr_expert_major"), ["hidden"],
     "shape.lr_expert_major: not a mode"),
    (("records", "ncclEpDispatchOutputs_t", "fields", "topk_idx"), _DELETE,
     "no tensor rule for ncclEpDispatchOutputs_t's field(s) topk_idx"),
    (("records", "ncclEpDispatchOutputs_t", "fields", "weights"), {"dtypes": "weight", "doc": "x"},
     "has no tensor field 'weights'"),
    (("records", "ncclEpLayoutInfo_t", "values", "recv_topk_idx_kind"), "ncclEpLayout_t",
     "values.recv_topk_idx_kind: not an ncclEpLayout_t field"),
    (("configs", "ncclEpGroupConfig_t", "positive"), ["num_expertz"], "positive: ncclEpGroupConfig_t has no field 'num_expertz'"),
    (("configs", "ncclEpGroupConfig_t", "nested"), {"alloc": "allocator"}, "nested.alloc: not a allocator field"),
    (("configs", "ncclEpNope_t"), {"class": "Nope", "doc": "x"}, "[configs.ncclEpNope_t]: not a record of the headers"),
    (("symbols", "num_experts", "field"), "experts", "field 'experts' is not a field of ncclEpGroupConfig_t"),
    (("symbols", "num_experts", "source"), "config", "unknown source 'config'"),
    (("limits",), [{"symbol": "top_k", "at_most": "num_experts", "at_least": 1, "doc": "x"}], "needs exactly one of"),
    (("limits",), [{"symbol": "top_k", "at_most": "experts", "doc": "x"}], "'experts' is not a symbol"),
    (("limits",), [{"symbol": "hidden", "multiple_of": 0, "doc": "x"}], "multiple_of takes a symbol or an integer >= 1"),
    (("limits",), [{"symbol": "hidden", "at_most": 4, "doc": "x"}], "at_most takes a symbol, not 4"),
    (("limits",), [{"symbol": "hidden", "multiple_of": 8, "modes": ["ll_flat"], "doc": "x"}],
     "modes: 'll_flat' is not a mode"),
    (("limits",), [{"symbol": "hidden", "multiple_of": 8, "modes": [], "doc": "x"}],
     "modes takes a non-empty list of names"),
    (("limits",), [{"symbol": "hidden", "multiple_of": 8, "methods": ["combyne"], "doc": "x"}],
     "[[limits]] #1: methods: 'combyne' is not a [methods] entry"),
    (("preconditions", "mask", "config"), "enable_masks",
     "[preconditions.mask]: config: 'enable_masks' is not an integer field of ncclEpGroupConfig_t"),
    (("preconditions", "mask", "config"), "alloc", "config: 'alloc' is not an integer field of ncclEpGroupConfig_t"),
    (("preconditions", "mask", "algorithms"), ["low_latency"],
     "algorithms: 'low_latency' is not an algorithm (ll, ht)"),
    (("preconditions", "mask", "algorithms"), [], "[preconditions.mask]: algorithms takes a non-empty list of names"),
    (("preconditions", "mask", "colour"), "red", "[preconditions.mask]: unknown key(s) ['colour']"),
    (("preconditions", "mask"), {"doc": "x"}, "[preconditions.mask]: needs at least one of algorithms, config, set_by"),
    (("preconditions", "mask", "doc"), _DELETE, "[preconditions.mask]: missing key 'doc'"),
    (("preconditions", "mask", "doc"), "", "[preconditions.mask]: doc: a non-empty sentence"),
    (("preconditions", "rdma_buffer", "set_by"), ["create_handel"],
     "[preconditions.rdma_buffer]: set_by: 'create_handel' is not a [methods] entry of a Group or Handle"),
    (("preconditions", "rdma_buffer", "set_by"), ["create"], "set_by: 'create' is not a [methods] entry of a Group"),
    (("preconditions", "rdma_buffer", "set_by"), ["get_version"], "set_by: 'get_version' is not a [methods] entry"),
    (("preconditions", "rdma_buffer", "set_by"), "create_handle", "set_by takes a non-empty list of names"),
    (("methods", "mask_clean", "requires"), ["mask", "rdma"],
     "[methods.mask_clean]: requires: 'rdma' is not a [preconditions] entry (mask, rdma_buffer)"),
    (("methods", "mask_clean", "requires"), ["mask", "mask"],
     "[methods.mask_clean]: requires names a precondition twice"),
    (("methods", "mask_clean", "requires"), "mask",
     "[methods.mask_clean]: requires takes a list of [preconditions] names"),
    (("methods", "get_version", "requires"), ["mask"],
     "[methods.get_version]: requires: only a method of a Group or a Handle has a group to check"),
    (("methods", "create", "requires"), ["mask"], "[methods.create]: requires: only a method of a Group or a Handle"),
    (("owners", "Group", "destroy"), "ncclEpGroupFree", "destroy function ncclEpGroupFree is not in the headers"),
    (("colours",), {}, "unknown section(s) ['colours']"),
    (("enum_aliases", "ncclEpNope_t"), {"A": "B"}, "[enum_aliases.ncclEpNope_t]: not an enum of the headers"),
    (("enum_aliases", "ncclEpPassDir_t", "FWD"), "NCCL_EP_ALGO_LOW_LATENCY",
     "[enum_aliases.ncclEpPassDir_t]: FWD: 'NCCL_EP_ALGO_LOW_LATENCY' is not an enumerator of ncclEpPassDir_t"),
    (("enum_aliases", "ncclEpPassDir_t", "_fwd"), "NCCL_EP_FWD_PASS", "'_fwd' is not a public Python name"),
    (("configs", "ncclEpDispatchConfig_t", "python"), {"quant_recipes": "quantization_recipe"},
     "[configs.ncclEpDispatchConfig_t]: python.quant_recipes: ncclEpDispatchConfig_t has no such field"),
    (("configs", "ncclEpDispatchConfig_t", "python"), {"quant_recipe": "send_only"},
     "python.quant_recipe: ncclEpDispatchConfig_t has no such field, or 'send_only' is not a Python name apart"),
    (("configs", "ncclEpDispatchConfig_t", "booleans"), ["pass_direction"],
     "[configs.ncclEpDispatchConfig_t]: booleans: pass_direction is not an integer field"),
    (("configs", "ncclEpDispatchConfig_t", "booleans"), ["sent_only"], "booleans: ncclEpDispatchConfig_t has no such"),
    (("methods", "complete", "params", "config", "default"), 1,
     "[methods.complete].params.config: default 1: an optional config's default may only be 0"),
    (("methods", "dispatch", "params", "inputs", "default"), 0, "unknown key(s) ['default']"),
    (("row_bytes", 0, "method"), "dispatchh", "[[row_bytes]] #1: method: 'dispatchh' is not a [methods] entry"),
    (("row_bytes", 0, "recipe"), "config.send_only",
     "[[row_bytes]] #1: recipe: 'config.send_only' is not <config argument of dispatch>.<its enum field>"),
    (("row_bytes", 0, "recipe"), "configs.quant_recipe", "recipe: 'configs.quant_recipe' is not <config argument"),
    (("row_bytes", 0, "at_most"), "hidden",
     "[[row_bytes]] #1: at_most: 'hidden' is not a symbol of source \"group_config\""),
    (("row_bytes", 0, "doc"), _DELETE, "[[row_bytes]] #1: missing key 'doc'"),
    (("row_bytes", 0, "colour"), "red", "[[row_bytes]] #1: unknown key(s) ['colour']"),
    (("row_bytes", 0, "recipes"), {}, "[[row_bytes]] #1: recipes: a table { <ncclEpDispQuant_t enumerator>"),
    (("row_bytes", 0, "recipes", "NCCL_EP_COMB_QUANT_NONE"), [{"tensor": "inputs.tokens"}],
     "recipes.NCCL_EP_COMB_QUANT_NONE: not an enumerator of ncclEpDispQuant_t"),
    (("row_bytes", 0, "recipes", "NCCL_EP_DISP_QUANT_NONE"), [], "recipes.NCCL_EP_DISP_QUANT_NONE: a non-empty list"),
    (("row_bytes", 0, "recipes", "NCCL_EP_DISP_QUANT_NONE"), [{"tensor": "outputs.weights"}],
     "recipes.NCCL_EP_DISP_QUANT_NONE: tensor 'outputs.weights' is not <tensors argument of dispatch>.<tensor field>"),
    (("row_bytes", 0, "recipes", "NCCL_EP_DISP_QUANT_NONE"), [{"tensor": "config.tokens"}],
     "tensor 'config.tokens' is not <tensors argument of dispatch>"),
    (("row_bytes", 0, "recipes", "NCCL_EP_DISP_QUANT_NONE"), [{"tensor": "inputs.tokens", "per": 0}],
     "recipes.NCCL_EP_DISP_QUANT_NONE: per takes an integer >= 1, not 0"),
    (("row_bytes", 0, "recipes", "NCCL_EP_DISP_QUANT_NONE"), [{"tensor": "inputs.tokens", "dtype": "int128"}],
     "'int128' is not an element type name"),
    (("row_bytes", 0, "recipes", "NCCL_EP_DISP_QUANT_NONE"), [{"tensor": "inputs.tokens", "bytes": 2}],
     "unknown key(s) ['bytes']"),
]


@pytest.mark.parametrize("path, value, message", BROKEN,
                         ids=[".".join(map(str, b[0])) + f"={b[1]!r}"[:40] for b in BROKEN])
def test_a_broken_entry_stops_the_load_naming_the_file_and_what_is_wrong(ep_api, raw, path, value, message):
    with pytest.raises(EpPolicyError) as e:
        build_ep_policy(_mutate(copy.deepcopy(raw), path, value), ep_api)
    assert str(e.value).startswith("nccl_ep.toml:"), str(e.value)
    assert message in str(e.value), str(e.value)


def test_load_policy_reports_an_ep_mistake_as_the_policy_error(ep_api, tmp_path, raw):
    broken = SPEC.read_text().replace('function = "ncclEpDispatch"', 'function = "ncclEpDispatchX"')
    path = tmp_path / "nccl_ep.toml"
    path.write_text(broken)
    with pytest.raises(PolicyError, match=r"nccl_ep.toml:\[methods.dispatch\]: function ncclEpDispatchX"):
        load_policy(ep_api, path)


def test_dimensions_parse():
    assert parse_dim("num_ranks * max_dispatch_tokens_per_rank") == \
        ("mul", ("sym", "num_ranks"), ("sym", "max_dispatch_tokens_per_rank"))
    assert parse_dim(1) == ("int", 1) and parse_dim("*") == ("any",) and parse_dim("hidden") == ("sym", "hidden")
    with pytest.raises(ValueError):
        parse_dim("a + b")


# A value of every symbol that keeps every limit of the policy (test_every_limit_... proves it).
GOOD_SYMBOLS = {"num_ranks": 2, "num_experts": 8, "max_dispatch_tokens_per_rank": 16, "max_token_bytes": 1 << 20,
                "num_local_experts": 4, "num_tokens": 5, "top_k": 2, "hidden": 1024, "num_recv_slots": 40,
                "scale_elems": 8}


def _fake_tensor(dtype: str, shape: tuple, device: int = 0) -> SimpleNamespace:
    return SimpleNamespace(dtype=SimpleNamespace(dtype_name=dtype), shape=tuple(shape), device=device)


def _extent(dim: tuple, symbols: dict) -> int:
    kind = dim[0]
    if kind == "int":
        return dim[1]
    if kind == "sym":
        return symbols[dim[1]]
    if kind == "mul":
        return _extent(dim[1], symbols) * _extent(dim[2], symbols)
    return 3  # "*": any extent


def _rule_checks(spec):
    """(the generated check's name, the rule's label, the rule) of every tensor rule."""
    from generator.render.policy_python import snake
    out = [(f"tensor_{name}", name, rule) for name, rule in spec.tensors.items()]
    for record in spec.records.values():
        out += [(f"{snake(record.class_name)}_{field}", f"{record.class_name}.{field}", rule)
                for field, rule in record.fields]
    return out


def test_every_method_and_rule_has_its_generated_code(ep_api):
    from ncclbind.ep._generated import checks as ep_checks, methods as ep_methods
    spec = load_policy(ep_api)
    for m in spec.methods:  # each method its own code, on its owner (a module function: the module)
        owner = ep_methods if spec.owners[m.owner].handle is None else getattr(ep_methods, f"{m.owner}Methods")
        assert callable(getattr(owner, m.name, None)), f"{m.owner}.{m.name} is not generated"
    for function, label, _ in _rule_checks(spec):
        assert callable(getattr(ep_checks, function, None)), f"{label}: {function} is not generated"
    for name in spec.preconditions:
        assert callable(getattr(ep_checks, f"require_{name}", None))
    assert not [n for n in vars(ep_checks) if n.isupper() and n not in ("MODES", "TYPE_CHECKING")], \
        "a rule table in the generated checks: each rule is its own code"


def test_each_generated_tensor_check_is_its_rule_in_every_mode(ep_api):
    """Every tensor rule of the policy, in every mode and with no mode: a tensor of the rule's
    element type and shape passes (binding the call's symbols it is the first to give), and each
    departure is refused naming the argument: another element type, another rank, each extent
    off by one, another device, a mode the tensor is not for. The policy (generator/policy/ep.py) says
    what is right; the generated code (ep/_generated/checks.py) is what runs."""
    from ncclbind.ep._generated import checks as ep_checks
    from ncclbind.errors import NcclInvalid
    from generator.policy.ep import DTYPE_NAMES, MODES
    spec = load_policy(ep_api)
    call_symbols = {name for name, s in spec.symbols.items() if s.source == "call"}
    assert set(GOOD_SYMBOLS) == set(spec.symbols)
    checked = 0
    for function, label, rule in _rule_checks(spec):
        check = getattr(ep_checks, function)
        for mode in rule.refused_modes:
            with pytest.raises(NcclInvalid, match=f"^x: not used in {mode} "):
                check(_fake_tensor(rule.all_dtypes[0], (1,)), "x", dict(GOOD_SYMBOLS), mode, 0, "dispatch")
        for mode in [m for m in MODES if rule.allowed_in(m)] + [None]:
            dtypes = rule.dtypes_for(mode)
            shape = rule.shapes.get("any") if mode is None else rule.shape_for(mode)
            dims = [parse_dim(d) for d in shape or ()]
            extents = [_extent(d, GOOD_SYMBOLS) for d in dims] if shape else [7]
            symbols = dict(GOOD_SYMBOLS)
            check(_fake_tensor(dtypes[-1], extents), "x", symbols, mode, 0, "dispatch")
            assert symbols == GOOD_SYMBOLS
            unbound = {k: v for k, v in GOOD_SYMBOLS.items() if k not in call_symbols}
            check(_fake_tensor(dtypes[0], extents), "x", unbound, mode, 0, "dispatch")
            assert unbound == {k: v for k, v in GOOD_SYMBOLS.items()
                               if k not in call_symbols or any(k in d for d in dims)}, (label, mode)
            bad = next(d for d in sorted(DTYPE_NAMES) if d not in dtypes)
            where = f" in {mode}" if mode is not None and rule.by_mode else ""
            with pytest.raises(NcclInvalid, match=f"^x: dtype {bad}, expected {' or '.join(dtypes)}{where} "):
                check(_fake_tensor(bad, extents), "x", dict(GOOD_SYMBOLS), mode, 0, "dispatch")
            with pytest.raises(NcclInvalid, match="^x is on CUDA device 1, the EP group on device 0"):
                check(_fake_tensor(dtypes[0], extents, device=1), "x", dict(GOOD_SYMBOLS), mode, 0, "dispatch")
            if shape is None:
                check(_fake_tensor(dtypes[0], (1, 2, 3)), "x", dict(GOOD_SYMBOLS), mode, 0, "dispatch")
                continue
            with pytest.raises(NcclInvalid, match=f"^x: {len(dims) + 1}-D tensor of shape"):
                check(_fake_tensor(dtypes[0], extents + [1]), "x", dict(GOOD_SYMBOLS), mode, 0, "dispatch")
            for index, dim in enumerate(dims):
                if dim[0] == "any":
                    continue
                off = list(extents)
                off[index] += 1
                with pytest.raises(NcclInvalid, match=f"extent {index} is {off[index]}, but "):
                    check(_fake_tensor(dtypes[0], off), "x", dict(GOOD_SYMBOLS), mode, 0, "dispatch")
                checked += 1
    assert checked > 20


def test_every_limit_is_generated_where_its_symbols_become_known(ep_api):
    """Each generated limit check (one per set of symbols that becomes known together) refuses
    each of its limits when broken, naming the argument and the limit's reason, and only in the
    limit's modes and methods; the symbols every other test uses keep every limit."""
    from ncclbind.ep._generated import checks as ep_checks
    from ncclbind.errors import NcclInvalid
    from generator.render.policy_python import ep_check_plan
    from generator.policy.ep import MODES
    spec = load_policy(ep_api)
    sets = ep_check_plan(spec)["limit_sets"]
    seen = set()
    for name, (_symbols, involved, _reads) in sets.items():
        check = getattr(ep_checks, name)
        for mode in MODES:
            for method in {m.name for m in spec.methods}:
                check(dict(GOOD_SYMBOLS), "x", mode, method)
        for limit in involved:
            broken = dict(GOOD_SYMBOLS)
            bound = limit.bound if type(limit.bound) is int else broken[limit.bound]
            broken[limit.symbol] = {"at_most": bound + 1, "at_least": bound - 1, "multiple_of": bound + 1}[limit.kind]
            mode = limit.modes[0] if limit.modes else None
            method = limit.methods[0] if limit.methods else None
            with pytest.raises(NcclInvalid, match=f"^x: {limit.symbol} = .*\\({re.escape(limit.doc)}\\)$"):
                check(broken, "x", mode, method)
            if limit.modes:
                outside = next(m for m in MODES if m not in limit.modes)
                check(broken, "x", outside, method)
                check(broken, "x", None, method)
            if limit.methods:
                check(broken, "x", mode, "no such method")
            edge = dict(GOOD_SYMBOLS)  # the limit's edge keeps it; for a multiple, half of it breaks it
            edge[limit.symbol] = bound * (2 if limit.kind == "multiple_of" else 1)
            try:
                check(edge, "x", mode, method)
            except NcclInvalid as other:  # another limit of the set may object; not this one
                assert limit.doc not in str(other)
            if limit.kind == "multiple_of" and bound % 2 == 0:
                edge[limit.symbol] = bound // 2
                with pytest.raises(NcclInvalid, match=re.escape(limit.doc)):
                    check(edge, "x", mode, method)
            seen.add(spec.limits.index(limit))
    assert seen == set(range(len(spec.limits)))


def test_the_token_row_rules_are_the_headers_recipes(ep_api):
    """[[row_bytes]]: dispatch's row by ncclEpDispQuant_t (NONE: the tokens; QUANT_FWD: tokens and
    scales; DS_FP8E3M4: a byte per element and a float32 scale per 128 elements), combine's by
    ncclEpCombQuant_t (NONE only: NVFP4's row is not in the header), each at most the group's
    max_token_bytes, a GroupConfig field."""
    spec = load_policy(ep_api)
    assert spec.symbols["max_token_bytes"].source == "group_config"
    assert spec.symbols["max_token_bytes"].field == "max_token_bytes"
    rules = {r.method: r for r in spec.row_bytes}
    assert set(rules) == {"dispatch", "combine"}
    terms = {name: [(t.tensor, t.per, t.dtype) for t in ts] for name, _, ts in rules["dispatch"].recipes}
    assert terms == {"NCCL_EP_DISP_QUANT_NONE": [("inputs.tokens", 1, None)],
                     "NCCL_EP_DISP_QUANT_FWD": [("inputs.tokens", 1, None), ("inputs.scales", 1, None)],
                     "NCCL_EP_DISP_QUANT_DS_FP8E3M4": [("inputs.tokens", 1, "float8_e4m3fn"),
                                                       ("inputs.tokens", 128, "float32")]}
    assert [name for name, _, _ in rules["combine"].recipes] == ["NCCL_EP_COMB_QUANT_NONE"]
    for r in rules.values():
        assert (r.config, r.field, r.at_most, r.tensors[0]) == ("config", "quant_recipe", "max_token_bytes",
                                                                "inputs.tokens")
        enum = next(e for e in ep_api.enums if e.name == r.enum)
        assert all(value == next(v.value for v in enum.values if v.name == name) for name, value, _ in r.recipes)


def test_a_precondition_is_met_by_its_config_field_or_its_set_by_methods(ep_api, raw):
    """set_by inverts to what each method satisfies; a precondition with neither config nor set_by
    holds from creation for the algorithms it names."""
    changed = copy.deepcopy(raw)
    changed["preconditions"]["ll_only"] = {"algorithms": ["ll"], "doc": "a low-latency group"}
    changed["preconditions"]["after_update"] = {"set_by": ["update", "create_handle"], "doc": "routing given"}
    changed["methods"]["dispatch"]["requires"] = ["after_update", "ll_only"]
    spec = build_ep_policy(changed, ep_api)
    assert spec.preconditions["ll_only"].holds_from_creation
    assert not spec.preconditions["after_update"].holds_from_creation
    assert spec.satisfies("update") == ("after_update",)
    assert set(spec.satisfies("create_handle")) == {"after_update"} | set(
        p.name for p in load_policy(ep_api).preconditions.values() if "create_handle" in p.set_by)
    assert next(m for m in spec.methods if m.name == "dispatch").requires == ("after_update", "ll_only")


def test_dtypes_by_mode_are_looked_up_as_shapes_are(ep_api, raw):
    """A dtypes table is read by the exact mode, then the algorithm, then any; a call without a
    mode accepts every type of the table. The rules libnccl_ep 0.2.0 asserts (received ids, LL
    expert-major and HT flat counters) are the policy's; what the headers say of them is in the TOML."""
    spec = load_policy(ep_api)
    ids = dict(spec.records["ncclEpDispatchOutputs_t"].fields)["topk_idx"]
    assert ids.dtypes_for("ll_rank_major") == ("int32",) and ids.dtypes_for("ht_flat") == ("int64",)
    assert ids.dtypes_for(None) == ("int32", "int64") and ids.by_mode
    counters = dict(spec.records["ncclEpLayoutInfo_t"].fields)["expert_counters"]
    assert [counters.dtypes_for(m) for m in ("ll_expert_major", "ll_rank_major", "ht_flat", "ht_expert_major")] == \
        [("int32",), ("int32", "int64"), ("int32",), ("int32", "int64")]
    by_algorithm = copy.deepcopy(raw)
    by_algorithm["records"]["ncclEpLayoutInfo_t"]["fields"]["expert_counters"]["dtypes"] = \
        {"ht_flat": ["int64"], "ht": "count32", "any": ["int64"]}
    counters = dict(build_ep_policy(by_algorithm, ep_api).records["ncclEpLayoutInfo_t"].fields)["expert_counters"]
    assert [counters.dtypes_for(m) for m in ("ll_expert_major", "ht_flat", "ht_expert_major")] == \
        [("int64",), ("int64",), ("int32",)]
    assert counters.dtypes_text() == "ht_flat: int64; ht: int32; otherwise: int64"
    plain = spec.tensors["topk_idx"]
    assert not plain.by_mode and plain.dtypes_for("ht_flat") == plain.dtypes_for(None) == ("int32", "int64")


def test_the_nccl_ep_spellings_are_data_checked_against_the_headers(ep_api, raw):
    """nccl-extensions 0.1.0's nccl.ep names: enum aliases (each a C enumerator of its enum), the
    configs' Python keywords and on/off fields, complete's config default 0."""
    spec = build_ep_policy(copy.deepcopy(raw), ep_api)
    enums = {e.name: {v.name for v in e.values} for e in ep_api.enums}
    assert spec.enum_aliases["ncclEpAlgorithm_t"] == (("LOW_LATENCY", "NCCL_EP_ALGO_LOW_LATENCY"),
                                                      ("HIGH_THROUGHPUT", "NCCL_EP_ALGO_HIGH_THROUGHPUT"))
    for c_enum, pairs in spec.enum_aliases.items():
        assert all(enumerator in enums[c_enum] for _, enumerator in pairs)
    fields = {f.name: f for f in spec.configs["ncclEpDispatchConfig_t"].fields}
    assert (fields["quant_recipe"].keyword, fields["send_only"].boolean, fields["pass_direction"].boolean) == \
        ("quantization_recipe", True, False)
    complete = next(m for m in spec.methods if m.name == "complete")
    assert complete.role("config").default == 0
