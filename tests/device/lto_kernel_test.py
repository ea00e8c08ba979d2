"""What makes a Numba kernel's calls of NCCL's device API as fast as CUDA C++ (no GPU needed):

- the wrapper's twins (generator/render/device_wrapper.py) are where ncclbind.device.linking
  looks for them: a by-reference twin for every function with a record by value, a twin per
  stateless coop for every function that takes a coop or a session, each in its function's unit;
- the benchmark's one-shot kernel (barrier, ncclLsaReduceSum, barrier in a loop), compiled by
  numba-cuda with link-time optimization and linked by nvJitLink with the wrapper's LTO-IR as
  ncclbind.device links it on a GPU, has no call left, no local memory, and the reduce of the
  CUDA C++ kernel (oneshot_kernel.cu, NCCL's templates over ncclCoopCta): the same float adds,
  within 1.1x of its PTX instructions. The same kernel without LTO calls the C ABI (the check
  sees calls where there are some);
- on a release whose headers have no ncclCoopAny (the wrapper defines its own: NCCL 2.28.9), Numba
  kernels on every coop kind and on an LSA barrier session link by LTO with that release's wrapper
  (its twins over ncclCoopCta/Warp/Thread, the stand-in's dispatch for lanes and warp spans) and
  call nothing;
- ncclbind.device.prepared_launch packs the arguments once and launches with one driver call.

    lto_kernel_test.py HEADER_SETS_JSON     # under Bazel; by hand: python3 -m pytest tests/device/lto_kernel_test.py
"""
import ctypes
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(os.path.abspath(__file__)).parent.parent.parent
sys.path.insert(0, str(REPO / "bindings" / "python"))
# numba-cuda is where tools/setup.sh put it, in the checkout (Bazel's runfiles have no .cache/)
NUMBA_SITE = Path(__file__).resolve().parents[2] / ".cache" / "numba-cuda"
KERNELS = REPO / "tests" / "multigpu" / "device"

import pytest  # noqa: E402

from ncclbind.device import wrapper_table as table  # noqa: E402
from ncclbind.device import cuda_source, ir_tables, linking  # noqa: E402


def _api() -> dict:
    return ir_tables.api()


def _newest() -> str:
    return list(table.HEADER_SETS)[-1]


def _include_dir(version: str) -> Path | None:
    """The header set's include folder: from the inputs' header_sets.json (Bazel), else the checkout's."""
    inputs = next((Path(a) for a in sys.argv[1:] if a.endswith("header_sets.json")), None)
    candidates = []
    if inputs is not None:
        hs = next((h for h in json.loads(inputs.read_text())["header_sets"] if h.get("version") == version), None)
        if hs is not None:
            candidates.append((inputs.parent / hs["include_dirs"][0]).absolute())
    candidates.append(REPO / ".cache" / "header_sets" / f"nccl-{version}" / "include")
    code = table.HEADER_SETS[version]["version_code"]
    for include in candidates:
        header = include / "nccl.h"
        if header.is_file() and f"#define NCCL_VERSION_CODE {code}" in header.read_text(errors="replace"):
            return include
    return None


# ---- the twins ------------------------------------------------------------------------------

def _has_record(fn: dict) -> bool:
    return fn["result"]["kind"] == "record" or any(p["type"]["kind"] == "record" for p in fn.get("params", ()))


def _takes_coop_or_session(fn: dict) -> bool:
    storage = {s["name"] for s in _api().get("device_storage", ())}
    for p in fn.get("params", ()):
        t = p["type"]
        if t["kind"] == "record" and t.get("name") == "ncclCoopAny":
            return True
        pointee = t.get("pointee", {}).get("name") if t["kind"] == "pointer" else None
        if pointee in storage or (pointee == "ncclCoopAny" and p["spelling"].startswith("const ")):
            return True
    return False


def test_every_release_has_the_twins_linking_calls():
    kinds = [k for k in (linking.coop_kind(fn["name"]) for fn in _api()["device_functions"]) if k]
    assert sorted(kinds) == ["Cta", "Thread", "Warp"], kinds  # ncclCoopAnyInit{Cta,Warp,Thread} take only the coop
    checked = 0
    for version, release in table.HEADER_SETS.items():
        code, source = release["version_code"], release["source"]
        twins = linking.twin_symbols(code)
        provided = [fn for fn in _api()["device_functions"] if fn["name"] not in release["missing"]]
        defined = set(re.findall(r"^__device__ [^;{}]*?\b(\w+)\([^;{}]*\)\s*\{", source, re.M))
        assert twins <= defined
        # every twin is compiled only for the kernels that link the wrapper (linking.TWINS_MACRO)
        block = source[source.index(f"#ifdef {linking.TWINS_MACRO}"):]
        assert all(re.search(rf"^__device__ [^;{{}}]*\b{t}\(", block, re.M) for t in twins)
        for fn in provided:
            name = fn["name"]
            with_coop = _takes_coop_or_session(fn) and not fn.get("header_inline") and not linking.coop_kind(name) \
                and not name.startswith("ncclCoopAnyInit")
            for kind in kinds if with_coop else ():
                twin = linking.twin(code, name, kind)
                assert twin == f"nb_{kind.lower()}_{name}", (version, name, kind, twin)
                assert linking.unit_of(twin) == linking.unit_of(name)
                checked += 1
            if _has_record(fn):
                assert linking.twin(code, name) == f"nb_ref_{name}", (version, name)
                assert linking.unit_of(f"nb_ref_{name}") == linking.unit_of(name)
                checked += 1
            elif not with_coop:
                assert linking.twin(code, name) is None and linking.twin(code, name, "Cta") is None, (version, name)
    assert checked > 100


def test_a_session_twin_holds_the_session_of_its_coop():
    source = table.HEADER_SETS[_newest()]["source"]
    twin = re.search(r"^__device__ void nb_cta_ncclLsaBarrierSessionSync\(.*?^\}", source, re.M | re.S).group(0)
    assert "using ncclCoopAny = ncclCoopCta;" in twin
    assert "ncclLsaBarrierSession<ncclCoopAny> bar;" in twin  # declared after the alias: the Cta session
    assert "static_assert(sizeof(ncclLsaBarrierSession_C) <= sizeof(::ncclLsaBarrierSession_C)" in twin


# ---- the one-shot kernel, linked with LTO as on a GPU ------------------------------------------

LINK = textwrap.dedent('''
    import json, re, site, sys, types as pytypes
    site.addsitedir(sys.argv[1])
    sys.path.insert(0, sys.argv[2])
    # No GPU here: numba-cuda asks the current device for its compute capability; an H100/H200's.
    device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))
    import numba.cuda.dispatcher as dispatcher
    dispatcher.get_current_device = device
    from numba import cuda
    cuda.get_current_device = device
    import numba.cuda.codegen as codegen
    codegen.CUDACodeLibrary._ensure_cc = lambda self, cc: cc if cc is not None else (9, 0, "a")
    from numba.cuda import types
    from numba.cuda.dispatcher import _Kernel
    from ncclbind.device import intrinsics as nd, linking
    import oneshot_bench
    sig = (types.uint8[::1], types.uint64, types.float32[::1], types.int64, types.int64)
    out = {"lto_available": linking.lto_available()}
    with nd.use_nccl_version(sys.argv[3]):
        kernel = _Kernel(oneshot_bench.oneshot_all_reduce_loop.py_func, sig, lto=True)
        out["lto"] = kernel.library.get_lto_ptx(cc=(9, 0, "a"))
        plain = _Kernel(oneshot_bench.oneshot_all_reduce_loop.py_func, sig, lto=False)
        out["no_lto"] = plain.library.get_asm_str(cc=(9, 0, "a"))
    print(json.dumps(out))
''')


def _instructions(ptx: str) -> list[str]:
    return [line.strip() for line in ptx.replace("\0", "").splitlines()
            if re.match(r"\s+[a-z@]", line) and not line.strip().startswith("//") and not line.strip().startswith(".")]


def _numba_missing() -> str:
    """Why numba-cuda with nvJitLink cannot be imported here ("" when it can)."""
    probe = "import site, sys; site.addsitedir(sys.argv[1]); import numba.cuda, cuda.bindings.nvjitlink"
    run = subprocess.run([sys.executable, "-c", probe, str(NUMBA_SITE)], capture_output=True, text=True)
    return "" if run.returncode == 0 else (run.stderr.strip().splitlines() or ["?"])[-1]


def _link_in_subprocess(script: str, args: list[str], include: Path | None, version: str, tmp_path):
    """Runs a link script in a fresh interpreter (numba-cuda from NUMBA_SITE, the IR installed with
    the package, `version`'s headers, a device cache of its own) and returns the finished run;
    skips when the headers or numba-cuda with nvJitLink are missing."""
    if include is None:
        pytest.skip(f"needs NCCL {version}'s headers")
    if _numba_missing():
        pytest.skip(f"needs numba-cuda with nvJitLink (tools/setup.sh): {_numba_missing()}")
    env = {k: v for k, v in os.environ.items() if k != "NCCLBIND_IR_DIR"}
    env.update(PYTHONPATH=os.pathsep.join(sys.path), NCCLBIND_NCCL_INCLUDE=str(include),
               NCCLBIND_DEVICE_CACHE=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-c", script, str(NUMBA_SITE), *args], capture_output=True,
                         text=True, env=env, timeout=900)
    assert run.returncode == 0, run.stderr[-6000:]
    return run


def test_the_oneshot_kernel_inlines_the_device_api_like_cuda_cpp(tmp_path):
    version = _newest()
    include = _include_dir(version)
    run = _link_in_subprocess(LINK, [str(KERNELS), version], include, version, tmp_path)
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["lto_available"] == [True, ""], got["lto_available"]
    numba_ptx, plain_ptx = _instructions(got["lto"]), _instructions(got["no_lto"])
    # Without LTO the kernel calls the C ABI, each call with its arguments in .param space:
    # the checks below see calls where there are some.
    assert [i for i in plain_ptx if i.startswith("call")], "the kernel without LTO calls nothing"
    assert [i for i in numba_ptx if i.startswith("call")] == [], [i for i in numba_ptx if "call" in i][:5]
    assert not [i for i in numba_ptx if ".local" in i], "local memory in the LTO kernel"
    cxx_ptx = tmp_path / "cxx.ptx"
    nvcc = cuda_source._nvcc()
    subprocess.run([nvcc, *cuda_source.compile_options(version, include_dirs=[include]), "-arch=sm_90a", "-ptx",
                    "-o", str(cxx_ptx), str(KERNELS / "oneshot_kernel.cu")], check=True, capture_output=True)
    cxx = _instructions(cxx_ptx.read_text())
    adds = [sum(1 for i in ptx if re.match(r"add(\.rn)?\.f32\b", i)) for ptx in (numba_ptx, cxx)]
    assert adds[0] == adds[1] and adds[1] > 0, f"float adds: numba {adds[0]}, CUDA C++ {adds[1]}"
    assert len(numba_ptx) <= 1.1 * len(cxx), f"PTX instructions: numba {len(numba_ptx)}, CUDA C++ {len(cxx)}"
    print(f"PTX instructions: numba (LTO) {len(numba_ptx)}, CUDA C++ {len(cxx)}; float adds {adds[0]}; "
          f"numba without LTO: {sum(1 for i in plain_ptx if i.startswith('call'))} calls")


# ---- a release whose wrapper defines its own ncclCoopAny -----------------------------------------

LINK_COOP = textwrap.dedent('''
    import json, site, sys, types as pytypes
    site.addsitedir(sys.argv[1])
    device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))
    import numba.cuda.dispatcher as dispatcher
    dispatcher.get_current_device = device
    from numba import cuda
    cuda.get_current_device = device
    import numba.cuda.codegen as codegen
    codegen.CUDACodeLibrary._ensure_cc = lambda self, cc: cc if cc is not None else (9, 0, "a")
    import numpy as np
    from numba.cuda import types
    from numba.cuda.dispatcher import _Kernel
    from ncclbind.device import intrinsics as nd, linking

    def coop_kinds(out):
        t = cuda.threadIdx.x
        c = nd.coop_cta()
        out[0, t] = c.thread_rank() + c.size() + c.num_threads()
        c.sync()
        w = nd.coop_warp()
        out[1, t] = w.thread_rank() + w.size() + w.num_threads()
        w.sync()
        s = nd.coop_thread()
        out[2, t] = s.thread_rank() + s.size() + s.num_threads()
        s.sync()
        lanes = nd.coop_lanes(0x0F0F0F0F)
        out[3, t] = lanes.thread_rank() + lanes.size() + lanes.num_threads()
        lanes.sync()
        span = nd.coop_warp_span(0, 2, 1)
        out[4, t] = span.thread_rank() + span.size() + span.num_threads()
        span.sync()

    def lsa_barrier(comm_arg, win_handle):
        comm = nd.dev_comm(comm_arg)
        win = nd.window(win_handle)
        team = comm.team_lsa()
        coop = nd.coop_cta()
        bar = nd.lsa_barrier_session(coop, comm, team, comm.lsa_barrier(), cuda.blockIdx.x)
        bar.sync(coop, nd.MEMORY_ORDER_RELAXED)
        peer = nd.peer_pointer(win, 0, team, (team.rank + 1) % team.nRanks, np.float32)
        peer[cuda.threadIdx.x] = 1.0
        bar.arrive(coop, nd.MEMORY_ORDER_RELEASE)
        bar.wait(coop, nd.MEMORY_ORDER_ACQUIRE)
        bar.destroy()

    out = {"lto_available": linking.lto_available()}
    with nd.use_nccl_version(sys.argv[2]):
        out["coop_kinds"] = _Kernel(coop_kinds, (types.int32[:, ::1],), lto=True).library.get_lto_ptx(cc=(9, 0, "a"))
        out["lsa_barrier"] = _Kernel(lsa_barrier, (types.uint8[::1], types.uint64),
                                     lto=True).library.get_lto_ptx(cc=(9, 0, "a"))
    print(json.dumps(out))
''')


def _own_coop_any() -> list[str]:
    """The releases whose generated wrapper defines its own ncclCoopAny (policy/device_wrapper.toml [polyfill])."""
    return [v for v, r in table.HEADER_SETS.items()
            if re.search(r"^struct alignas\(\d+\) ncclCoopAny \{", r["source"], re.M)]


@pytest.mark.parametrize("version", _own_coop_any() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no release's wrapper defines its own ncclCoopAny"))])
def test_coop_kinds_and_lsa_barrier_link_by_lto_over_the_wrappers_own_coop_any(tmp_path, version):
    missing = table.HEADER_SETS[version]["missing"]
    assert not [n for n in missing if n.startswith("ncclCoop") or n.startswith("ncclLsaBarrierSession")], missing
    run = _link_in_subprocess(LINK_COOP, [version], _include_dir(version), version, tmp_path)
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["lto_available"] == [True, ""], got["lto_available"]
    for kernel in ("coop_kinds", "lsa_barrier"):
        ptx = _instructions(got[kernel])
        assert ptx, f"{kernel}: no PTX"
        assert [i for i in ptx if i.startswith("call")] == [], (kernel, [i for i in ptx if "call" in i][:5])
        print(f"NCCL {version}, {kernel}: {len(ptx)} PTX instructions, no call, "
              f"{sum(1 for i in ptx if '.local' in i)} local-memory accesses")
    # The CTA barrier: the twins over ncclCoopCta leave no coop on the stack.
    assert not [i for i in _instructions(got["lsa_barrier"]) if ".local" in i], "local memory in the LTO barrier kernel"


# ---- prepared_launch ------------------------------------------------------------------------

class _Kernel:
    """What prepared_launch reads of a compiled numba-cuda kernel (its _Kernel)."""
    debug = False
    cooperative = False

    def __init__(self):
        from types import SimpleNamespace
        function = SimpleNamespace(handle=0x1234, attrs=SimpleNamespace(regs=248, local=0))
        self._codelibrary = SimpleNamespace(get_cufunc=lambda: function)
        self.py_func = _Kernel

    def _prepare_args(self, ty, val, stream, retr, kernelargs):
        # numba-cuda's marshalling: an array as meminfo, parent, size, itemsize, data, shape, strides
        if ty == "device array":
            kernelargs += [0, 0, 4, 4, val["ptr"], 4, 4]
        elif ty == "host array":
            retr.append(lambda: None)
            kernelargs += [0, 0, 4, 4, 0xdead, 4, 4]
        else:
            kernelargs.append(ctypes.c_int64(val))


class _Dispatcher:
    def __init__(self):
        self.kernel = _Kernel()

    def typeof_pyval(self, value):
        return value["type"] if isinstance(value, dict) else "int64"

    def compile(self, argtypes):
        self.argtypes = argtypes
        return self.kernel


@pytest.fixture
def driver(monkeypatch):
    if _numba_missing():
        pytest.skip(f"needs cuda-bindings (tools/setup.sh puts numba-cuda's dependencies in .cache/numba-cuda): "
                    f"{_numba_missing()}")
    import site
    site.addsitedir(str(NUMBA_SITE))
    from cuda.bindings import driver as cuda_driver
    calls = []

    def launch(*args):
        calls.append(args)
        return (cuda_driver.CUresult.CUDA_SUCCESS,)
    monkeypatch.setattr(cuda_driver, "cuLaunchKernel", launch)
    cuda_driver.calls = calls
    return cuda_driver


def test_prepared_launch_passes_the_arguments_once_packed(driver):
    from ncclbind.device import prepared_launch
    dispatcher = _Dispatcher()
    launch = prepared_launch(dispatcher, 4, (256,), ({"type": "device array", "ptr": 0x7000}, 1 << 40),
                             stream=0x55)
    assert dispatcher.argtypes == ("device array", "int64")
    assert (launch.registers, launch.local_bytes) == (248, 0)
    launch()
    launch()
    assert len(driver.calls) == 2 and driver.calls[0] == driver.calls[1]
    f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra = driver.calls[0]
    assert (int(f), gx, gy, gz, bx, by, bz, shmem, int(stream), extra) == (0x1234, 4, 1, 1, 256, 1, 1, 0, 0x55, 0)
    pointers = (ctypes.c_void_p * 8).from_address(params)
    values = [ctypes.c_uint64.from_address(p).value for p in pointers]
    assert values == [0, 0, 4, 4, 0x7000, 4, 4, 1 << 40]


def test_prepared_launch_refuses_what_it_cannot_launch_as_prepared(driver):
    from ncclbind.device import prepared_launch
    from ncclbind.errors import NcclInvalid, NcclUnhandledCudaError
    with pytest.raises(NcclInvalid, match=r"args\[1\] is host memory"):
        prepared_launch(_Dispatcher(), 1, 32, (3, {"type": "host array"}))
    debug = _Dispatcher()
    debug.kernel.debug = True
    with pytest.raises(NcclInvalid, match="debug=True"):
        prepared_launch(debug, 1, 32, ())
    for bad in (0, (1, 2, 3, 4), 2.0, True):
        with pytest.raises(NcclInvalid, match="griddim"):
            prepared_launch(_Dispatcher(), bad, 32, ())
    with pytest.raises(NcclInvalid, match="kernel must be a Numba-CUDA kernel"):
        prepared_launch(print, 1, 32, ())
    launch = prepared_launch(_Dispatcher(), 1, 32, ())
    driver.cuLaunchKernel = lambda *args: (driver.CUresult.CUDA_ERROR_INVALID_VALUE,)
    launch._launch = driver.cuLaunchKernel
    with pytest.raises(NcclUnhandledCudaError, match="CUDA_ERROR_INVALID_VALUE"):
        launch()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-rs"] + [a for a in sys.argv[1:] if not a.endswith(".json")]))
