"""ncclbind.device's Numba layer on the CPU: the device API's records against the IR, Numba-CUDA
kernels that use every intrinsic compiled to PTX for sm_90 (no GPU: numba-cuda from
tools/setup.sh's .cache/numba-cuda), version gating (what a release's wrapper lacks is refused at
compile time, naming the function and the release that has it, from the generated wrapper
table), and one kernel linked for real (nvcc + ptxas + nvlink) against the compiled wrapper of the
newest header set, which proves the C prototypes the intrinsics emit are the wrapper's.

Kernels compile in a subprocess per release: Numba keeps what it typed, so one process compiles
for one release (c_abi refuses a second)."""
from __future__ import annotations

import atexit
import functools
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
NUMBA_SITE = REPO / ".cache" / "numba-cuda"
IR = REPO / "bindings" / "ir"
KERNELS = REPO / "tests" / "multigpu" / "device"


def _numba_cuda_available() -> bool:
    probe = "import site, sys; site.addsitedir(sys.argv[1]); import numba.cuda, llvmlite"
    return subprocess.run([sys.executable, "-c", probe, str(NUMBA_SITE)], capture_output=True).returncode == 0


needs_numba = pytest.mark.skipif(not _numba_cuda_available(),
                                 reason="numba-cuda is not installed (tools/setup.sh puts it in .cache/numba-cuda)")


def _api() -> dict:
    return json.loads((IR / "api" / "nccl.json").read_text())


def _sets() -> list[str]:
    """The releases with a device API (their IR's capability device_api), oldest first."""
    api = _api()
    return [v for v, name in zip(api["versions"], api["header_sets"])
            if "device_api" in json.loads((IR / f"{name}.json").read_text()).get("capabilities", [])]


@functools.lru_cache(maxsize=None)
def _installed_copy() -> pathlib.Path:
    """A copy of the ncclbind package outside the checkout, as pip would install it: no
    bindings/ir/ beside it; the subprocesses below use it, so every kernel they compile proves
    that ncclbind.device reads only its generated tables."""
    import ncclbind
    site = pathlib.Path(tempfile.mkdtemp(prefix="ncclbind-installed-"))
    atexit.register(shutil.rmtree, site, True)
    shutil.copytree(pathlib.Path(os.path.abspath(ncclbind.__file__)).parent, site / "ncclbind",
                    ignore=shutil.ignore_patterns("__pycache__"))
    # as setup.py's build_py does: the device wrappers as package data
    (site / "ncclbind" / "device" / "_generated" / "wrapper").mkdir(exist_ok=True)
    for source in (REPO / "bindings" / "device_wrapper").glob("nccl_device_wrapper-*.cu"):
        shutil.copy(source, site / "ncclbind" / "device" / "_generated" / "wrapper" / source.name)
    return site


def _package_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NCCLBIND_IR_DIR"}
    return dict(env, PYTHONPATH=str(_installed_copy()), **extra)


def test_record_layouts_are_the_irs():
    """Every mirrored record of every header set that has it: size and field offsets of the
    layout and of its numpy dtype are the IR's record."""
    import numpy as np

    from ncclbind.device import layouts
    checked = 0
    for version in _sets():
        records = json.loads((IR / f"nccl-{version}.json").read_text())["records"]
        for name in layouts.MIRRORED_RECORDS:
            found = [r for r in records if name in (r["name"], r.get("tag")) or r["name"] == name + "_t"]
            if not found:
                continue
            record = found[0]
            layout = layouts.record_layout(name, version)
            assert layout.header_set == version
            assert (layout.size, layout.align) == (record["size"], record["align"])
            assert [(f.name, f.offset) for f in layout.fields] == [(f["name"], f["offset"]) for f in record["fields"]]
            dtype = layouts.record_dtype(layout)
            assert dtype.itemsize == record["size"]
            assert [dtype.fields[f["name"]][1] for f in record["fields"]] == [f["offset"] for f in record["fields"]]
            checked += 1
    assert checked >= len(layouts.MIRRORED_RECORDS) * 2
    assert np  # numpy is what the dtypes are


def test_a_release_without_a_record_takes_the_oldest_set_that_has_it():
    from ncclbind.device import layouts
    first = next(v for v in _sets()
                 if any(r["name"] == "ncclCoopAny" for r in json.loads((IR / f"nccl-{v}.json").read_text())["records"]))
    older = [v for v in _sets() if _sets().index(v) < _sets().index(first)]
    for version in older:
        assert layouts.record_layout("ncclCoopAny", version).header_set == first


def test_session_storage_is_the_irs():
    from ncclbind.device import layouts
    for storage in _api()["device_storage"]:
        for version in storage["versions"]:
            layout = layouts.storage_layout(storage["name"], version)
            per_set = {s["name"]: s for s in json.loads((IR / f"nccl-{version}.json").read_text())["device_storage"]}
            assert (layout.size, layout.align) == (per_set[storage["name"]]["size"], per_set[storage["name"]]["align"])


COMPILE_ALL = textwrap.dedent('''
    import json, site, sys, types as pytypes
    site.addsitedir(sys.argv[1])
    sys.path.insert(0, sys.argv[2])
    import numba.cuda.dispatcher as dispatcher
    # Overloads compile device functions for the current GPU's capability; there is none here.
    dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))
    import numpy as np
    from numba import cuda
    from numba.cuda import types
    from ncclbind.device import intrinsics as nd
    import numba_ranks, oneshot_bench
    u8, u64 = types.uint8[::1], types.uint64
    kernels = {
        "comm_info": (numba_ranks.comm_info, (u8, types.int32[::1])),
        "coop_kinds": (numba_ranks.coop_kinds, (types.int32[:, :, ::1],)),
        "write_next_peer": (numba_ranks.write_next_peer, (u8, u64, types.int64)),
        "exchange_with_barrier": (numba_ranks.exchange_with_barrier, (u8, u64, types.float32[::1], types.int64)),
        "read_own": (numba_ranks.read_own, (u8, u64, types.float32[::1])),
        "all_reduce_f32": (numba_ranks.all_reduce, (u8, u64, types.float32[::1])),
        "all_reduce_i32": (numba_ranks.all_reduce, (u8, u64, types.int32[::1])),
        "oneshot": (oneshot_bench.oneshot_all_reduce, (u8, u64, types.float32[::1], types.int64)),
        "gin_put_signal": (numba_ranks.gin_put_signal, (u8, types.int32, u64, types.int64)),
        "hybrid_barrier": (numba_ranks.hybrid_barrier, (u8, types.int32)),
        "multimem_all_reduce": (numba_ranks.multimem_all_reduce, (u8, u64, types.float32[::1], types.int64)),
        "pointer_queries": (numba_ranks.pointer_queries, (u8, u64, types.uint64[::1], types.int32[::1])),
        "surface": (numba_ranks.surface, (u8, u64, types.int32, types.float32[::1], types.float32[::1],
                                          types.float32[::1])),
    }
    results = {}
    if len(sys.argv) > 4:  # only the kernel whose PTX is kept
        kernels = {sys.argv[4]: kernels[sys.argv[4]]}
    with nd.use_nccl_version(sys.argv[3]):
        for name, (kernel, sig) in kernels.items():
            try:
                ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0))
                results[name] = {"ok": True, "externs": sorted(l.split()[-1] for l in ptx.splitlines()
                                                              if l.startswith(".extern .func")),
                                 "target": ".target sm_90" in ptx}
                if len(sys.argv) > 4 and name == sys.argv[4]:
                    open(sys.argv[5], "w").write(ptx)
            except Exception as error:
                results[name] = {"ok": False, "type": type(error).__name__, "message": str(error)}
    print(json.dumps(results))
''')


def _compile_all(version: str, keep: tuple[str, str] | None = None) -> dict:
    args = [sys.executable, "-c", COMPILE_ALL, str(NUMBA_SITE), str(KERNELS), version] + (list(keep) if keep else [])
    run = subprocess.run(args, capture_output=True, text=True, env=_package_env(), timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _wrapper_table():
    from ncclbind.device import wrapper_table as device_wrapper
    return device_wrapper


def _function_names(externs) -> set[str]:
    """The C-ABI functions a kernel's PTX calls: each extern is the symbol the wrapper defines
    (the function's name, or nb_<name> for a header_inline one); an unknown symbol stays as is."""
    by_symbol = {entry["symbol"]: name for name, entry in _wrapper_table().FUNCTIONS.items()}
    return {by_symbol.get(e, e) for e in externs}


@needs_numba
@pytest.mark.parametrize("version", [_sets()[0], _sets()[-1]])
def test_kernels_compile_or_name_what_the_release_lacks(version):
    """The GPU test's and the benchmark's kernels, for the oldest and the newest header set: each
    compiles to sm_90 PTX calling only C-ABI functions the release's wrapper has, or is refused
    with NcclSymbolNotFoundError naming a function the wrapper lacks and the release that has it."""
    missing = _wrapper_table().HEADER_SETS[version]["missing"]
    results = _compile_all(version)
    assert results
    for name, result in results.items():
        if result["ok"]:
            assert result["target"], name
            assert result["externs"], f"{name} calls no C-ABI function"
            assert not _function_names(result["externs"]) & set(missing), name
            assert _function_names(result["externs"]) <= set(_wrapper_table().FUNCTIONS), name
        else:
            assert result["type"] == "NcclSymbolNotFoundError", (name, result)
            function = result["message"].split()[0]
            assert function in missing, (name, result)
            dropped = _wrapper_table().HEADER_SETS[version]["dropped"]
            needs = (f"needs NCCL {missing[function]} to {dropped[function]}" if function in dropped
                     else f"needs NCCL >= {missing[function]}")
            assert needs in result["message"], (name, result)
    if not missing:
        assert all(r["ok"] for r in results.values()), results


@needs_numba
def test_the_newest_release_with_the_whole_c_abi_compiles_every_kernel():
    """The newest release whose wrapper provides every C-ABI function (a newer one may provide
    fewer: test_kernels_compile_or_name_what_the_release_lacks holds it)."""
    complete = [v for v in _sets() if not _wrapper_table().HEADER_SETS[v]["missing"]]
    assert complete, "no release's wrapper provides the whole C ABI"
    results = _compile_all(complete[-1])
    assert all(r["ok"] for r in results.values()), {k: v for k, v in results.items() if not v["ok"]}
    externs = _function_names(set().union(*(r["externs"] for r in results.values())))
    for function in ("ncclGin_C_init", "ncclGinPut_v2", "ncclGinSignal_v2", "ncclGinWaitSignal", "ncclGinWaitCounter",
                     "ncclGinFlush", "ncclGinResetSignal", "ncclBarrierSessionInit", "ncclBarrierSessionSync",
                     "ncclBarrierSessionDestroy", "ncclDevComm_HybridLsaBarrier", "ncclDevComm_HybridRailGinBarrier",
                     "ncclGetMultimemPointer", "ncclGetLsaMultimemPointer", "ncclMultimemReduceSum_F32",
                     "ncclMultimemCopy_F32", "ncclMultimemReduceSumCopy_F32",
                     "ncclCoopAnyInitCta", "ncclCoopAnyInitWarp", "ncclCoopAnyInitThread", "ncclCoopAnyInitLanes",
                     "ncclCoopAnyInitWarpSpan", "ncclCoopThreadRank", "ncclCoopSize", "ncclCoopNumThreads",
                     "ncclCoopSync", "ncclDevComm_Rank", "ncclDevComm_NRanks", "ncclDevComm_LsaRank",
                     "ncclDevComm_LsaSize", "ncclDevComm_LsaBarrier", "ncclGetPeerPointerTeam",
                     "ncclLsaBarrierSessionInit", "ncclLsaBarrierSessionArrive", "ncclLsaBarrierSessionWait",
                     "ncclLsaBarrierSessionSync", "ncclLsaBarrierSessionDestroy", "ncclLsaReduceSum_F32",
                     "ncclLsaReduceSum_I32",
                     # the rest of the C ABI (numba_ranks.pointer_queries and surface)
                     "ncclGetLocalPointer", "ncclGetLsaPointer", "ncclGetPeerPointer", "ncclTeamRankToWorld",
                     "ncclTeamRankToLsa", "ncclTeamCft", "ncclTeamCftMultimem", "ncclGetResourceBufferLocalPointer",
                     "ncclGetResourceBufferLsaPointer", "ncclGetResourceBufferPeerPointer",
                     "ncclGetResourceBufferMultimemPointer", "ncclGetResourceBufferLsaMultimemPointer",
                     "ncclGetCftLeInfo", "ncclGetPeerLeInfo", "ncclGetMultimemLeInfo",
                     "ncclGetResourceBufferCftLeInfo", "ncclGetResourceBufferPeerLeInfo",
                     "ncclGetResourceBufferMultimemLeInfo", "ncclGin_C_initWithResourceSharingMode",
                     "ncclGinPutValue_v2", "ncclGinGet", "ncclGinGetSignalShadowPtr", "ncclLocalReduceSumCopy_F32"):
        assert function in externs, function


GATED = textwrap.dedent('''
    import json, site, sys, types as pytypes
    site.addsitedir(sys.argv[1])
    import numba.cuda.dispatcher as dispatcher
    dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))
    import numpy as np
    from numba import cuda
    from numba.cuda import types
    from ncclbind.device import intrinsics as nd

    def gin_only(comm_arg, ctx):
        net = nd.gin(nd.dev_comm(comm_arg), ctx)
        net.reset_signal(0)

    def multimem_only(comm_arg, win_handle, out):
        comm = nd.dev_comm(comm_arg)
        p = nd.multimem_pointer(nd.window(win_handle), 0, comm.lsa_multimem(), np.float32)
        out[0] = p[0]

    results = {}
    with nd.use_nccl_version(sys.argv[2]):
        for name, kernel, sig in (("gin", gin_only, (types.uint8[::1], types.int32)),
                                  ("multimem", multimem_only, (types.uint8[::1], types.uint64, types.float32[::1]))):
            try:
                cuda.compile_ptx(kernel, sig, cc=(9, 0))
                results[name] = {"ok": True}
            except Exception as error:
                results[name] = {"ok": False, "type": type(error).__name__, "message": str(error)}
    print(json.dumps(results))
''')


@needs_numba
def test_gin_and_multimem_are_refused_on_a_release_without_them():
    """On the oldest header set (its C++ API has no ncclGin_C and no C-style multimem pointer),
    gin(...) and multimem_pointer(...) alone are refused when the kernel compiles, naming the
    C-ABI function and the release the wrapper table says has it."""
    version = _sets()[0]
    missing = _wrapper_table().HEADER_SETS[version]["missing"]
    run = subprocess.run([sys.executable, "-c", GATED, str(NUMBA_SITE), version], capture_output=True, text=True,
                         env=_package_env(), timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    results = json.loads(run.stdout.strip().splitlines()[-1])
    for kind, function in (("gin", "ncclGin_C_init"), ("multimem", "ncclGetMultimemPointer")):
        if function not in missing:
            assert results[kind]["ok"], results[kind]
            continue
        assert results[kind]["type"] == "NcclSymbolNotFoundError", results[kind]
        assert results[kind]["message"].startswith(f"{function} needs NCCL >= {missing[function]}; loaded "), results[kind]


def _include_dir(version: str) -> pathlib.Path | None:
    for include in (REPO / ".cache" / "header_sets" / f"nccl-{version}" / "include",
                    pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"):
        header = include / "nccl.h"
        if (include / "nccl_device.h").is_file() and header.is_file() and \
                f"#define NCCL_VERSION_CODE {_api()['version_codes'][version]}" in header.read_text(errors="replace"):
            return include
    return None


# The kernels linked for real, one case each. A kernel linked with cubins links one unit per
# function it calls (linking.link_unit: nvcc + ptxas over that definition alone, 1 to 4 s each;
# the core and gin units as a whole took about 25 s and 45 s).
LINKED_KERNELS = ("oneshot", "gin_put_signal")


@needs_numba
@pytest.mark.parametrize("kernel", sorted(LINKED_KERNELS))
def test_a_kernel_links_against_the_compiled_wrapper(kernel, tmp_path):
    """The benchmark's one-shot kernel (barrier, LsaReduceSum_F32, barrier) and the GIN kernel of
    numba_ranks (gin put/signal/wait/flush) for the newest set: their PTX, assembled, links with
    nvlink against the wrapper's units that ncclbind.device links a kernel without LTO with
    (linking.link_unit of each function the PTX calls, one unit each) as linking.wrapper_cubin
    builds them (a prototype that differs would fail, and so would a function no unit defines:
    nvlink compares them and resolves every call); the release's session sizes fit the storage
    the IR gives (wrapper_cubin checks them before its first unit). Where the newest set can no
    longer provide a function the kernel calls (one its wrapper lists as dropped), the refusal must
    name it, and the kernel is linked for the newest set whose wrapper has the whole C ABI."""
    version = _sets()[-1]
    cuda_home = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    nvlink, ptxas = cuda_home / "bin" / "nvlink", cuda_home / "bin" / "ptxas"
    if not nvlink.is_file() or not ptxas.is_file():
        pytest.skip("needs the CUDA toolkit's ptxas/nvlink")
    ptx = tmp_path / f"{kernel}.ptx"
    results = _compile_all(version, keep=(kernel, str(ptx)))
    if not results[kernel]["ok"]:
        dropped = _wrapper_table().HEADER_SETS[version]["dropped"]
        message = results[kernel]["message"]
        assert results[kernel]["type"] == "NcclSymbolNotFoundError", results[kernel]
        assert any(message.startswith(f"{f} needs NCCL ") and f" to {last} " in message
                   for f, last in dropped.items()), results[kernel]
        version = [v for v in _sets() if not _wrapper_table().HEADER_SETS[v]["missing"]][-1]
        results = _compile_all(version, keep=(kernel, str(ptx)))
    assert results[kernel]["ok"], results[kernel]
    include = _include_dir(version)
    if include is None:
        pytest.skip(f"needs NCCL {version}'s headers")
    externs = results[kernel]["externs"]
    assert _function_names(externs) <= set(_wrapper_table().FUNCTIONS), externs
    env = _package_env(NCCLBIND_NCCL_INCLUDE=str(include), NCCLBIND_DEVICE_CACHE=str(tmp_path / "cache"))
    build = textwrap.dedent('''
        import json, sys
        from ncclbind.device import linking
        units = sorted({linking.link_unit(symbol, lto=False) for symbol in sys.argv[3:]})
        for i, unit in enumerate(units):
            open(f"{sys.argv[1]}/unit{i}.cubin", "wb").write(linking.wrapper_cubin(sys.argv[2], unit, (9, 0)))
        print(json.dumps(units))
    ''')
    run = subprocess.run([sys.executable, "-c", build, str(tmp_path), version, *externs], capture_output=True,
                         text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    units = json.loads(run.stdout.strip().splitlines()[-1])
    from ncclbind.device import linking
    # one unit per function the kernel calls, each that function's definition alone
    assert units == sorted(linking.ONE_FUNCTION + name for name in _function_names(externs)), units
    subprocess.run([str(ptxas), "-arch=sm_90", "-c", "-o", str(tmp_path / "kernel.o"), str(ptx)], check=True)
    link = subprocess.run([str(nvlink), "-arch=sm_90", str(tmp_path / "kernel.o"),
                           *(str(tmp_path / f"unit{i}.cubin") for i in range(len(units))),
                           "-o", str(tmp_path / "linked.cubin")], capture_output=True, text=True)
    assert link.returncode == 0, link.stderr
    assert (tmp_path / "linked.cubin").stat().st_size > 0


def test_unit_sources_split_the_wrapper():
    """Each unit keeps every declaration and only its own definitions; together they define
    every function of the release's wrapper exactly once. A kernel linked with cubins links, for
    each C-ABI function it calls, a unit that defines that function alone (linking.link_unit);
    with LTO, unit_of's unit, which defines the function and its twins."""
    from ncclbind.device import linking
    version = _sets()[-1]
    code = _api()["version_codes"][version]
    wrapper = _wrapper_table().HEADER_SETS[version]["source"]
    defined = [m.group(1) for m in linking._DEFINITION.finditer(wrapper)]
    assert sorted(defined) == sorted(set(defined)) and defined
    units = {linking.unit_of(name) for name in defined}
    seen = []
    for unit in units:
        seen += [m.group(1) for m in linking._DEFINITION.finditer(linking.unit_source(code, unit))]
    assert sorted(seen) == sorted(defined)
    twins = linking.twin_symbols(code)
    for symbol in set(defined) - twins:
        assert linking.link_unit(symbol, lto=True) == linking.unit_of(symbol)
        alone = linking.unit_source(code, linking.link_unit(symbol, lto=False))
        assert [m.group(1) for m in linking._DEFINITION.finditer(alone)] == [symbol], symbol


def test_reduce_copy_variants_come_from_the_irs_element_types():
    import numpy as np

    from ncclbind.device import ir_tables
    assert ir_tables.reduce_copy_function("ncclLsaReduceSum", np.float32) == "ncclLsaReduceSum_F32"
    assert ir_tables.reduce_copy_function("ncclLsaReduceSum", np.int64) == "ncclLsaReduceSum_I64"
    from ncclbind.errors import NcclInvalid
    with pytest.raises(NcclInvalid, match="no variant for complex64"):
        ir_tables.reduce_copy_function("ncclLsaReduceSum", np.complex64)


def test_kernel_arg_refuses_other_objects():
    from ncclbind.device import kernel_arg
    from ncclbind.errors import NcclInvalid
    with pytest.raises(NcclInvalid, match="resource must be a DevCommResource or a RegisteredWindowHandle"):
        kernel_arg(42)


def test_the_package_imports_without_numba():
    code = "import sys, ncclbind.device, ncclbind.device.layouts; print([m for m in sys.modules if m.startswith('numba')])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=_package_env())
    assert out.stdout.strip() == "[]"


INSTALLED = textwrap.dedent('''
    import json, sys
    import ncclbind
    from ncclbind.device import ir_tables, layouts
    from ncclbind.device import wrapper_table as device_wrapper
    out = {"package": ncclbind.__file__, "records": {}, "storage": {}}
    for version in ir_tables.header_set_versions():
        for name in layouts.MIRRORED_RECORDS:
            try:
                layout = layouts.record_layout(name, version)
            except Exception as error:
                out["records"][f"{version}/{name}"] = type(error).__name__
                continue
            out["records"][f"{version}/{name}"] = [layout.header_set, layout.size, layout.align,
                                                   [[f.name, f.offset] for f in layout.fields]]
    for name in [s["name"] for s in ir_tables.api()["device_storage"]]:
        for version in ir_tables.header_set_versions():
            try:
                layout = layouts.storage_layout(name, version)
                out["storage"][f"{version}/{name}"] = [layout.header_set, layout.size, layout.align]
            except Exception as error:
                out["storage"][f"{version}/{name}"] = type(error).__name__
    out["functions"] = {fn["name"]: fn.get("since") for fn in ir_tables.api()["device_functions"]}
    print(json.dumps(out))
''')


def test_an_installed_copy_reads_no_ir_files(tmp_path):
    """The package copied out of the checkout, NCCLBIND_IR_DIR unset, run from an empty folder:
    every mirrored record of every header set (or the oldest later set that has it, else the
    newest earlier one), every session storage and every device function of the wrapper's C ABI
    with its since are the IR files' own."""
    run = subprocess.run([sys.executable, "-c", INSTALLED], capture_output=True, text=True, env=_package_env(),
                         cwd=str(tmp_path), timeout=120)
    assert run.returncode == 0, run.stderr[-4000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["package"].startswith(str(_installed_copy()))
    assert not (_installed_copy().parent / "ir").exists() and not (_installed_copy() / "bindings").exists()
    from ncclbind.device import layouts
    sets = _sets()
    for version in sets:
        for name in layouts.MIRRORED_RECORDS:
            at = sets.index(version)
            later = [v for v in sets[at:] + sets[:at][::-1]  # nearest first: later, then earlier
                     if any(name in (r["name"], r.get("tag")) or r["name"] == name + "_t"
                            for r in json.loads((IR / f"nccl-{v}.json").read_text())["records"])]
            if not later:
                assert got["records"][f"{version}/{name}"] == "NcclInvalid"
                continue
            record = next(r for r in json.loads((IR / f"nccl-{later[0]}.json").read_text())["records"]
                          if name in (r["name"], r.get("tag")) or r["name"] == name + "_t")
            assert got["records"][f"{version}/{name}"] == [later[0], record["size"], record["align"],
                                                           [[f["name"], f["offset"]] for f in record["fields"]]]
    for storage in _api()["device_storage"]:
        for version in storage["versions"]:
            per_set = {s["name"]: s for s in json.loads((IR / f"nccl-{version}.json").read_text())["device_storage"]}
            assert got["storage"][f"{version}/{storage['name']}"] == [version, per_set[storage["name"]]["size"],
                                                                      per_set[storage["name"]]["align"]]
    c_abi = json.loads((REPO / "bindings/python/ncclbind/device/_generated/wrapper.json").read_text())["functions"]
    assert got["functions"] == {fn["name"]: fn.get("since") for fn in _api()["device_functions"] if fn["name"] in c_abi}
    assert len(got["functions"]) == len(c_abi)
