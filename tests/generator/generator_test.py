"""The generator on small synthetic headers (headers/), against golden outputs
(golden/): the IR JSON, the rendered C header, the rendered layout test (compiled
against the synthetic header and run), and the Python extension module's C and
stub (the C compiled against the golden C header and the extension's own header).

Update the golden files after an intended change, then read their diff and commit it:
    /usr/bin/python3 tests/generator/generator_test.py --update-golden
"""
import dataclasses
import difflib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

HERE = Path(os.path.abspath(__file__)).parent
sys.path.insert(0, str(HERE.parent.parent))

import pytest  # noqa: E402

from generator import clang_frontend  # noqa: E402
from generator.policy.conventions import load_conventions  # noqa: E402
from generator.header_sets import HeaderSet  # noqa: E402
from generator.passes.extract import extract_header_set  # noqa: E402
from generator.passes.merge import merge_all  # noqa: E402
from generator.pipeline import ir_json_text  # noqa: E402
from generator.render import RenderContext  # noqa: E402
from generator.render import c as render_c  # noqa: E402
from generator.render import python as render_python  # noqa: E402

HEADERS = HERE / "headers"
GOLDEN = HERE / "golden"
RUNTIME_INCLUDE = HERE.parent.parent / "runtime" / "include"
EXTENSION_SRC = HERE.parent.parent / "bindings" / "python" / "src"  # ncclbind_python.h


def synth_set(header="nccl_synth.h", name="synth-1.2.3"):
    return HeaderSet(name, "nccl", "1.2.3", (header,), HEADERS, HEADERS, "libsynth.so", None, True,
                     "tests/generator/headers")


def generate_synth():
    hs = synth_set()
    ir = extract_header_set(hs, {hs.name: hs}, load_conventions())
    ctx = RenderContext(merge_all([ir]), [ir], [hs], load_conventions())
    files = render_c.render(ctx)
    python = render_python.render(ctx)
    return ir, {
        "synth.json": ir_json_text(ir),
        "synth_nccl.h": files["bindings/c/include/ncclbind/nccl.h"],
        "synth_layout_test.cc": files[f"bindings/c/layout_tests/{hs.name}.cc"],
        "synth_module.c": python[f"{render_python.GENERATED_C}/nccl_module.c"],
        "synth_module.pyi": python[f"{render_python.GENERATED_PY}/_nccl.pyi"],
    }


@pytest.fixture(scope="module")
def synth():
    return generate_synth()


@pytest.mark.parametrize("name", ["synth.json", "synth_nccl.h", "synth_layout_test.cc", "synth_module.c",
                                  "synth_module.pyi"])
def test_matches_golden(synth, name):
    _, files = synth
    expected = (GOLDEN / name).read_text()
    diff = "".join(difflib.unified_diff(expected.splitlines(True), files[name].splitlines(True),
                                        f"golden/{name}", "generated"))
    assert not diff, f"{name} differs from golden/{name} (if intended, run --update-golden):\n{diff}"


def test_same_input_gives_identical_output(synth):
    _, files = synth
    _, again = generate_synth()
    assert again == files


def test_bitfields_record_bit_offset_and_width(synth):
    ir, _ = synth
    flags = next(r for r in ir.records if r.name == "synthFlags_t")
    by_name = {f.name: f for f in flags.fields}
    assert (by_name["ready"].bit_offset, by_name["ready"].bit_width) == (0, 1)
    assert (by_name["mode"].bit_offset, by_name["mode"].bit_width) == (1, 3)
    assert by_name["count"].bit_offset == 32 and by_name["count"].bit_width == 12
    assert by_name["tail"].offset == 8 and by_name["tail"].bit_width is None
    assert flags.size == 16


def test_anonymous_union_and_unnamed_struct_member(synth):
    ir, _ = synth
    value = next(r for r in ir.records if r.name == "synthValue_t")
    anon = [f for f in value.fields if f.anonymous]
    assert len(anon) == 1 and anon[0].type.kind == "record" and anon[0].offset == 8
    union = next(r for r in ir.records if r.name == anon[0].type.name)
    assert union.kind == "union" and union.anonymous and [f.name for f in union.fields] == ["i", "d", "s"]
    point = next(f for f in value.fields if f.name == "point")
    assert not point.anonymous and point.type.name == "synthValue_t__point"


def test_enum_aliases_dummies_and_sentinels(synth):
    ir, _ = synth
    types = next(e for e in ir.enums if e.name == "synthType_t")
    char = next(v for v in types.values if v.name == "synthChar")
    assert char.alias_of == "synthInt8" and char.value == 0
    assert next(v for v in types.values if v.name == "synthMax").value == 0x7fffffff
    assert next(e for e in ir.enums if e.name == "synthOp_dummy_t").dummy


def test_macros_are_evaluated_by_clang(synth):
    ir, _ = synth
    consts = {c.name: c.value for c in ir.constants}
    assert consts["SYNTH_VERSION_CODE"] == 10203
    assert consts["SYNTH_MAGIC"] == 0xcafebeef
    assert consts["SYNTH_BIG"] == 0x123456789
    assert consts["SYNTH_NEG"] == -7
    assert consts["SYNTH_UNDEF_FLOAT"] == -1.5
    assert consts["SYNTH_NAME"] == "synth"
    assert consts["SYNTH_NULL"] is None and "SYNTH_NULL" in consts
    assert consts["SYNTH_SHIFTED"] == 16
    skipped = {s.name: s.reason for s in ir.skipped}
    assert "function-like" in skipped["SYNTH_SQUARE"]
    assert "empty macro" in skipped["SYNTH_FLAG"]


def test_initializers_from_brace_lists_and_compound_literals(synth):
    ir, _ = synth
    inits = {i.name: {v.field: v.value for v in i.values} for i in ir.initializers}
    assert inits["SYNTH_CONFIG_INITIALIZER"] == {"size": 40, "magic": 0xcafebeef, "version": 10203,
                                                 "blocking": -1, "name": None, "ratio": 0.5, "type": 7}
    assert inits["SYNTH_TENSOR_INIT"] == {"size": 24, "magic": 42, "data": None, "count": 0}
    assert inits["SYNTH_COLLCONFIG_INITIALIZER"] == {"size": 16, "minCTAs": -3}
    config = next(r for r in ir.records if r.name == "synthConfig_t")
    assert config.versioned_header and config.tag == "synthConfig_v10203"


def test_functions_params_directions_and_aliases(synth):
    ir, _ = synth
    fns = {f.name: f for f in ir.functions}
    assert "psynthGetVersion" not in fns and fns["synthGetVersion"].profiling_alias == "psynthGetVersion"
    assert fns["synthGetVersion"].params[0].direction == "out"
    send = fns["synthSend"]
    assert [p.name for p in send.params] == ["arg0", "count", "arg2", "peer", "comm"]
    assert send.params[0].direction == "in"  # unnamed in the header: named by position
    assert fns["synthConfigure"].params[2].type.kind == "typedef"
    assert fns["synthDefaultFlags"].result.kind == "record"
    handle = next(t for t in ir.typedefs if t.name == "synthComm_t")
    assert handle.opaque_handle
    alloc = next(t for t in ir.typedefs if t.name == "synthAllocFn_t")
    assert alloc.type.kind == "function_pointer" and len(alloc.type.params) == 3


def test_cxx_only_declarations_are_reported_not_dropped(synth):
    ir, _ = synth
    skipped = {s.name: s for s in ir.skipped}
    assert "methods" in skipped["synthCoop"].reason
    assert skipped["synthCoop"].location.startswith("nccl_synth.h:")
    assert "inline" in skipped["synthInlineHelper"].reason
    assert "template" in skipped["synthBox"].reason


C_ONLY_HEADER = """#include <stddef.h>
typedef enum { coSuccess = 0 } coResult_t;
typedef struct { int class; _Bool on; } coThing_t;
coResult_t coFlag(_Bool flag, const char * restrict name, coThing_t *thing);
coResult_t coStart();
"""


def test_a_header_that_is_c_only_is_parsed_as_c(tmp_path, synth):
    """_Bool, restrict and a field named class are valid C that C++ refuses: such a header is
    parsed as C (C23: `f()` is a prototype, as in C++), a header C++ takes stays C++."""
    (tmp_path / "nccl_conly.h").write_text(C_ONLY_HEADER)
    include = [Path(os.path.abspath(tmp_path))]
    assert clang_frontend.parse_headers(["nccl_conly.h"], include).language == "c"
    assert clang_frontend.parse_headers([synth_set().headers[0]], [HEADERS]).language == "c++"
    hs = HeaderSet("conly-1.0.0", "nccl", "1.0.0", ("nccl_conly.h",), tmp_path, tmp_path, "libconly.so", None, True,
                   str(tmp_path))
    ir = extract_header_set(hs, {hs.name: hs}, load_conventions())
    functions = {f.name: f for f in ir.functions}
    assert [(p.name, p.type.kind) for p in functions["coFlag"].params] == [
        ("flag", "bool"), ("name", "pointer"), ("thing", "pointer")]
    assert functions["coStart"].params == []
    assert [(f.name, f.type.kind) for f in next(r for r in ir.records if r.name == "coThing_t").fields] == [
        ("class", "int"), ("on", "bool")]
    files = render_c.render(RenderContext(merge_all([ir]), [ir], [hs], load_conventions()))
    header = tmp_path / "ncclbind_conly.h"
    header.write_text(files["bindings/c/include/ncclbind/nccl.h"])
    subprocess.run(["gcc", "-fsyntax-only", "-std=c11", f"-I{RUNTIME_INCLUDE}", "-x", "c", str(header)], check=True)


def test_records_nested_in_records_are_mirrored_under_their_own_name(synth):
    ir, files = synth
    inner = next(r for r in ir.records if r.name == "synthOuter__Inner")
    assert inner.cxx_name == "synthOuter::Inner" and inner.size == 8
    outer = next(r for r in ir.records if r.name == "synthOuter")
    assert [(f.name, f.type.kind) for f in outer.fields] == [("inner", "record"), ("link", "pointer")]
    assert "const nb_synthOuter__Inner *link;" in files["synth_nccl.h"]


def test_alignment_attribute_is_mirrored(synth):
    ir, files = synth
    aligned = next(r for r in ir.records if r.name == "synthAligned")
    assert aligned.align == 16 and aligned.fields[0].align_attr == 16 and aligned.fields[1].offset == 8
    assert "NCCLBIND_ALIGNAS(16) char space[8];" in files["synth_nccl.h"]


def test_conventions_reach_the_ir():
    conv = load_conventions()
    assert "ncclCommDestroy" in conv.blocking and "ncclNumResults" in conv.sentinels
    ir = json.loads((HERE.parent.parent / "bindings" / "ir" / "api" / "nccl.json").read_text())
    fns = {f["name"]: f for f in ir["functions"]}
    assert fns["ncclCommDestroy"].get("blocking") and not fns["ncclGetVersion"].get("blocking")
    assert fns["ncclAllReduce"].get("blocking")  # it takes a stream: no entry needed
    result = next(e for e in ir["enums"] if e["name"] == "ncclResult_t")
    assert next(v for v in result["values"] if v["name"] == "ncclNumResults").get("sentinel")


def test_editing_binding_policy_does_not_reparse_headers():
    """The cached header facts' digest ignores blocking, sentinels, directions, renames
    and ownership (applied after the cache), but not the header facts extraction reads."""
    from generator.pipeline import input_digest
    hs = synth_set()
    conv = load_conventions()
    policy_edited = dataclasses.replace(conv, blocking=("synth*",), sentinels=frozenset(), directions={},
                                        rename={"synthAllReduce": "reduce_all"}, ownership={})
    assert input_digest(hs, {hs.name: hs}, policy_edited) == input_digest(hs, {hs.name: hs}, conv)
    facts_edited = dataclasses.replace(conv, initializers={"SYNTH_INITIALIZER": "synthConfig_t"})
    assert input_digest(hs, {hs.name: hs}, facts_edited) != input_digest(hs, {hs.name: hs}, conv)


def test_result_descriptions_are_checked_against_the_ir(capsys):
    """The runtime's result-code table: codes and names from the IR's ncclResult_t, words from
    conventions.toml; a description of a code no release has fails generation, naming it; a code
    without one is described by its name, with a warning."""
    from types import SimpleNamespace as NS

    from generator.policy.common import PolicyError
    conv = load_conventions()
    real = json.loads((HERE.parent.parent / "bindings" / "ir" / "api" / "nccl.json").read_text())
    values = [v for v in next(e for e in real["enums"] if e["name"] == "ncclResult_t")["values"]
              if not v.get("sentinel")]
    assert set(conv.result_descriptions) == {v["name"] for v in values}  # every code described, no other
    text = (HERE.parent.parent / "runtime" / "src" / "generated" / "result_codes.h").read_text()
    for v in values:
        assert f'{{{v["value"]}, "{v["name"]}", "{conv.result_descriptions[v["name"]]}"}}' in text

    def api(*names):
        return NS(enums=[NS(name="ncclResult_t", values=[NS(name=n, value=i, sentinel=False, since="1.0.0",
                                                            until=None) for i, n in enumerate(names)])])
    bogus = dataclasses.replace(conv, result_descriptions={**conv.result_descriptions, "ncclNoSuchCode": "x"})
    with pytest.raises(PolicyError, match="ncclNoSuchCode: not a value of ncclResult_t"):
        render_c.result_codes(NS(conventions=bogus), api(*conv.result_descriptions))
    rows = render_c.result_codes(NS(conventions=conv), api(*conv.result_descriptions, "ncclBrandNew"))
    assert rows[-1]["description"] == f"ncclBrandNew (NCCL's result code {len(rows) - 1})"
    assert "ncclBrandNew without a description" in capsys.readouterr().err


def test_misplaced_conventions_key_fails_loudly(tmp_path):
    bad = tmp_path / "conventions.toml"
    bad.write_text('[external_types]\ncudaStream_t = { kind = "handle", c = "void *", size = 8 }\n'
                   'blocking = ["ncclAllReduce"]\n')
    with pytest.raises(ValueError, match="external_types"):
        load_conventions(bad)


def test_header_that_does_not_parse_stops_with_diagnostics():
    hs = synth_set("nccl_broken.h", "broken-1.0.0")
    with pytest.raises(clang_frontend.ParseError) as err:
        extract_header_set(hs, {hs.name: hs}, load_conventions())
    assert "nccl_broken.h:2" in str(err.value) and "expected" in str(err.value)


def test_rendered_layout_test_compiles_and_passes(synth):
    """The golden C output is itself compiled against the synthetic header and run."""
    _, files = synth
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "ncclbind").mkdir()
        (tmp / "ncclbind" / "nccl.h").write_text(files["synth_nccl.h"])
        src = tmp / "layout.cc"
        src.write_text(files["synth_layout_test.cc"].replace("#include <nccl_synth.h>", '#include "nccl_synth.h"'))
        shutil.copy(HEADERS / "nccl_synth.h", tmp / "nccl_synth.h")
        exe = tmp / "layout"
        cc = subprocess.run(["g++", "-std=c++17", "-Wno-invalid-offsetof", f"-I{tmp}", f"-I{RUNTIME_INCLUDE}",
                             str(src), "-o", str(exe)], capture_output=True, text=True)
        assert cc.returncode == 0, cc.stderr
        run = subprocess.run([str(exe)], capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "0 failed" in run.stdout


def test_a_function_that_throws_is_called_through_the_runtimes_guard():
    """conventions.toml's throws: the C wrapper of such a function calls the library through
    ncclbind_call_guarded (runtime.h) with its arguments packed, and every other wrapper calls it
    directly; the rendered file compiles with the C binding's flags."""
    hs = synth_set()
    conv = dataclasses.replace(load_conventions(), throws=("synthSend",))
    ir = extract_header_set(hs, {hs.name: hs}, conv)
    assert [f.name for f in ir.functions if f.throws] == ["synthSend"]
    files = render_c.render(RenderContext(merge_all([ir]), [ir], [hs], conv))
    source = files["bindings/c/src/nccl.c"]
    assert source.count("ncclbind_call_guarded(") == 1
    assert 'ncclbind_call_guarded(call_synthSend, &packed, "synthSend")' in source
    assert "struct call_synthSend packed = {fn, arg0, count, arg2, peer, comm};" in source, source
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "ncclbind").mkdir()
        (tmp / "ncclbind" / "nccl.h").write_text(files["bindings/c/include/ncclbind/nccl.h"])
        (tmp / "nccl.c").write_text(source)
        cc = subprocess.run(["gcc", "-fsyntax-only", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{tmp}",
                             f"-I{RUNTIME_INCLUDE}", str(tmp / "nccl.c")], capture_output=True, text=True)
        assert cc.returncode == 0, cc.stderr


def test_golden_python_module_compiles():
    """The golden extension module is C the extension's build accepts: its flags, the golden
    C header as <ncclbind/nccl.h>, the runtime's header and the hand-written ncclbind_python.h."""
    python_include = sysconfig.get_paths()["include"]
    assert (Path(python_include) / "Python.h").is_file(), f"no Python.h in {python_include} (python3-dev)"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "ncclbind").mkdir()
        shutil.copy(GOLDEN / "synth_nccl.h", tmp / "ncclbind" / "nccl.h")
        cc = subprocess.run(["gcc", "-fsyntax-only", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{tmp}",
                             f"-I{RUNTIME_INCLUDE}", f"-I{EXTENSION_SRC}", f"-I{python_include}",
                             str(GOLDEN / "synth_module.c")], capture_output=True, text=True)
        assert cc.returncode == 0, cc.stderr


def test_python_module_reaches_every_named_field_and_function(synth):
    """Every named field of the synthetic records has an accessor (an unnamed bitfield has
    none), and every bound function is in the method table."""
    ir, files = synth
    module = files["synth_module.c"]
    flags = next(r for r in ir.records if r.name == "synthFlags_t")
    assert [f.name for f in flags.fields if f.name] == ["ready", "mode", "count", "tail"]
    for f in ("ready", "mode", "count", "tail"):
        assert f"get_synthFlags_t_{f}(" in module and f"set_synthFlags_t_{f}(" in module
    assert "get_synthFlags_t_(" not in module
    for fn in ir.functions:
        assert f'{{"{fn.snake_name}", (PyCFunction)' in module


def update_golden():
    _, files = generate_synth()
    for name, text in files.items():
        (GOLDEN / name).write_text(text)
        print(f"wrote {GOLDEN / name}")


if __name__ == "__main__":
    if "--update-golden" in sys.argv:
        update_golden()
        sys.exit(0)
    sys.exit(pytest.main([__file__, "-q", "-vv", "-p", "no:cacheprovider"] + sys.argv[1:]))
