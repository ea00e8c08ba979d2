"""The device API's C ABI as the IR and the generator see it: every C-callable device function
of a release's device headers in the IR with `since` from the merge, the policy
(policy/device_wrapper.toml) checked against the IR, and the per-release wrappers
leaving out exactly what a release's IR cannot provide. Facts come from bindings/ir/; nothing
here names a version."""
import json
import os
import re
import sys
from pathlib import Path

REPO = Path(os.path.abspath(__file__)).parent.parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bindings" / "python"))

import pytest  # noqa: E402

from generator.contract.ir_json import ir_from_json  # noqa: E402
from generator.header_sets import load_header_sets  # noqa: E402
from generator.passes.capabilities import interface_functions  # noqa: E402
from generator.passes.merge import merge_library, version_key  # noqa: E402
from generator.policy import device_wrapper as policy_module  # noqa: E402
from generator.policy.device_wrapper import (DeviceWrapperPolicyError, load_device_wrapper,  # noqa: E402
                                           plan_releases, release_names)

IR_DIR = REPO / "bindings" / "ir"


def load_set(hs):
    return ir_from_json(json.loads((IR_DIR / f"{hs.name}.json").read_text()))


# The releases with a device API, as their IR says (capability device_api): the others get no wrapper.
SETS = [hs for hs in load_header_sets() if hs.default and hs.library == "nccl"
        and "device_api" in json.loads((IR_DIR / f"{hs.name}.json").read_text()).get("capabilities", [])]
IRS = sorted((load_set(hs) for hs in SETS), key=lambda ir: version_key(ir.version))
API = merge_library(IRS)
MERGED = json.loads((IR_DIR / "api" / "nccl.json").read_text())


def test_each_sets_c_abi_is_what_its_device_headers_declare():
    """The non-inline device functions of a set are declared in the headers its IR names as its
    device_headers (read from what they declare), a set with none has none, and each interface
    capability (device_c_abi: the C ABI the wrapper renders; device_ir: NCCL's ncclIr*) holds
    exactly where its functions are declared."""
    assert any("device_c_abi" in ir.capabilities for ir in IRS), "no header set declares the wrapper's C ABI"
    for ir in IRS:
        declared = [f for f in ir.device_functions if not f.header_inline]
        assert {f.header for f in declared} == set(ir.device_headers or ()), ir.name
        for capability in ("device_c_abi", "device_ir"):
            assert (capability in ir.capabilities) == bool(interface_functions(ir.device_functions, capability)), \
                (ir.name, capability)


def _include_root(name: str) -> Path:
    """A header set's include root: from the inputs' header_sets.json given as the first argument
    (under Bazel), else the checkout's header set."""
    inputs = next((Path(a) for a in sys.argv[1:] if a.endswith("header_sets.json")), None)
    if inputs is not None:
        hs = next(h for h in json.loads(inputs.read_text())["header_sets"] if h["name"] == name)
        return (inputs.parent / hs["include_dirs"][0]).absolute()
    return next(hs for hs in SETS if hs.name == name).include_root


def test_header_inline_functions_are_the_device_headers_ir_extern_c_ones():
    """The NCCL_IR_EXTERN_C functions of the other device headers (gin.h, core.h) are in the IR,
    marked header_inline, with the header that declares them; their names and since come from the
    headers (a set whose headers spell none has none)."""
    inline = {ir.name: [f for f in ir.device_functions if f.header_inline] for ir in IRS}
    assert any(inline.values()), "no header set has header_inline device functions"
    for ir in IRS:
        for fn in inline[ir.name]:
            assert fn.header.startswith("nccl_device/") and fn.header not in (ir.device_headers or ()), fn.name
            text = (_include_root(ir.name) / fn.header).read_text()
            assert re.search(rf"NCCL_IR_EXTERN_C[^;{{}}]*\b{fn.name}\s*\(", text), (ir.name, fn.name)
    for fn in MERGED["device_functions"]:
        if fn.get("header_inline"):
            assert fn["since"] == next(ir.version for ir in IRS if fn["name"] in
                                       {f.name for f in inline[ir.name]}), fn["name"]


def test_since_is_the_first_set_that_has_each_function():
    assert MERGED["device_functions"], "bindings/ir/api/nccl.json has no device_functions"
    for fn in MERGED["device_functions"]:
        holders = [ir.version for ir in IRS if any(f.name == fn["name"] for f in ir.device_functions)]
        assert fn["since"] == holders[0] and fn["versions"] == holders, fn["name"]


def test_signatures_keep_references_defaults_and_docs():
    newest = {f.name: f for f in API.device_functions}  # each function's newest declaration
    for fn in newest.values():
        for p in fn.params:
            assert p.spelling.strip(), f"{fn.name}.{p.name}: no C++ spelling"
            if p.reference:
                assert p.spelling.endswith("&") and p.type.kind == "pointer", f"{fn.name}.{p.name}"
    assert any(p.default is not None for f in newest.values() for p in f.params), "no default argument recorded"
    assert any(p.reference for f in newest.values() for p in f.params), "no reference parameter recorded"
    assert any(f.doc for f in newest.values()), "no doc comment recorded"


def test_session_storage_is_bound_not_skipped():
    for ir in IRS:
        skipped = {s.name for s in ir.skipped}
        for storage in ir.device_storage:
            assert storage.name not in skipped, f"{ir.name}: {storage.name} is both storage and skipped"
            assert storage.size > 0 and storage.align > 0 and storage.members
        used = {p.type.pointee.name for f in ir.device_functions for p in f.params
                if p.type.kind == "pointer" and p.type.pointee.kind == "record"}
        records = {r.name for r in ir.records} | {s.name for s in ir.device_storage}
        assert used <= records, f"{ir.name}: device functions point to unbound records {used - records}"


def test_spec_loads_and_covers_every_device_function():
    """The wrapper renders the device_c_abi interface and the header_inline functions, every one;
    another interface's functions (device_ir) are NCCL's own."""
    spec = load_device_wrapper(API)
    surface = {f.name for f in interface_functions(API.device_functions, "device_c_abi")}
    assert surface
    assert [wf.function.name for wf in spec.functions] == [f.name for f in API.device_functions
                                                            if f.name in surface or f.header_inline]


def test_every_release_leaves_out_exactly_what_its_ir_lacks():
    spec = load_device_wrapper(API)
    plans = plan_releases(spec, API, IRS)
    provided_somewhere = set()
    for plan in plans:
        names, fields = release_names(plan.ir)
        names |= {s.name for s in plan.storage} | {p.name for p in plan.polyfills}
        source = (REPO / "bindings" / "device_wrapper" / f"nccl_device_wrapper-{plan.ir.name}.cu").read_text()
        source = source.split("#ifdef NCCLBIND_DEVICE_TWINS")[0]  # the twins: lto_kernel_test.py
        defined = set(re.findall(r"^__device__ [^;{]*?\b(\w+)\([^;{]*\)\s*\{", source, re.M))
        symbols = spec.symbols()
        assert defined == {symbols[n] for n in plan.bodies}, f"{plan.ir.name}: the generated source defines other functions"
        assert all(symbols[n] == spec.header_inline_prefix + n for n in symbols
                   if next(f for f in API.device_functions if f.name == n).header_inline), "a header_inline symbol"
        for wf in spec.functions:
            name = wf.function.name
            signature = {t.name for p in wf.function.params for t in (p.type, p.type.pointee) if t is not None
                         and t.kind in ("record", "enum", "typedef")}
            if name in plan.bodies:
                # Provided: its signature's types and the chosen body's needs are this release's.
                provided_somewhere.add(name)
                chosen = next(v for v in wf.variants if v.body == plan.bodies[name])
                assert all(n in (fields if "." in n else names) for n in chosen.needs + sorted(signature)), \
                    f"{plan.ir.name} provides {name} though its IR lacks what it needs"
                continue
            # Left out: something its signature or every variant needs is not in this release's IR.
            needs = [n for v in wf.variants for n in v.needs]
            lacking = [n for n in needs + sorted(signature) if n not in (fields if "." in n else names)]
            if wf.same_signature:
                own = next((f for f in plan.ir.device_functions if f.name == name), None)
                if not policy_module._same_signature(own, wf.function):
                    lacking.append(f"{name}'s declaration in {plan.ir.name} (none, or other types)")
            assert lacking, f"{plan.ir.name} leaves out {name} though its IR has all it needs"
            first = plan.missing[name]
            if first is not None:
                assert first != plan.ir.version
                assert name in next(p for p in plans if p.ir.version == first).bodies
    assert provided_somewhere == {wf.function.name for wf in spec.functions} - {
        n for p in plans for n, v in p.missing.items() if v is None}


def test_cxx_same_name_gives_a_release_without_the_c_declaration_the_function():
    """[header_inline] cxx_same_name: a release whose IR knows such a function only as a C++ device
    API name (NCCL 2.28: NCCL_DEVICE_INLINE, no NCCL_IR_EXTERN_C declaration) provides it, forwarding
    to NCCL's C++ function; a release that declares it is planned as before; the generated wrapper
    defines it (the test above), and //tests/device's nvcc test of each release's wrapper proves the
    parameters."""
    spec = load_device_wrapper(API)
    assert spec.cxx_same_name
    gained = {}
    for plan in plan_releases(spec, API, IRS):
        own = {f.name for f in plan.ir.device_functions}
        for name in sorted(spec.cxx_same_name):
            if name not in own and name in plan.ir.device_cxx_names:
                assert name in plan.bodies, f"{plan.ir.name}: {name} is a C++ name of the release but left out"
                assert plan.bodies[name].startswith(f"return {name}("), plan.bodies[name]
                gained.setdefault(plan.ir.version, []).append(name)
            elif name not in own:
                assert name not in plan.bodies, f"{plan.ir.name} provides {name}, which its IR does not know"
    assert gained, "no release gains a function through cxx_same_name"
    print("gained through cxx_same_name:", gained)


def _newest_record(name: str) -> dict:
    return MERGED["record_variants"][name][-1]["record"]


def test_a_polyfill_stands_in_exactly_where_the_ir_lacks_the_record_and_has_its_kinds():
    """[polyfill.ncclCoopAny]: a release whose IR has no ncclCoopAny but every coop kind gets the
    wrapper's own, with the newest IR's size and alignment in its static_assert; that release then
    provides the functions over ncclCoopAny whose other needs it has (the test above); a release
    with NCCL's own ncclCoopAny defines none."""
    spec = load_device_wrapper(API)
    assert [p.name for p in spec.polyfills] == ["ncclCoopAny"]
    polyfill = spec.polyfills[0]
    record = _newest_record(polyfill.name)
    assert (polyfill.size, polyfill.align) == (record["size"], record["align"])
    stood_in = []
    for plan in plan_releases(spec, API, IRS):
        names, _ = release_names(plan.ir)
        expected = polyfill.name not in names and all(k in names for k in polyfill.kinds)
        assert [p.name for p in plan.polyfills] == ([polyfill.name] if expected else []), plan.ir.name
        source = (REPO / "bindings" / "device_wrapper" / f"nccl_device_wrapper-{plan.ir.name}.cu").read_text()
        definition = re.search(rf"^struct alignas\((\d+)\) {polyfill.name} {{", source, re.M)
        check = re.search(rf"^static_assert\(sizeof\({polyfill.name}\) == (\d+) && alignof\({polyfill.name}\) == (\d+),",
                          source, re.M)
        if not expected:
            assert definition is None and check is None, f"{plan.ir.name} has its own {polyfill.name}"
            continue
        stood_in.append(plan.ir.version)
        assert definition and int(definition.group(1)) == record["align"], plan.ir.name
        assert check and (int(check.group(1)), int(check.group(2))) == (record["size"], record["align"]), plan.ir.name
        takes = [f.name for f in API.device_functions if polyfill.name in
                 {t.name for p in f.params for t in (p.type, p.type.pointee) if t is not None}]
        gained = [n for n in takes if n in plan.bodies]
        assert gained, f"{plan.ir.name}: the stand-in {polyfill.name} provides no function"
        print(f"{plan.ir.name}: own {polyfill.name} ({record['size']} bytes, align {record['align']}); "
              f"{len(gained)} of the {len(takes)} functions taking it provided")
    # Whichever releases lack ncclCoopAny, the merged IR says so (the versions that have it: before
    # its since, or from its until on), and exactly they stand in.
    having = {v for variant in MERGED["record_variants"][polyfill.name] for v in variant["versions"]}
    assert stood_in == [ir.version for ir in IRS if ir.version not in having
                        and all(k in release_names(ir)[0] for k in polyfill.kinds)]


def test_python_table_matches_the_plan():
    from ncclbind.device import wrapper_table as table
    from ncclbind.device import cuda_source
    from ncclbind.errors import NcclSymbolNotFoundError
    plans = plan_releases(load_device_wrapper(API), API, IRS)
    assert set(table.HEADER_SETS) == {p.ir.version for p in plans}
    for plan in plans:
        assert cuda_source.missing_functions(plan.ir.version) == plan.missing
        assert cuda_source.wrapper_source(plan.ir.version_code) == \
            (REPO / "bindings" / "device_wrapper" / f"nccl_device_wrapper-{plan.ir.name}.cu").read_text()
        assert table.HEADER_SETS[plan.ir.version]["dropped"] == plan.dropped
        for name, first in plan.missing.items():
            last = plan.dropped.get(name)  # a function only older releases provide names them
            with pytest.raises(NcclSymbolNotFoundError, match=re.escape(
                    f"{name} needs NCCL {first} to {last} (NCCL {plan.ir.version}'s device API can no longer "
                    f"provide it); loaded {plan.ir.version}" if last else
                    f"{name} needs NCCL >= {first}; loaded {plan.ir.version}" if first else f"{name}: no NCCL")):
                cuda_source.require_function(name, plan.ir.version)
        for name in plan.bodies:
            cuda_source.require_function(name, plan.ir.version)
    # the table holds the functions the wrapper renders (the policy's), with the IR's "since"
    assert {n: f["since"] for n, f in table.FUNCTIONS.items()} == \
        {wf.function.name: wf.function.since for wf in load_device_wrapper(API).functions}


def _spec_with(tmp_path, edit):
    text = policy_module.POLICY_PATH.read_text()
    path = tmp_path / "device_wrapper.toml"
    path.write_text(edit(text))
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda t: t + '\n[[function]]\nname = "ncclNoSuchFunction"\nbody = "return;"\n',
     r"\[\[function\]\] ncclNoSuchFunction: not a device function of the IR"),
    (lambda t: t.replace('body = "return {comm}->rank;"', 'body = "return {comm}->rank + {nope};"'),
     r"ncclDevComm_Rank: \{nope\} is not a parameter of ncclDevComm_Rank"),
    (lambda t: t.replace('body = "return {comm}->rank;"', 'body = "return 0;"'),
     r"ncclDevComm_Rank: the body does not pass comm"),
    (lambda t: t.replace('[[function]]\nname = "ncclDevComm_Rank"\nbody = "return {comm}->rank;"\n', ""),
     r"no entry for the IR's device functions ncclDevComm_Rank"),
    (lambda t: t.replace('F32 = "float"\n', ""), r"element type 'F32' is not in \[dtypes\]"),
    (lambda t: t.replace('F32 = "float"', 'F32 = "double"'), r"\[dtypes\] F32 = 'double', but"),
    (lambda t: t.replace("[storage.ncclLsaBarrierSession_C]", "[storage.ncclNoSuchStorage]"),
     r"\[storage.ncclNoSuchStorage\]: not a device storage record"),
    (lambda t: t + '\n[[function]]\nname = "ncclDevComm_Rank"\nbody = "return {comm}->rank;"\n',
     r"ncclDevComm_Rank: a second entry"),
    (lambda t: "bogus = 1\n" + t, r"top level: unknown keys \['bogus'\]"),
    (lambda t: t.replace('body = "return {comm}->rank;"', 'body = "return {comm}->rank;"\nbogus = 1'),
     r"ncclDevComm_Rank: unknown keys \['bogus'\]"),
    (lambda t: t.replace(', "ncclCoopCta"]\n', ']\n', 1),
     r"\[polyfill.ncclCoopAny\]: kinds .* are not the types the ncclCoopAnyInit<Kind> bodies need"),
    (lambda t: t.replace("[polyfill.ncclCoopAny]", "[polyfill.ncclTeam]"),
     r"\[polyfill.ncclTeam\]: templates/cuda/device_wrapper.cu.j2 writes a stand-in only for ncclCoopAny"),
    (lambda t: t.replace('kinds = ["ncclCoopThread"', 'kind = ["ncclCoopThread"'),
     r"\[polyfill.ncclCoopAny\]: allowed keys: \['kinds'\]"),
    (lambda t: t.replace('cxx_same_name = ["ncclTeamWorld"', 'cxx_same_name = ["ncclDevComm_Rank", "ncclTeamWorld"'),
     r"\[header_inline\] cxx_same_name: ncclDevComm_Rank: not a header_inline device function"),
])
def test_spec_mistakes_name_the_entry(tmp_path, edit, message):
    path = _spec_with(tmp_path, edit)
    assert path.read_text() != policy_module.POLICY_PATH.read_text(), "the edit changed nothing"
    with pytest.raises(DeviceWrapperPolicyError, match=message):
        load_device_wrapper(API, path)


def test_needs_an_absent_name_leaves_the_function_out_everywhere(tmp_path):
    path = _spec_with(tmp_path, lambda t: t.replace('body = "return {comm}->rank;"',
                                                    'body = "return {comm}->rank;"\nneeds = ["ncclNotInAnyRelease"]'))
    plans = plan_releases(load_device_wrapper(API, path), API, IRS)
    assert all(p.missing.get("ncclDevComm_Rank", "x") is None for p in plans)


def test_default_argument_naming_a_missing_enumerator_is_left_out():
    plans = plan_releases(load_device_wrapper(API), API, IRS)
    for plan in plans:
        enums = {e.name: {v.name for v in e.values} for e in plan.ir.enums}
        for fn in (wf.function for wf in load_device_wrapper(API).functions):
            for p in fn.params:
                if p.default is None:
                    continue
                refs = re.findall(r"\b(\w+)::(\w+)\b", p.default)
                kept = plan.defaults[fn.name][p.name]
                if any(e in enums and v not in enums[e] for e, v in refs):
                    assert kept is None, f"{plan.ir.name}: {fn.name}.{p.name} keeps {p.default}"
                else:
                    assert kept == p.default


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
