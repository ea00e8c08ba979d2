"""ncclbind.ep end to end on a CPU, over the stand-ins fake_nccl.c (libnccl) and fake_nccl_ep.c
(libnccl_ep, which logs every call, checks stamps, and moves data for one-rank LL expert-major):
the config and tensor-set records and their stamps, the enums, every argument check (each
refusal names the argument and reaches no NCCL EP function), the call sequence, the per-step
cache, the allocator callbacks, DevTensor's lifetime, destroyed groups and handles, and one-rank
dispatch/combine checked by the GPU test's reference (tests/multigpu/ep/python/ep_reference.py).

The libraries are chosen once per process, so this module runs itself again in a subprocess
with NCCLBIND_NCCL_PATH / NCCLBIND_NCCL_EP_PATH set to the stand-ins (built here with the C
compiler, or given by NCCLBIND_FAKE_NCCL / NCCLBIND_FAKE_NCCL_EP, e.g. from Bazel).
"""
from __future__ import annotations

import ctypes
import gc
import inspect
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from stand_ins import INSIDE, given_or_built, run_over_stand_in

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests" / "multigpu" / "ep" / "python"))


def build_ep_stand_in(directory: pathlib.Path) -> str:
    return given_or_built("NCCLBIND_FAKE_NCCL_EP", directory / "libnccl_ep.so",
                          ["-O1", "-fvisibility=hidden", "-std=c11", f"-I{ROOT / 'bindings' / 'c' / 'include'}",
                           f"-I{ROOT / 'runtime' / 'include'}", str(HERE / "fake_nccl_ep.c")])


def kernel_headers_facts(api) -> tuple[str, int, str, int]:
    """(the stand-in libnccl_ep's version (the EP set's), the NCCL version its kernel headers must
    be (the IR's kernel_headers) and its code, another NCCL release's code), from the IR."""
    ep_api = api["nccl_ep"]
    ep_version = ep_api["versions"][-1]
    needed = ep_api["kernel_headers"][ep_version]
    other = next(code for code in api["nccl"]["version_codes"].values() if code != needed["version_code"])
    return ep_version, needed["version_code"], needed["version"], other


def nccl_version(api, code: int) -> str:
    return next(v for v, c in api["nccl"]["version_codes"].items() if c == code)


def nccl_header(home: pathlib.Path, version_code: int) -> None:
    """home/include/nccl.h as NCCL's wheels write it: the version code on a #define line."""
    (home / "include").mkdir(parents=True, exist_ok=True)
    (home / "include" / "nccl.h").write_text(f"#define NCCL_MAJOR 2\n#define NCCL_VERSION_CODE {version_code}\n")


def stand_ins(directory: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    from stand_ins import build_stand_in
    directory.mkdir(exist_ok=True)
    nccl = pathlib.Path(os.environ.get("NCCLBIND_FAKE_NCCL") or build_stand_in(directory))
    return nccl, pathlib.Path(build_ep_stand_in(directory))


def run_probe(probe: str, env: dict) -> str:
    env = dict(env, CUDA_VISIBLE_DEVICES="", NCCLBIND_CUDA_BACKEND="helper",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout


if not INSIDE:
    def test_ncclbind_ep_over_the_stand_in_libraries(tmp_path, monkeypatch):
        ep_library = build_ep_stand_in(tmp_path)
        os.environ["NCCLBIND_NCCL_EP_PATH"] = os.path.abspath(ep_library)
        monkeypatch.delenv("NCCL_HOME", raising=False)  # the stand-ins' kernel headers: UNSET, not refused
        run_over_stand_in(__file__, tmp_path)

    def test_loading_from_wheel_layouts_points_nccl_ep_at_their_headers(tmp_path, api):
        """NCCL EP compiles its kernels from the headers under NCCL_EP_HOME and NCCL_HOME; the
        runtime sets them from the loaded wheels' folders when the caller has not, NCCL_HOME only
        to a home holding the NCCL release the IR names as libnccl_ep's kernel headers (one
        implementation, in runtime/src/kernel_headers.c, for C, Python and Rust): seen here by a Python
        process, through the C environment NCCL EP reads and ep.kernel_headers()."""
        _, needed, _, other = kernel_headers_facts(api)
        nccl, ep_library = stand_ins(tmp_path / "built")
        wheel_nccl = tmp_path / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
        wheel_ep = tmp_path / "nccl" / "ep" / "lib" / "cu13" / "libnccl_ep.so"
        for source, target in ((nccl, wheel_nccl), (ep_library, wheel_ep)):
            target.parent.mkdir(parents=True)
            shutil.copyfile(source, target)
        (tmp_path / "nccl" / "ep" / "include" / "nccl_ep" / "device").mkdir(parents=True)
        probe = ("import ctypes, ncclbind; from ncclbind import ep; ncclbind.library_info('nccl_ep'); "
                 "getenv = ctypes.CDLL(None).getenv; getenv.restype = ctypes.c_char_p; "
                 "print(getenv(b'NCCL_EP_HOME').decode(), (getenv(b'NCCL_HOME') or b'-').decode(), "
                 "ep.kernel_headers()[0].name)")
        env = {k: v for k, v in os.environ.items() if k not in ("NCCL_HOME", "NCCL_EP_HOME")}
        env.update(NCCLBIND_NCCL_PATH=str(wheel_nccl), NCCLBIND_NCCL_EP_PATH=str(wheel_ep))
        wheel_home = str((tmp_path / "nvidia" / "nccl").resolve())
        for wheel_headers, mine, nccl_home, status in (
                (needed, None, wheel_home, "MATCH"),
                (other, None, "-", "UNSET"),              # another release's headers: not taken
                (needed, "/mine", "/mine", "MISMATCH")):  # the caller's is kept (no nccl.h there)
            nccl_header(tmp_path / "nvidia" / "nccl", wheel_headers)
            run_env = dict(env, **({"NCCL_HOME": mine} if mine else {}))
            assert run_probe(probe, run_env).split() == [str((tmp_path / "nccl" / "ep").resolve()), nccl_home,
                                                         status]

    def test_group_create_refuses_a_nccl_home_of_another_release_before_nccl_ep(tmp_path, api):
        """NCCL_HOME holds another release's headers than libnccl_ep's kernels need: Group.create
        raises NcclInvalid naming NCCL_HOME, with the runtime's message (both releases, the fix),
        and no NCCL EP function runs (the stand-in's log)."""
        ep_version, needed, needed_version, other = kernel_headers_facts(api)
        nccl, ep_library = stand_ins(tmp_path / "built")
        nccl_header(tmp_path / "mine", other)
        probe = textwrap.dedent("""
            import ctypes, json, os, ncclbind
            from ncclbind import ep
            from ncclbind.errors import NcclInvalid
            log = ctypes.CDLL(os.environ["NCCLBIND_NCCL_EP_PATH"])
            log.fakeEpCallLog.restype = ctypes.c_char_p
            comm = ncclbind.Communicator.init(1, 0, ncclbind.get_unique_id())
            status, message = ep.kernel_headers()
            log.fakeEpClearCallLog()
            try:
                ep.Group.create(comm, ep.GroupConfig(algorithm="low_latency", num_experts=8,
                                                     max_dispatch_tokens_per_rank=8, max_token_bytes=2048))
                refused = None
            except NcclInvalid as e:
                refused = {"argument": e.argument, "message": str(e)}
            print(json.dumps({"status": status.name, "message": message, "refused": refused,
                              "calls": log.fakeEpCallLog().decode().split()}))
            comm.destroy()
        """)
        env = {k: v for k, v in os.environ.items() if k != "NCCL_EP_HOME"}
        env.update(NCCLBIND_NCCL_PATH=str(nccl), NCCLBIND_NCCL_EP_PATH=str(ep_library),
                   NCCL_HOME=str(tmp_path / "mine"))
        seen = json.loads(run_probe(probe, env).splitlines()[-1])
        assert seen["status"] == "MISMATCH"
        assert seen["refused"] == {"argument": "NCCL_HOME", "message": seen["message"]}
        assert seen["calls"] == []
        for text in (f"libnccl_ep {ep_version}", f"NCCL {needed_version}'s device headers",
                     f"NCCL_HOME={tmp_path / 'mine'} holds NCCL {nccl_version(api, other)}'s headers",
                     "nvidia-nccl-cu", f"=={needed_version}, then NCCL_HOME=DIR/nvidia/nccl"):
            assert text in seen["message"], (text, seen["message"])

else:
    import ep_reference as ref
    import ncclbind
    from ncclbind import _nccl_ep, ep
    from ncclbind.errors import NcclError, NcclInvalid, NcclInvalidArgumentError
    from ncclbind.ep._generated.methods import STEPS
    from ncclbind.ep.base import checks
    from stand_ins import DeviceArray

    class EpLog:
        """The stand-in's call log: the function names, in order (fakeEpCallLog)."""

        def __init__(self):
            self.library = ctypes.CDLL(os.environ["NCCLBIND_NCCL_EP_PATH"])
            self.library.fakeEpCallLog.restype = ctypes.c_char_p

        def clear(self):
            self.library.fakeEpClearCallLog()

        def lines(self):
            return self.library.fakeEpCallLog().decode().splitlines()

        def calls(self):
            return [line.split()[0] for line in self.lines()]

    @pytest.fixture
    def log():
        log = EpLog()
        log.clear()
        return log

    def dev(values, dtype):
        return DeviceArray(np.ascontiguousarray(np.asarray(values, dtype=dtype)))

    @pytest.fixture
    def comm():
        c = ncclbind.Communicator.init(1, 0, ncclbind.get_unique_id())
        yield c
        c.destroy()

    # experts, tokens, top-k, hidden (LL combine takes multiples of 512: the policy's limit), max tokens per rank
    E, T, K, H, MAX = 8, 5, 2, 512, 8

    def ll_config(**kwargs):
        values = dict(algorithm="low_latency", num_experts=E, max_dispatch_tokens_per_rank=MAX, max_token_bytes=H * 4)
        values.update(kwargs)
        return ep.GroupConfig(**values)

    @pytest.fixture
    def group(comm):
        g = ep.Group.create(comm, ll_config())
        yield g
        g.destroy()

    @pytest.fixture
    def routing():
        return dev(ref.routing(0, T, K, E, seed=3), np.int64)

    @pytest.fixture
    def handle(group, routing):
        h = group.create_handle("expert_major", routing)
        yield h
        h.destroy()

    def refused(log, argument, call, *args, match=None, **kwargs):
        """call(*args, **kwargs) raises NcclInvalid naming `argument`, and no NCCL EP function ran."""
        log.clear()
        with pytest.raises(NcclInvalid, match=match) as e:
            call(*args, **kwargs)
        assert e.value.argument == argument, (e.value.argument, str(e.value))
        assert log.calls() == [], log.lines()
        return e.value

    # ---- records, stamps, enums ---------------------------------------------------------------

    def test_the_stand_in_is_loaded():
        assert ep.get_version() == 200
        assert os.path.realpath(ncclbind.library_info("nccl_ep").path) == \
            os.path.realpath(os.environ["NCCLBIND_NCCL_EP_PATH"])

    @pytest.mark.parametrize("cls", [ep.GroupConfig, ep.HandleConfig, ep.DispatchConfig, ep.CombineConfig,
                                     ep.CompleteConfig, ep.TensorAllocConfig])
    def test_a_config_record_is_stamped_as_its_initializer_stamps_it(api, cls):
        initializer = next(i for i in api["nccl_ep"]["initializers"] if i["record"] == cls._c_name)
        record = cls().record
        for value in initializer["values"]:
            assert getattr(record, value["field"]) == value["value"], value
        assert record.nbytes == next(v for v in api["nccl_ep"]["record_variants"][cls._c_name])["record"]["size"]

    def test_config_values_reach_the_record_and_read_back(api):
        config = ep.GroupConfig(algorithm="high_throughput", num_experts=64, max_dispatch_tokens_per_rank=128,
                                max_recv_tokens_per_rank=512, max_token_bytes=14336, zero_copy="on",
                                overflow_policy=ep.OverflowPolicy.DROP, timeout_ns=2 ** 40, enable_mask=1)
        record = config.record
        assert (record.algorithm, record.num_experts, record.max_recv_tokens_per_rank) == (1, 64, 512)
        assert (record.zero_copy, record.overflow_policy, record.timeout_ns) == (2, 2, 2 ** 40)
        assert config.num_experts == 64 and config.algorithm == 1
        with pytest.raises(AttributeError):
            config.num_experts = 3  # immutable: its record is built once

    @pytest.mark.parametrize("kwargs, argument", [
        ({"algorithm": "medium_latency"}, "algorithm"), ({"algorithm": 7}, "algorithm"),
        ({"num_experts": -1}, "num_experts"), ({"num_experts": 2 ** 32}, "num_experts"),
        ({"num_experts": True}, "num_experts"), ({"timeout_ns": 1.5}, "timeout_ns"),
        ({"alloc": 5}, "alloc")])
    def test_a_bad_config_value_is_refused_naming_the_field(kwargs, argument):
        with pytest.raises(NcclInvalid) as e:
            ep.GroupConfig(**kwargs)
        assert e.value.argument == argument

    def test_the_enums_are_the_headers_enums(api):
        names = {"ncclEpAlgorithm_t": ep.Algorithm, "ncclEpLayout_t": ep.Layout, "ncclEpPassDir_t": ep.PassDir,
                 "ncclEpOverflowPolicy_t": ep.OverflowPolicy, "ncclEpZeroCopyMode_t": ep.ZeroCopyMode,
                 "ncclEpExpertIdKind_t": ep.ExpertIdKind, "ncclEpDispQuant_t": ep.DispatchQuantizationRecipe,
                 "ncclEpCombQuant_t": ep.CombineQuantizationRecipe}
        for enum in api["nccl_ep"]["enums"]:
            cls = names.pop(enum["name"])
            assert sorted(int(m) for m in cls) == sorted(v["value"] for v in enum["values"]), enum["name"]
        assert not names

    def test_a_tensor_is_an_nccl_ep_tensor_descriptor_over_the_buffer():
        array = dev(np.zeros((3, 4)), np.float32)
        t = ep.Tensor(array)
        record = _nccl_ep.ncclEpTensor_t.from_address(t.address)
        assert t.ptr == t.address  # nccl.ep's Tensor.ptr: the descriptor
        assert (record.ndim, record.datatype, record.data) == (2, int(ncclbind.NcclDataType.FLOAT32), t.data)
        assert t.data == array.array.ctypes.data and t.buffer is array
        assert (ctypes.c_size_t * 2).from_address(record.sizes)[:] == [3, 4]
        assert record.magic == _nccl_ep.NCCL_EP_TENSOR_MAGIC and record.win_hdl == 0
        spec = ep.Tensor((t.data, (12,), "float32", 0))
        assert spec.shape == (12,) and spec.device == 0

    def test_a_tensor_needs_a_dimension():
        with pytest.raises(NcclInvalid, match="0-dimensional") as e:
            ep.Tensor(DeviceArray(np.asarray(1.0, dtype=np.float32)), argument="tokens")
        assert e.value.argument == "tokens"
        array = dev(np.zeros(4), np.float32)
        with pytest.raises(NcclInvalid, match="needs one or more extents") as e:
            ep.Tensor((array.array.ctypes.data, (), "float32"), argument="tokens")
        assert e.value.argument == "tokens"

    # ---- the checks, each before NCCL EP ------------------------------------------------------

    def test_group_create_checks_its_config_and_communicator(log, comm):
        refused(log, "config", ep.Group.create, comm, ep.GroupConfig(max_dispatch_tokens_per_rank=8),
                match="num_experts, max_token_bytes must be above 0")
        # libnccl_ep asserts max_token_bytes > 0 in ncclEpCreateGroup (the process would end)
        refused(log, "config", ep.Group.create, comm, ll_config(max_token_bytes=0),
                match="max_token_bytes must be above 0")
        refused(log, "config", ep.Group.create, comm, None, match="required")
        refused(log, "config", ep.Group.create, comm, ep.HandleConfig(), match="not an ep.GroupConfig")
        refused(log, "comm", ep.Group.create, "comm", ll_config())

    def test_a_with_block_destroys_and_a_forgotten_owner_warns(log, comm, routing):
        """Group, Handle and DevTensor (base/lifetime.py's Destroyable)."""
        with ep.Group.create(comm, ll_config()) as g:
            with g.create_handle("expert_major", routing) as h:
                assert h.handle and not h.closed
            assert h.closed and "handle_destroy" in log.calls()
        assert g.closed and "group_destroy" in log.calls()
        with ep.DevTensor((4, 8), "float32", device=0) as t:
            assert not t.closed
        assert t.closed
        for make in (lambda: ep.Group.create(comm, ll_config()),
                     lambda: ep.Group.create(comm, ll_config()).create_handle("expert_major", routing),
                     lambda: ep.DevTensor((4, 8), "float32", device=0)):
            owner = make()
            with pytest.warns(ResourceWarning, match="was not destroyed"):
                owner.__del__()
            owner.destroy()

    def test_with_nccl_home_unset_and_no_wheel_home_the_group_is_made_and_internal_errors_say_why(
            api, log, handle, monkeypatch):
        """The stand-ins lie in flat folders and NCCL_HOME is unset: UNSET (nothing to compile
        real kernels with, but a stand-in compiles none), so groups are made; an ncclInternalError
        of an EP call, on the checked path and on the per-step path, carries the runtime's message."""
        from ncclbind.ep._generated import methods as ep_methods
        from ncclbind.errors import NcclInternalError, error_for_result
        _, _, needed_version, _ = kernel_headers_facts(api)
        status, message = ep.kernel_headers()
        assert status is ep.KernelHeaders.UNSET and "NCCL_HOME is not set" in message
        assert f"NCCL {needed_version}'s device headers" in message

        def failing(code: int, name: str):
            def call(*args):
                raise error_for_result(code, "ncclEpComplete", name, "", "")
            return call

        monkeypatch.setattr(_nccl_ep, "get_version", failing(3, "ncclInternalError"))
        monkeypatch.setattr(ep_methods, "_complete", failing(3, "ncclInternalError"))
        for call in (ep.get_version, handle.complete):  # the checked path, the per-step path
            with pytest.raises(NcclInternalError) as e:
                call()
            assert str(e.value) == f"ncclEpComplete failed: ncclInternalError\nhint: {message}"
        monkeypatch.setattr(_nccl_ep, "get_version", failing(5, "ncclInvalidUsage"))
        with pytest.raises(NcclError) as e:  # another code: no hint
            ep.get_version()
        assert str(e.value) == "ncclEpComplete failed: ncclInvalidUsage"

    def test_an_nccl_last_error_older_than_the_failed_call_says_so(log, comm, routing):
        """NCCL EP sets no error text, so a failed EP call carries NCCL's last error, which a warning
        while the group was made may have set (on 2x H200, the GDRCopy one): a text unchanged since
        the last group or handle was made is labelled not this call's (last_error_stale), on the
        checked and the per-step path; a text set after it is reported as it is; the kernel
        headers' hint (NCCL_HOME unset here) still follows an ncclInternalError."""
        from ncclbind.errors import NcclInternalError
        nccl = ctypes.CDLL(os.environ["NCCLBIND_NCCL_PATH"])
        nccl.fakeSetLastError.argtypes = [ctypes.c_char_p]
        ep_library = EpLog().library
        warning = "RMA/Socket : rma_socket requires GDRCopy; and GDR Copy is not available"
        _, hint = ep.kernel_headers()
        inputs = ep.DispatchInputs(dev(ref.tokens(0, T, H), np.float32))
        outputs = ep.DispatchOutputs(dev(np.zeros((E, MAX, H)), np.float32))
        nccl.fakeSetLastError(warning.encode())  # as if ncclEpCreateGroup had logged it
        with ep.Group.create(comm, ll_config()) as g, g.create_handle("expert_major", routing) as h:
            # the per-step path, the checked path; another code than ncclInternalError has no hint
            for call, code, function in ((lambda: h.dispatch(inputs, outputs), 3, "ncclEpDispatch"),
                                         (lambda: h.update(routing), 3, "ncclEpUpdateHandle"),
                                         (h.complete, 5, "ncclEpComplete")):
                ep_library.fakeEpFailNext(code)
                with pytest.raises(NcclError) as e:
                    call()
                assert (e.value.code, e.value.function) == (code, function)
                assert e.value.last_error == warning and e.value.last_error_stale is True
                assert str(e.value).split("\nhint: ")[0] == (
                    f"{function} failed: {e.value.name} (fake error): NCCL EP gave no reason; NCCL's last error "
                    f"is unchanged since the last EP group or handle was made, so it is likely not this call's: "
                    f"\"{warning}\""), str(e.value)
                assert str(e.value).endswith(f"\nhint: {hint}") == (code == 3), str(e.value)
            nccl.fakeSetLastError(b"fake: a fresh text, set after the handle was made")
            ep_library.fakeEpFailNext(3)
            with pytest.raises(NcclInternalError) as e:
                h.dispatch(inputs, outputs)
            assert e.value.last_error_stale is False
            assert str(e.value) == ("ncclEpDispatch failed: ncclInternalError (fake error): "
                                    f"fake: a fresh text, set after the handle was made\nhint: {hint}")
            with g.create_handle("expert_major", routing) as again:  # made after it: now it is old
                ep_library.fakeEpFailNext(3)
                with pytest.raises(NcclInternalError) as e:
                    again.combine(ep.CombineInputs(dev(np.zeros((E, MAX, H)), np.float32)),
                                  ep.CombineOutputs(dev(np.zeros((T, H)), np.float32)))
                assert e.value.last_error_stale is True and "not this call's" in str(e.value)
        nccl.fakeSetLastError(b"")

    def test_experts_split_evenly_over_the_ranks(log):
        uid = ncclbind.get_unique_id()
        two = ncclbind.Communicator.init(2, 0, uid)  # the stand-in checks arguments only for 2 ranks
        try:
            refused(log, "config", ep.Group.create, two, ll_config(num_experts=9),
                    match="num_experts = 9 is not a multiple of num_ranks = 2")
        finally:
            two.destroy()

    def test_routing_dtype_rank_and_limits(log, group, routing):
        refused(log, "topk_idx", group.create_handle, "expert_major", dev(np.zeros((T, K)), np.float32),
                match="dtype float32, expected int32 or int64")
        refused(log, "topk_idx", group.create_handle, "expert_major", dev(np.zeros(T), np.int64),
                match="1-D tensor of shape")
        refused(log, "topk_idx", group.create_handle, "expert_major", dev(np.zeros((T, E + 1)), np.int64),
                match=f"top_k = {E + 1} is above num_experts = {E}")
        refused(log, "topk_idx", group.create_handle, "expert_major", dev(np.zeros((MAX + 1, K)), np.int64),
                match=f"num_tokens = {MAX + 1} is above max_dispatch_tokens_per_rank = {MAX}")
        refused(log, "layout", group.create_handle, "flat", routing, match="FLAT is not a layout of the group's LL")
        refused(log, "layout", group.create_handle, "sideways", routing)
        refused(log, "layout_info", group.create_handle, "expert_major", routing, layout_info=ep.HandleConfig())

    def test_dispatch_checks_every_tensor_against_the_routing_and_mode(log, handle):
        tokens = dev(ref.tokens(0, T, H), np.float32)
        weights = dev(ref.weights(0, T, K), np.float32)
        recv = dev(np.zeros((E, MAX, H)), np.float32)
        out = ep.DispatchOutputs(recv)
        refused(log, "inputs.topk_weights", handle.dispatch, ep.DispatchInputs(tokens, topk_weights=dev(
            ref.weights(0, T, K), np.float64)), out, match="dtype float64, expected float32")
        refused(log, "inputs.topk_weights", handle.dispatch, ep.DispatchInputs(tokens, topk_weights=dev(
            np.zeros(T * K), np.float32)), out, match="1-D tensor")
        refused(log, "inputs.topk_weights", handle.dispatch, ep.DispatchInputs(tokens, topk_weights=dev(
            np.zeros((T, K + 1)), np.float32)), out, match="extent 1 is 3, but top_k = 2")
        refused(log, "inputs.tokens", handle.dispatch, ep.DispatchInputs(dev(np.zeros((T + 1, H)), np.float32)), out,
                match=f"extent 0 is {T + 1}, but num_tokens = {T}")
        refused(log, "outputs.tokens", handle.dispatch, ep.DispatchInputs(tokens),
                ep.DispatchOutputs(dev(np.zeros((E, MAX, H * 2)), np.float32)), match=f"but hidden = {H}")
        refused(log, "outputs.tokens", handle.dispatch, ep.DispatchInputs(tokens),
                ep.DispatchOutputs(dev(np.zeros((MAX, H)), np.float32)), match="expected 3-D")
        refused(log, "layout_info.src_rank_counters", handle.dispatch, ep.DispatchInputs(tokens), out,
                layout_info=ep.LayoutInfo(src_rank_counters=dev(np.zeros(1), np.int32)), match="not used in ll_expert_major")
        refused(log, "outputs.topk_idx", handle.dispatch, ep.DispatchInputs(tokens),
                ep.DispatchOutputs(recv, topk_idx=dev(np.zeros((1, MAX, K)), np.int64)), match="only in")
        refused(log, "inputs.tokens", handle.dispatch, ep.DispatchInputs(None), out, match="required")
        refused(log, "inputs.tokens", handle.dispatch, ep.DispatchInputs(dev(np.zeros((T, 0)), np.float32)),
                ep.DispatchOutputs(dev(np.zeros((E, MAX, 0)), np.float32)), match="hidden = 0")
        refused(log, "inputs", handle.dispatch, ep.DispatchOutputs(recv), out, match="not an ep.DispatchInputs")
        refused(log, "config", handle.dispatch, ep.DispatchInputs(tokens), out, config=ep.CombineConfig())
        refused(log, "stream", handle.dispatch, ep.DispatchInputs(tokens), out, stream=True)
        handle.dispatch(ep.DispatchInputs(tokens, topk_weights=weights), out)
        assert log.calls() == ["dispatch"]

    def test_ll_combine_refuses_a_hidden_its_kernel_cannot_compile(log, handle):
        """The policy's scoped limit: libnccl_ep 0.2.0 JIT-compiles LL combine per hidden and its
        static_asserts (ll_ep.cuh) need a multiple of the limit's value, which the real library
        reports as ncclInternalError with a stale message; here combine is refused naming
        inputs.tokens before NCCL EP runs, while dispatch at that hidden (which it accepts) runs."""
        import tomllib
        limits = tomllib.loads((ROOT / "policy" / "nccl_ep.toml").read_text())["limits"]
        limit = next(l for l in limits if l["symbol"] == "hidden" and "combine" in l.get("methods", ()))
        step = limit["multiple_of"]
        assert limit["modes"] == ["ll_expert_major", "ll_rank_major"]
        bad = step // 2
        tokens = dev(ref.tokens(0, T, bad), np.float32)
        recv = dev(np.zeros((E, MAX, bad)), np.float32)
        weights = dev(ref.weights(0, T, K), np.float32)
        log.clear()
        handle.dispatch(ep.DispatchInputs(tokens), ep.DispatchOutputs(recv))
        assert log.calls() == ["dispatch"]
        refused(log, "inputs.tokens", handle.combine, ep.CombineInputs(recv),
                ep.CombineOutputs(dev(np.zeros((T, bad)), np.float32), topk_weights=weights),
                match=f"hidden = {bad} is not a multiple of {step}")
        log.clear()
        handle.combine(ep.CombineInputs(dev(np.zeros((E, MAX, step)), np.float32)),
                       ep.CombineOutputs(dev(np.zeros((T, step)), np.float32), topk_weights=weights))
        assert log.calls() == ["combine"]

    def test_the_ll_combine_limit_leaves_ht_alone(log, comm, routing):
        g = ep.Group.create(comm, ll_config(algorithm="high_throughput", max_recv_tokens_per_rank=E * MAX))
        try:
            h = g.create_handle("flat", routing)
            hidden = 256  # not a multiple of the LL limit; HT combine has no such rule in the policy
            recv = dev(np.zeros((E * MAX, hidden)), np.float32)
            log.clear()
            h.combine(ep.CombineInputs(recv), ep.CombineOutputs(dev(np.zeros((T, hidden)), np.float32)))
            assert log.calls() == ["combine"]
            h.destroy()
        finally:
            g.destroy()

    # ---- the token-row budget (GroupConfig.max_token_bytes: the policy's [[row_bytes]]) --------------

    def raw_tensor(shape, dtype, storage):
        """An ep.Tensor spec of a type NumPy lacks (bfloat16, float8_e4m3fn) over host memory of the
        same width: (pointer, shape, dtype, device), its storage kept by the caller."""
        array = np.zeros(shape, storage)
        return array, (array.ctypes.data, tuple(shape), dtype, 0)

    def budget_handle(comm, routing, algo, budget):
        """A group of max_token_bytes = budget and an expert-major handle (LL or HT) on it."""
        extra = {} if algo == "ll" else {"algorithm": "high_throughput", "max_recv_tokens_per_rank": E * MAX}
        g = ep.Group.create(comm, ll_config(max_token_bytes=budget, **extra))
        info = None if algo == "ll" else ep.LayoutInfo(expert_counters=dev(np.zeros(E), np.int32),
                                                       expert_offsets=dev(np.zeros(E), np.int32),
                                                       recv_total_counter=dev(np.zeros(1), np.int32))
        return g, g.create_handle("expert_major", routing, layout_info=info)

    def received(algo, hidden, dtype):
        return dev(np.zeros((E, MAX, hidden) if algo == "ll" else (E * MAX, hidden)), dtype)

    @pytest.mark.parametrize("algo", ["ll", "ht"])
    def test_dispatch_and_combine_refuse_a_token_row_above_max_token_bytes(log, comm, routing, algo):
        """Recipe NONE (no config): a token row is hidden x the tokens' element size, and NCCL EP sizes
        its buffers by the group's max_token_bytes (libnccl_ep 0.2.0 asserts it, ending the process):
        a wider row is refused naming inputs.tokens, with the row's bytes, the budget and the rule,
        before NCCL EP is called; a row of exactly the budget runs. Combine's input rows likewise."""
        g, h = budget_handle(comm, routing, algo, H * 2)
        try:
            wide, wide_out = dev(ref.tokens(0, T, H), np.float32), received(algo, H, np.float32)
            e = refused(log, "inputs.tokens", h.dispatch, ep.DispatchInputs(wide), ep.DispatchOutputs(wide_out))
            for text in (f"inputs.tokens: token row bytes = {H * 4} is above max_token_bytes = {H * 2}",
                         f"(config.quant_recipe NCCL_EP_DISP_QUANT_NONE: inputs.tokens {H} x float32 (4 B);",
                         "GroupConfig.max_token_bytes"):
                assert text in str(e), str(e)
            fits, fits_out = dev(ref.tokens(0, T, H), np.float16), received(algo, H, np.float16)
            log.clear()
            h.dispatch(ep.DispatchInputs(fits), ep.DispatchOutputs(fits_out))
            assert log.calls() == ["dispatch"]
            weights = dev(ref.weights(0, T, K), np.float32)
            e = refused(log, "inputs.tokens", h.combine, ep.CombineInputs(wide_out),
                        ep.CombineOutputs(dev(np.zeros((T, H)), np.float32), topk_weights=weights))
            assert (f"token row bytes = {H * 4} is above max_token_bytes = {H * 2} (config.quant_recipe "
                    f"NCCL_EP_COMB_QUANT_NONE: inputs.tokens {H} x float32 (4 B);") in str(e), str(e)
            log.clear()
            h.combine(ep.CombineInputs(fits_out), ep.CombineOutputs(dev(np.zeros((T, H)), np.float16),
                                                                    topk_weights=weights))
            assert log.calls() == ["combine"]
            h.destroy()
        finally:
            g.destroy()

    def test_a_quantization_recipe_counts_the_row_it_transports(log, comm, routing):
        """QUANT_FWD forwards the token and the scale rows as they are: both count. DS_FP8E3M4 sends
        bfloat16 tokens as one E4M3 byte per element plus a float32 scale per 128 elements, so its row
        fits where the same tokens unquantized (NONE) do not. One byte over the budget is refused,
        naming inputs.tokens and every part of the row."""
        scale_elems, comb = 4, ep.CombineConfig()
        fwd_row = H * 2 + scale_elems * 4  # float16 tokens + float32 scales
        ds_row = H + H // 128 * 4
        fwd = ep.DispatchConfig(quantization_recipe="fwd")
        ds = ep.DispatchConfig(quantization_recipe=ep.DispatchQuantizationRecipe.DS_FP8E3M4)
        tokens16 = dev(ref.tokens(0, T, H), np.float16)
        scales = dev(np.ones((T, scale_elems)), np.float32)
        fwd_in = ep.DispatchInputs(tokens16, scales=scales)
        fwd_out = ep.DispatchOutputs(dev(np.zeros((E, MAX, H)), np.float16),
                                     scales=dev(np.zeros((E, MAX, scale_elems)), np.float32))
        keep = [raw_tensor((T, H), "bfloat16", np.uint16), raw_tensor((E, MAX, H), "float8_e4m3fn", np.uint8)]
        ds_in = ep.DispatchInputs(keep[0][1])
        ds_out = ep.DispatchOutputs(keep[1][1], scales=dev(np.zeros((E, MAX, H // 128)), np.float32))
        for budget, refusals in ((fwd_row - 1, {"fwd"}), (fwd_row, set()), (ds_row, {"fwd", "none"}),
                                 (ds_row - 1, {"fwd", "none", "ds"})):
            g, h = budget_handle(comm, routing, "ll", budget)
            try:
                for name, inputs, outputs, config, row, part in (
                        ("fwd", fwd_in, fwd_out, fwd, fwd_row,
                         f"NCCL_EP_DISP_QUANT_FWD: inputs.tokens {H} x float16 (2 B) + inputs.scales "
                         f"{scale_elems} x float32 (4 B);"),
                        ("ds", ds_in, ds_out, ds, ds_row,
                         f"NCCL_EP_DISP_QUANT_DS_FP8E3M4: inputs.tokens {H} x float8_e4m3fn (1 B) + "
                         f"inputs.tokens {H} / 128 = {H // 128} x float32 (4 B);"),
                        ("none", ds_in, ds_out, None, H * 2,
                         f"NCCL_EP_DISP_QUANT_NONE: inputs.tokens {H} x bfloat16 (2 B);")):
                    if name in refusals:
                        e = refused(log, "inputs.tokens", h.dispatch, inputs, outputs, config=config)
                        assert f"token row bytes = {row} is above max_token_bytes = {budget}" in str(e), str(e)
                        assert part in str(e), str(e)
                    else:
                        log.clear()
                        h.dispatch(inputs, outputs, config=config)
                        assert log.calls() == ["dispatch"], (name, budget)
                # combine's recipe: NONE is checked; NVFP4's row is not in the header, so not checked
                recv16 = ep.CombineInputs(fwd_out.tokens)
                out16 = ep.CombineOutputs(dev(np.zeros((T, H)), np.float16), topk_weights=dev(
                    ref.weights(0, T, K), np.float32))
                if budget < H * 2:
                    refused(log, "inputs.tokens", h.combine, recv16, out16, config=comb,
                            match="NCCL_EP_COMB_QUANT_NONE")
                    log.clear()
                    h.combine(recv16, out16, config=ep.CombineConfig(quantization_recipe="nvfp4"))
                    assert log.calls() == ["combine"]
                h.destroy()
            finally:
                g.destroy()

    def test_a_repeated_call_cannot_pass_the_token_row_budget(log, comm, routing):
        """The per-step fast path (ep_steps.c, by identity) and ep.prepare reuse only checks that
        passed: the same records are refused on every call where their recipe's row is too wide,
        also right after they ran with a config whose recipe fits (the C fast path declines: another
        config object); and a step is refused when prepared."""
        method = inspect.getattr_static(ep.Handle, "dispatch")
        assert type(method).__name__ == "StepMethod"
        keep = [raw_tensor((T, H), "bfloat16", np.uint16), raw_tensor((E, MAX, H), "float8_e4m3fn", np.uint8)]
        inputs = ep.DispatchInputs(keep[0][1])
        outputs = ep.DispatchOutputs(keep[1][1], scales=dev(np.zeros((E, MAX, H // 128)), np.float32))
        ds = ep.DispatchConfig(quantization_recipe="ds_fp8e3m4")
        none = ep.DispatchConfig()
        g, h = budget_handle(comm, routing, "ll", H + H // 128 * 4)
        try:
            made = method.made
            log.clear()
            for _ in range(3):
                h.dispatch(inputs, outputs, config=ds)
            assert log.calls() == ["dispatch"] * 3 and method.made - made == 2  # repeated: in C
            for config in (none, None, none, None):
                refused(log, "inputs.tokens", h.dispatch, inputs, outputs, config=config,
                        match=f"token row bytes = {H * 2} is above max_token_bytes")
            refused(log, "inputs.tokens", ep.prepare, h.dispatch, inputs, outputs, config=none,
                    match="NCCL_EP_DISP_QUANT_NONE")
            step = ep.prepare(h.dispatch, inputs, outputs, config=ds)
            log.clear()
            step()
            h.dispatch(inputs, outputs, config=ds)
            assert log.calls() == ["dispatch"] * 2
            h.destroy()
        finally:
            g.destroy()

    # (mode, argument, its shape, the element type libnccl_ep 0.2.0 asserts there, a wrong one):
    # a C assert of the real library, so a wrong type would abort the process, not return an error
    MODE_DTYPES = [("ll_rank_major", "outputs.topk_idx", (1, MAX, K), np.int32, np.int64),
                   ("ht_flat", "outputs.topk_idx", (E * MAX, K), np.int64, np.int32),
                   ("ll_expert_major", "layout_info.expert_counters", (E,), np.int32, np.int64),
                   ("ht_flat", "layout_info.expert_counters", (E,), np.int32, np.int64)]

    def mode_handle(comm, mode, routing, counters=None):
        algo, layout = mode.split("_", 1)
        if algo == "ll":
            g = ep.Group.create(comm, ll_config())
            return g, g.create_handle(layout, routing)
        g = ep.Group.create(comm, ll_config(algorithm="high_throughput", max_recv_tokens_per_rank=E * MAX))
        info = None if counters is None else ep.LayoutInfo(expert_counters=counters)
        return g, g.create_handle(layout, routing, layout_info=info)

    def mode_dispatch(handle, mode, argument, tensor):
        tokens = dev(ref.tokens(0, T, H), np.float32)
        recv = dev(np.zeros((1, MAX, H) if mode == "ll_rank_major" else (E, MAX, H) if mode == "ll_expert_major"
                            else (E * MAX, H)), np.float32)
        if argument == "outputs.topk_idx":
            handle.dispatch(ep.DispatchInputs(tokens), ep.DispatchOutputs(recv, topk_idx=tensor))
        else:
            handle.dispatch(ep.DispatchInputs(tokens), ep.DispatchOutputs(recv),
                            layout_info=ep.LayoutInfo(expert_counters=tensor))

    @pytest.mark.parametrize("mode, argument, shape, good, bad", MODE_DTYPES,
                             ids=[f"{c[0]}-{c[1]}" for c in MODE_DTYPES])
    def test_received_ids_and_counters_take_the_element_type_of_the_mode(log, comm, routing, mode, argument,
                                                                         shape, good, bad):
        """Where the library asserts one element type per mode, the wrong one is refused naming the
        argument, the expected type and the mode, before any NCCL EP call; the right one passes
        the checks and the stand-in (which refuses the wrong one as the real library asserts)."""
        right, wrong = dev(np.zeros(shape), good), dev(np.zeros(shape), bad)
        expected = f"dtype {np.dtype(bad).name}, expected {np.dtype(good).name} in {mode}"
        at_handle = mode == "ht_flat" and argument.startswith("layout_info")  # HT counters: handle time
        g = None
        try:
            if at_handle:
                g, h = mode_handle(comm, mode, routing)
                h.destroy()
                refused(log, "layout_info.expert_counters", g.create_handle, "flat", routing,
                        layout_info=ep.LayoutInfo(expert_counters=wrong), match=expected)
                h = g.create_handle("flat", routing, layout_info=ep.LayoutInfo(expert_counters=right))
                refused(log, "layout_info.expert_counters", h.update, routing,
                        layout_info=ep.LayoutInfo(expert_counters=wrong), match=expected)
                h.update(routing, layout_info=ep.LayoutInfo(expert_counters=right))
                assert log.calls()[-1] == "update_handle"
            else:
                g, h = mode_handle(comm, mode, routing)
                refused(log, argument, mode_dispatch, h, mode, argument, wrong, match=expected)
                mode_dispatch(h, mode, argument, right)
                assert log.calls() == ["dispatch"]
                # the stand-in refuses what the real library asserts on, once the check is out of the way
                with pytest.MonkeyPatch.context() as patch:  # the field's generated check: none
                    from ncclbind.ep._generated import checks as ep_checks
                    record = {"outputs": "dispatch_outputs", "layout_info": "layout_info"}[argument.split(".")[0]]
                    patch.setattr(ep_checks, f"{record}_{argument.split('.')[1]}", lambda *a: None)
                    with pytest.raises(NcclInvalidArgumentError):
                        mode_dispatch(h, mode, argument, wrong)
            h.destroy()
        finally:
            if g is not None:
                g.destroy()

    def test_ht_expert_major_counters_take_either_index_type(log, comm, routing):
        g, h = mode_handle(comm, "ht_expert_major", routing, counters=dev(np.zeros(E), np.int64))
        try:
            assert [c for c in log.calls() if c == "create_handle"] == ["create_handle"]
            h.update(routing, layout_info=ep.LayoutInfo(expert_counters=dev(np.zeros(E), np.int32)))
            refused(log, "layout_info.expert_counters", h.update, routing,
                    layout_info=ep.LayoutInfo(expert_counters=dev(np.zeros(E), np.float32)),
                    match="dtype float32, expected int32 or int64 in ht_expert_major")
        finally:
            h.destroy()
            g.destroy()

    def test_a_tensor_on_another_device_is_refused(log, handle):
        tokens = dev(ref.tokens(0, T, H), np.float32)
        elsewhere = (tokens.array.ctypes.data, (T, H), "float32", 1)
        refused(log, "inputs.tokens", handle.dispatch, ep.DispatchInputs(elsewhere),
                ep.DispatchOutputs(dev(np.zeros((E, MAX, H)), np.float32)),
                match="is on CUDA device 1, the EP group on device 0")

    def test_mask_calls_check_length_dtype_and_shape(log, comm, routing):
        with ep.Group.create(comm, ll_config(enable_mask=1)) as g:
            refused(log, "mask", g.mask_update, [1, 1], match="2 values, expected 1")
            refused(log, "mask[0]", g.mask_update, [2 ** 40])
            refused(log, "mask_status", g.mask_query, dev(np.zeros(1), np.int64), match="expected int32")
            refused(log, "mask_status", g.mask_query, dev(np.zeros(2), np.int32), match="but num_ranks = 1")
            status = dev(np.full(1, 7), np.int32)
            g.mask_update([0])
            g.mask_query(status)
            assert status.array.tolist() == [0]
            g.create_handle("expert_major", routing).destroy()  # mask_clean needs the LL RDMA buffer
            g.mask_clean()
            g.mask_query(status)
            assert status.array.tolist() == [1]
            assert g.get_async_error() == 0
            EpLog().library.fakeEpSetAsyncError(ctypes.c_void_p(g.handle), 1)
            assert g.get_async_error() == 1
            g.error_clear()
            assert g.get_async_error() == 0

    # ---- preconditions (libnccl_ep 0.2.0 asserts them: the stand-in aborts as it does) ----------

    MASK_CALLS = {"mask_query": lambda g: g.mask_query(dev(np.zeros(1), np.int32)),
                  "mask_update": lambda g: g.mask_update([1]), "mask_clean": lambda g: g.mask_clean(),
                  "get_async_error": lambda g: g.get_async_error(), "error_clear": lambda g: g.error_clear()}
    RAW_MASK_CALLS = {"mask_query": "_nccl_ep.mask_query(g.handle, status.ctypes.data, 0)",
                      "mask_update": "_nccl_ep.mask_update(g.handle, status.ctypes.data, 0)",
                      "mask_clean": "_nccl_ep.mask_clean(g.handle, 0)",
                      "get_async_error": "_nccl_ep.get_async_error(g.handle)",
                      "error_clear": "_nccl_ep.error_clear(g.handle)"}

    def raw_call_in_a_subprocess(config: str, call: str, handle: bool = False):
        """A process that makes a group of `config` (a GroupConfig's keyword arguments), optionally
        a handle on it, then calls the raw ncclbind._nccl_ep `call` (no checks): what reaches the
        stand-in unrefused."""
        script = "\n".join([
            "import numpy as np, ncclbind", "from ncclbind import _nccl_ep, ep",
            "comm = ncclbind.Communicator.init(1, 0, ncclbind.get_unique_id())",
            f"g = ep.Group.create(comm, ep.GroupConfig(num_experts={E}, max_dispatch_tokens_per_rank={MAX}, "
            f"max_token_bytes={H * 4}, {config}))",
            f"status, routing = np.ones(1, np.int32), np.zeros(({T}, {K}), np.int64)",
            f"if {handle}: g.create_handle('expert_major', (routing.ctypes.data, ({T}, {K}), 'int64', 0)).destroy()",
            call, "print('returned', flush=True)"])
        return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)

    @pytest.mark.parametrize("config, method, handle, text", [
        ("algorithm='low_latency'", "mask_query", False, '"ncclEpMaskQuery: enable_mask must be true"'),
        ("algorithm='low_latency'", "error_clear", False, '"ncclEpErrorClear: enable_mask must be true"'),
        ("algorithm='high_throughput', enable_mask=1", "get_async_error", False,
         '"ncclEpGetAsyncError: enable_mask must be true"'),
        ("algorithm='low_latency', enable_mask=1", "mask_clean", False,
         '"ncclEpMaskClean: rdma_buffer not yet allocated; create at least one LL handle first"'),
        ("algorithm='low_latency', enable_mask=1", "mask_clean", True, None),
        ("algorithm='low_latency', enable_mask=1, rdma_buffer_size=1 << 20", "mask_clean", False, None)])
    def test_the_stand_in_aborts_where_nccl_ep_asserts(config, method, handle, text):
        """What the refusals below guard against: the raw call, unchecked, ends the process with
        libnccl_ep 0.2.0's assertion text (SIGABRT); where the precondition holds it returns."""
        import signal
        done = raw_call_in_a_subprocess(config, RAW_MASK_CALLS[method], handle)
        if text is None:
            assert done.returncode == 0 and "returned" in done.stdout, done.stderr[-2000:]
        else:
            assert done.returncode == -signal.SIGABRT, (done.returncode, done.stdout, done.stderr[-2000:])
            assert "returned" not in done.stdout and text in done.stderr, done.stderr[-2000:]

    @pytest.mark.parametrize("method", list(MASK_CALLS))
    def test_the_mask_calls_need_a_low_latency_group_with_enable_mask(log, comm, method):
        with ep.Group.create(comm, ll_config()) as g:
            assert "mask" not in g.preconditions
            e = refused(log, "group", MASK_CALLS[method], g,
                        match=f"^{method} needs a low-latency group created with GroupConfig\\(enable_mask=1\\)")
            assert "(precondition mask); this group has GroupConfig.enable_mask = False" in str(e)
        ht = ll_config(algorithm="high_throughput", enable_mask=1, max_recv_tokens_per_rank=MAX)
        with ep.Group.create(comm, ht) as g:
            e = refused(log, "group", MASK_CALLS[method], g, match=f"^{method} needs")
            assert "(precondition mask); this group is HT" in str(e)

    def test_mask_clean_needs_the_rdma_buffer_a_handle_makes(log, comm, routing):
        with ep.Group.create(comm, ll_config(enable_mask=1)) as g:
            assert g.preconditions == {"mask"}
            e = refused(log, "group", g.mask_clean, match="^mask_clean needs the low-latency group's RDMA buffer")
            assert str(e).endswith("(precondition rdma_buffer); this group has GroupConfig.rdma_buffer_size = 0 "
                                   "and no create_handle or init_handle has succeeded on it"), str(e)
            # a handle NCCL EP refuses (LL takes no layout_info) makes no buffer
            with pytest.raises(NcclError) as failed:
                g.create_handle("expert_major", routing, layout_info=ep.LayoutInfo())
            assert not isinstance(failed.value, NcclInvalid)
            refused(log, "group", g.mask_clean, match="precondition rdma_buffer")
            g.create_handle("expert_major", routing).destroy()
            assert g.preconditions == {"mask", "rdma_buffer"}
            log.clear()
            g.mask_clean()  # the buffer outlives the handle that made it
            assert log.calls() == ["mask_clean"]
        with ep.Group.create(comm, ll_config(enable_mask=1)) as g:
            g.init_handle("expert_major", num_topk=K).destroy()
            g.mask_clean()
        with ep.Group.create(comm, ll_config(enable_mask=1, rdma_buffer_size=1 << 20)) as g:
            assert g.preconditions == {"mask", "rdma_buffer"}  # allocated at creation
            g.mask_clean()
        with ep.Group.create(comm, ll_config(enable_mask=1)) as g:
            refused(log, "group", g.mask_clean, match="precondition rdma_buffer")  # each group its own state

    def test_ints_are_checked(log, group):
        refused(log, "num_topk", group.init_handle, "expert_major", num_topk=2 ** 31)
        refused(log, "num_topk", group.handle_mem_size, "expert_major", num_topk="2")

    # ---- lifetime -----------------------------------------------------------------------------

    def test_a_destroyed_handle_or_group_is_refused_naming_it(log, comm, routing):
        g = ep.Group.create(comm, ll_config())
        h = g.create_handle("expert_major", routing)
        inputs = ep.DispatchInputs(dev(ref.tokens(0, T, H), np.float32))
        outputs = ep.DispatchOutputs(dev(np.zeros((E, MAX, H)), np.float32))
        h.dispatch(inputs, outputs)
        h.destroy()
        h.destroy()  # a second destroy does nothing
        for call in (lambda: h.dispatch(inputs, outputs), lambda: h.update(routing), lambda: h.complete(),
                     lambda: h.combine(ep.CombineInputs(dev(np.zeros((E, MAX, H)), np.float32)),
                                       ep.CombineOutputs(dev(np.zeros((T, H)), np.float32))), lambda: h.handle):
            refused(log, "handle", call, match="destroyed")
        h2 = g.create_handle("expert_major", routing)
        g.destroy()  # destroys h2 first
        assert h2.closed and g.closed
        refused(log, "handle", h2.dispatch, inputs, outputs)
        refused(log, "group", g.create_handle, "expert_major", routing, match="destroyed")
        refused(log, "group", g.mask_clean)
        assert EpLog().library.fakeEpUsedAfterFree() == 0

    def test_the_call_sequence(log, comm, routing):
        with ep.Group.create(comm, ll_config()) as g:
            with g.create_handle("expert_major", routing) as h:
                inputs = ep.DispatchInputs(dev(ref.tokens(0, T, H), np.float32))
                recv = dev(np.zeros((E, MAX, H)), np.float32)
                h.dispatch(inputs, ep.DispatchOutputs(recv), config=ep.DispatchConfig(send_only=1))
                h.complete()
                h.combine(ep.CombineInputs(recv), ep.CombineOutputs(dev(np.zeros((T, H)), np.float32)),
                          config=ep.CombineConfig(send_only=1))
                h.complete()
                with pytest.raises(NcclError) as e:  # nothing staged: the library refuses
                    h.complete()
                assert e.value.function == "ncclEpComplete"
                h.update(dev(ref.routing(0, 3, K, E, seed=4), np.int64))
        assert log.calls() == ["create_group", "create_handle", "dispatch", "complete", "combine", "complete",
                               "update_handle", "handle_destroy", "group_destroy"]

    def test_the_per_step_path_checks_once_per_routing_and_record_set(log, handle, monkeypatch):
        seen = []
        real = checks.tensor_set_argument
        monkeypatch.setattr(checks, "tensor_set_argument", lambda *a: (a[0] is None or seen.append(a[3]) or True) and real(*a))
        inputs = ep.DispatchInputs(dev(ref.tokens(0, T, H), np.float32))
        outputs = ep.DispatchOutputs(dev(np.zeros((E, MAX, H)), np.float32))
        for _ in range(3):
            handle.dispatch(inputs, outputs)
        assert seen == ["inputs", "outputs"]
        handle.dispatch(inputs, ep.DispatchOutputs(dev(np.zeros((E, MAX, H)), np.float32)))  # a new record set
        assert seen[2:] == ["inputs", "outputs"]
        handle.update(dev(ref.routing(0, T - 1, K, E, seed=5), np.int64))  # new routing: num_tokens T - 1
        refused(log, "inputs.tokens", handle.dispatch, inputs, outputs, match=f"but num_tokens = {T - 1}")
        assert log.calls() == []

    # ---- prepared per-step calls (ncclbind.ep.prepare) -----------------------------------------

    def step_records():
        """A dispatch's and a combine's records over fresh arrays (LL expert-major, one rank)."""
        recv = dev(np.zeros((E, MAX, H)), np.float32)
        counts = dev(np.zeros(E), np.int32)
        return (ep.DispatchInputs(dev(ref.tokens(0, T, H), np.float32)), ep.DispatchOutputs(recv),
                ep.LayoutInfo(expert_counters=counts), ep.CombineInputs(recv),
                ep.CombineOutputs(dev(np.zeros((T, H)), np.float32)), recv, counts)

    def test_a_prepared_step_makes_the_methods_calls(log, comm, routing):
        """ep.prepare(handle.dispatch / combine / complete, ...) checks now, calls nothing, and each
        call of the step makes the call the method makes: the same log lines (handle, shapes,
        records, config, stream) and the same received rows."""
        route = ref.routing(0, T, K, E, seed=3)
        with ep.Group.create(comm, ll_config()) as g, g.create_handle("expert_major", routing) as h:
            d_in, d_out, info, c_in, c_out, recv, counts = step_records()
            send_only = ep.CombineConfig(send_only=1)
            log.clear()
            h.dispatch(d_in, d_out, layout_info=info, stream=7)
            h.combine(c_in, c_out, config=send_only, stream=7)
            h.complete(stream=7)
            by_method = log.lines()
            recv.array[:] = 0
            log.clear()
            steps = (ep.prepare(h.dispatch, d_in, d_out, layout_info=info, stream=7),
                     ep.prepare(h.combine, c_in, c_out, config=send_only, stream=7), ep.prepare(h.complete, stream=7))
            assert log.calls() == []
            for step in steps:
                assert step() is None
            assert log.lines() == by_method
            assert ref.check_ll_expert_major(recv.array, counts.array, [route], [ref.tokens(0, T, H)], 0, E, 1) == []
            assert [(s.method, s.owner) for s in steps] == [("dispatch", h), ("combine", h), ("complete", h)]
            assert steps[0].c_arguments == (h.handle, d_in.address, d_out.address, info.address, 0, 7)
            assert repr(steps[2]).startswith("<prepared complete on ")
            with pytest.raises(TypeError, match="takes no arguments"):
                steps[0](d_in)

    def test_ep_prepare_checks_once_and_refuses_what_the_method_refuses(log, group, handle, comm, monkeypatch):
        seen = []
        real = checks.tensor_set_argument
        monkeypatch.setattr(checks, "tensor_set_argument", lambda *a: (a[0] is None or seen.append(a[3]) or True) and real(*a))
        d_in, d_out, info, *_ = step_records()
        log.clear()
        step = ep.prepare(handle.dispatch, d_in, d_out, layout_info=info)
        for _ in range(3):
            step()
        assert seen == ["inputs", "outputs", "layout_info"] and log.calls() == ["dispatch"] * 3
        short = ep.DispatchOutputs(dev(np.zeros((E, MAX - 1, H)), np.float32))
        method_error = refused(log, "outputs.tokens", handle.dispatch, d_in, short)
        assert str(refused(log, "outputs.tokens", ep.prepare, handle.dispatch, d_in, short)) == str(method_error)
        buffer = dev(np.zeros(4), np.float32)
        for method in (comm.all_reduce, handle.update, group.create_handle, print, ep.Handle.dispatch):
            refused(log, "method", ep.prepare, method, buffer)
        with pytest.raises(NcclInvalid, match="ncclbind.ep.prepare") as e:
            ncclbind.prepare(handle.dispatch, d_in, d_out)
        assert e.value.argument == "method"
        with pytest.raises(TypeError):
            ep.prepare(handle.dispatch, d_in, d_out, routing=None)
        with pytest.raises(TypeError):
            ep.prepare(handle.dispatch, d_in)

    def test_after_update_or_destroy_a_prepared_step_is_the_method(log, group, routing):
        """A step holds for the routing it was checked against: after update() it calls the method,
        which checks its records against the new routing (refused naming the argument, or made);
        after destroy() the method's refusal, naming the handle. Nothing reaches NCCL EP then."""
        h = group.create_handle("expert_major", routing)
        d_in, d_out, *_ = step_records()
        step = ep.prepare(h.dispatch, d_in, d_out)
        h.update(dev(ref.routing(0, T - 1, K, E, seed=5), np.int64))  # num_tokens T - 1
        refused(log, "inputs.tokens", step, match=f"but num_tokens = {T - 1}")
        h.update(dev(ref.routing(0, T, K, E, seed=6), np.int64))  # T tokens again: the records fit
        log.clear()
        step()
        assert log.calls() == ["dispatch"]
        h.destroy()
        refused(log, "handle", step, match="destroyed")

    def test_a_prepared_steps_errors_are_the_methods(log, handle):
        """An NCCL EP failure raises what the method raises (type, code, function, text, the last-error
        label); a callback's exception left by the call is raised after it, as by the method."""
        ep_library = EpLog().library
        d_in, d_out, *_ = step_records()
        step = ep.prepare(handle.dispatch, d_in, d_out)
        errors = []
        for call in (lambda: handle.dispatch(d_in, d_out), step):
            ep_library.fakeEpFailNext(3)
            with pytest.raises(NcclError) as e:
                call()
            errors.append((type(e.value), e.value.code, e.value.function, str(e.value), e.value.last_error_stale))
        assert errors[0] == errors[1] and errors[0][2] == "ncclEpDispatch", errors
        for call in (lambda: handle.dispatch(d_in, d_out), step):
            checks.pending.append(MemoryError("from a callback"))  # as an AllocConfig callback leaves it
            log.clear()
            with pytest.raises(MemoryError, match="from a callback"):
                call()
            assert log.calls() == ["dispatch"] and not checks.pending

    def test_a_prepared_step_keeps_its_records_alive(log, comm):
        import gc
        route = ref.routing(0, T, K, E, seed=3)
        with ep.Group.create(comm, ll_config()) as g, g.create_handle("expert_major", dev(route, np.int64)) as h:
            recv = dev(np.zeros((E, MAX, H)), np.float32)
            counts = dev(np.zeros(E), np.int32)
            step = ep.prepare(h.dispatch, ep.DispatchInputs(dev(ref.tokens(0, T, H), np.float32)),
                              ep.DispatchOutputs(recv), layout_info=ep.LayoutInfo(expert_counters=counts))
            gc.collect()
            step()
            assert ref.check_ll_expert_major(recv.array, counts.array, [route], [ref.tokens(0, T, H)], 0, E, 1) == []
            del step
            gc.collect()

    def test_the_per_step_methods_fast_path_makes_the_repeated_calls(log, handle):
        """dispatch / combine / complete are C method descriptors (ep_steps.c) over their generated
        definitions: the first call of a record set goes to Python (checks, cache); the calls that
        repeat it, however the arguments are spelled, are made in C, with the same log lines; new
        records, new routing, a destroyed handle or an argument the signature refuses go to Python."""
        fast = {name: inspect.getattr_static(type(handle), name) for name in ("dispatch", "combine", "complete")}
        assert all(type(m).__name__ == "StepMethod" and m.__wrapped__ is STEPS[n][0] for n, m in fast.items())
        assert ep.Handle.dispatch.__doc__ == STEPS["dispatch"][0].__doc__
        d_in, d_out, info, c_in, c_out, *_ = step_records()
        counts = lambda: {n: (m.made, m.declined) for n, m in fast.items()}  # noqa: E731
        before = counts()
        log.clear()
        handle.dispatch(d_in, d_out, layout_info=info)
        first = log.lines()
        handle.dispatch(d_in, d_out, layout_info=info)
        handle.dispatch(inputs=d_in, outputs=d_out, layout_info=info, stream=None)
        handle.dispatch(d_in, d_out, layout_info=info, config=None, stream=0)
        assert log.lines() == first * 4
        made, declined = counts()["dispatch"]
        assert (made - before["dispatch"][0], declined - before["dispatch"][1]) == (3, 1)

        class Stream:  # a torch-like stream object: its handle is read once, then kept
            cuda_stream = 0x5000

        stream = Stream()
        log.clear()
        for _ in range(2):
            handle.dispatch(d_in, d_out, layout_info=info, stream=stream)
        assert [line.split("stream=")[1] for line in log.lines()] == ["0x5000"] * 2, log.lines()
        made, declined = counts()["dispatch"]
        assert (made - before["dispatch"][0], declined - before["dispatch"][1]) == (5, 1)
        with pytest.raises(TypeError):
            handle.dispatch(d_in, d_out, info)  # layout_info is keyword-only: Python's TypeError
        with pytest.raises(TypeError):
            handle.dispatch(d_in, d_out, routing=None)
        refused(log, "stream", handle.dispatch, d_in, d_out, layout_info=info, stream="s")
        assert counts()["dispatch"][0] == made
        handle.update(dev(ref.routing(0, T - 1, K, E, seed=5), np.int64))
        refused(log, "inputs.tokens", handle.dispatch, d_in, d_out, layout_info=info)
        assert counts()["dispatch"][0] == made

    def test_a_refused_update_changes_nothing(log, handle):
        before = handle.symbols
        refused(log, "topk_idx", handle.update, dev(np.zeros((MAX + 1, K)), np.int64))
        assert handle.symbols == before

    def test_dev_tensor_owns_memory_and_descriptor(log):
        with ep.DevTensor((4, 8), "bfloat16", device=0) as t:
            record = _nccl_ep.ncclEpTensor_t.from_address(t.address)
            assert (record.ndim, record.datatype, record.data) == (2, int(ncclbind.NcclDataType.BFLOAT16), t.data)
            assert t.ptr == t.address and (t.sizes, t.datatype) == ((4, 8), ncclbind.NcclDataType.BFLOAT16)
            assert (ctypes.c_size_t * 2).from_address(record.sizes)[:] == [4, 8]
            assert t.nbytes == 64 and t.buffer.count == 32
        assert t.closed
        assert log.calls() == ["tensor_alloc", "tensor_destroy"]
        t.destroy()  # a second destroy does nothing
        with pytest.raises(NcclInvalid, match="destroyed"):
            t.address
        with pytest.raises(NcclInvalid, match="destroyed"):
            ep.DispatchInputs(t)
        with pytest.raises(NcclInvalid) as e:
            ep.DevTensor((4, -1), "float32", device=0)
        assert e.value.argument == "shape"

    def test_dev_tensor_as_handle_memory(log, group):
        size = group.handle_mem_size("expert_major", num_topk=K)
        with ep.DevTensor((size,), "uint8", device=0) as memory:
            h = group.init_handle("expert_major", num_topk=K, handle_mem=memory)
            h.update(dev(ref.routing(0, T, K, E), np.int64))
            h.destroy()
        refused(log, "handle_mem", group.init_handle, "expert_major", num_topk=K,
                handle_mem=dev(np.zeros(8), np.float32), match="expected uint8")
        assert [c for c in log.calls() if c != "tensor_destroy"] == []

    # ---- the allocator ------------------------------------------------------------------------

    def test_a_python_allocator_is_called_and_lives_as_long_as_the_group(log, comm, routing):
        memory = []

        def alloc(nbytes):
            memory.append(ctypes.create_string_buffer(nbytes))
            return ctypes.addressof(memory[-1])

        freed = []
        config = ll_config(alloc=ep.AllocConfig(alloc, freed.append))
        g = ep.Group.create(comm, config)
        del config
        gc.collect()  # the group holds the config, and so the trampolines
        h = g.create_handle("expert_major", routing)
        h.destroy()
        alloc_config = g.config.alloc
        g.destroy()
        assert alloc_config.calls == {"alloc": 2, "free": 2}
        assert sorted(freed) == sorted(ctypes.addressof(m) for m in memory)

    def test_an_exception_in_the_allocator_is_raised_by_the_call_that_ran_it(log, comm):
        def alloc(nbytes):
            raise MemoryError(f"no {nbytes} bytes today")

        with pytest.raises(MemoryError, match="no 4096 bytes today") as e:
            ep.Group.create(comm, ll_config(alloc=ep.AllocConfig(alloc, lambda address: None)))
        assert isinstance(e.value.__cause__, NcclError)  # NCCL EP's own failure, chained
        assert log.calls() == ["create_group"] and "failed" in log.lines()[0]
        assert not checks.pending

    def test_an_exception_in_free_is_raised_by_destroy(comm):
        memory = ctypes.create_string_buffer(4096)

        def free(address):
            raise RuntimeError("free failed")

        g = ep.Group.create(comm, ll_config(alloc=ep.AllocConfig(lambda n: ctypes.addressof(memory), free)))
        with pytest.raises(RuntimeError, match="free failed"):
            g.destroy()
        assert g.closed and not checks.pending

    def test_an_allocator_takes_c_addresses_or_callables_in_pairs():
        with pytest.raises(NcclInvalid) as e:
            ep.AllocConfig(alloc_fn=lambda n: 0)
        assert e.value.argument == "free_fn"
        with pytest.raises(NcclInvalid) as e:
            ep.AllocConfig(alloc_fn=-4, free_fn=8)
        assert e.value.argument == "alloc_fn"
        config = ep.GroupConfig(alloc=ep.AllocConfig(alloc_fn=0x1000, free_fn=0x2000, context=0x3000))
        assert (config.record.alloc.alloc_fn, config.record.alloc.free_fn, config.record.alloc.context) == \
            (0x1000, 0x2000, 0x3000)

    # ---- nccl-extensions 0.1.0's nccl.ep: the same names, keywords and defaults -----------------

    def enumerator(api, c_enum, name):
        """The value of the C enumerator `name` of `c_enum`, from the IR."""
        enum = next(e for e in api["nccl_ep"]["enums"] if e["name"] == c_enum)
        return next(v["value"] for v in enum["values"] if v["name"] == name)

    @pytest.mark.parametrize("cls, c_enum, alias, name", [
        (ep.Algorithm, "ncclEpAlgorithm_t", "LOW_LATENCY", "NCCL_EP_ALGO_LOW_LATENCY"),
        (ep.Algorithm, "ncclEpAlgorithm_t", "HIGH_THROUGHPUT", "NCCL_EP_ALGO_HIGH_THROUGHPUT"),
        (ep.PassDir, "ncclEpPassDir_t", "FWD", "NCCL_EP_FWD_PASS"),
        (ep.PassDir, "ncclEpPassDir_t", "BWD", "NCCL_EP_BWD_PASS"),
        (ep.DispatchQuantizationRecipe, "ncclEpDispQuant_t", "DS_FP8E3M4", "NCCL_EP_DISP_QUANT_DS_FP8E3M4")])
    def test_nccl_ep_enum_spellings_are_the_same_members(api, cls, c_enum, alias, name):
        member = getattr(cls, alias)
        assert member is cls(enumerator(api, c_enum, name))  # an alias, not a new value
        assert member.name != alias and len(list(cls)) == len({int(m) for m in cls})
        assert cls.__members__[alias] is member
        from ncclbind import nccl_ep_enums
        assert getattr(getattr(nccl_ep_enums, cls.__name__), alias) is member

    def test_enum_arguments_take_the_nccl_ep_spellings_by_name():
        assert ep.GroupConfig(algorithm="high_throughput").algorithm is ep.Algorithm.HIGH_THROUGHPUT
        assert ep.DispatchConfig(pass_direction="bwd").pass_direction is ep.PassDir.BWD
        assert ep.DispatchConfig(quantization_recipe="ds_fp8e3m4").quantization_recipe is \
            ep.DispatchQuantizationRecipe.DS_FP8E3M4

    def test_config_defaults_are_nccl_eps():
        group = ep.GroupConfig()
        assert group.algorithm is ep.Algorithm.LOW_LATENCY and group.enable_mask is False
        assert group.alloc == ep.AllocConfig() and group.record.alloc.alloc_fn == 0
        assert group.zero_copy is ep.ZeroCopyMode.AUTO and group.overflow_policy is ep.OverflowPolicy.AUTO
        for cls in (ep.DispatchConfig, ep.CombineConfig):
            config = cls()
            assert config.pass_direction is ep.PassDir.FWD and config.send_only is False
            assert int(config.quantization_recipe) == 0 and config.quantization_recipe.name == "NONE"

    @pytest.mark.parametrize("cls, recipe", [(ep.DispatchConfig, ep.DispatchQuantizationRecipe.FWD),
                                             (ep.CombineConfig, ep.CombineQuantizationRecipe.NVFP4)])
    def test_quantization_recipe_is_the_keyword_and_quant_recipe_its_alias(cls, recipe):
        for config in (cls(quantization_recipe=recipe), cls(quant_recipe=recipe), cls(quant_recipe=int(recipe))):
            assert config.quantization_recipe is recipe and config.quant_recipe is recipe
            assert config.record.quant_recipe == int(recipe)
        with pytest.raises(NcclInvalid, match="one field") as e:
            cls(quantization_recipe=recipe, quant_recipe=recipe)
        assert e.value.argument == "quant_recipe"
        with pytest.raises(NcclInvalid) as e:
            cls(quantization_recipe=7)
        assert e.value.argument == "quantization_recipe"

    def test_on_off_fields_take_bools_and_stay_strict():
        config = ep.GroupConfig(enable_mask=True)
        assert config.enable_mask is True and config.record.enable_mask == 1
        assert ep.DispatchConfig(send_only=True, round_scales=1).record.send_only == 1
        with pytest.raises(NcclInvalid) as e:
            ep.DispatchConfig(send_only=-1)
        assert e.value.argument == "send_only"
        with pytest.raises(NcclInvalid) as e:
            ep.GroupConfig(num_experts=True)  # a count is no on/off field
        assert e.value.argument == "num_experts"

    def test_alloc_fn_and_free_fn_are_the_c_types_and_default_to_0(comm, routing):
        import ncclbind.ep.base.allocator as allocator
        assert (ep.AllocFn, ep.FreeFn) == (allocator.AllocFn, allocator.FreeFn)
        assert ep.AllocFn._restype_ is ctypes.c_int and ep.AllocFn._argtypes_ == (
            ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p)
        assert ep.FreeFn._argtypes_ == (ctypes.c_void_p, ctypes.c_void_p)
        default = ep.AllocConfig()
        assert (default.alloc_fn, default.free_fn, default.context) == (0, 0, 0)
        with pytest.raises(AttributeError):
            default.alloc_fn = 5  # a group's config copies it once
        memory, calls = [], []

        @ep.AllocFn
        def c_alloc(out, size, context):
            memory.append(ctypes.create_string_buffer(size))
            out[0] = ctypes.addressof(memory[-1])
            calls.append(("alloc", size, context))
            return 0

        @ep.FreeFn
        def c_free(ptr, context):
            calls.append(("free", ptr, context))
            return 0

        address = ctypes.cast(c_alloc, ctypes.c_void_p).value
        config = ep.AllocConfig(alloc_fn=address, free_fn=ctypes.cast(c_free, ctypes.c_void_p).value, context=0x77)
        assert config.record if False else config.addresses()[0] == address
        for alloc in (config, ep.AllocConfig(c_alloc, c_free, context=0x77)):  # the prototype objects too
            with ep.Group.create(comm, ll_config(alloc=alloc)) as g:
                g.create_handle("expert_major", routing).destroy()
            assert [c[0] for c in calls] == ["alloc", "alloc", "free", "free"] and calls[0][2] == 0x77
            assert alloc.calls == {"alloc": 0, "free": 0}  # C functions: not Python callables
            calls.clear()

    def test_tensor_sets_default_every_field_to_none_and_refuse_a_missing_required_one_when_used(log, handle):
        for cls in (ep.DispatchInputs, ep.DispatchOutputs, ep.CombineInputs, ep.CombineOutputs):
            record = cls()
            assert all(getattr(record, f) is None for f in cls._fields)
        d_in, d_out, info, c_in, c_out, *_ = step_records()
        assert ep.DispatchInputs(tokens=d_in.tokens).tokens is d_in.tokens  # readable, the same ep.Tensor
        refused(log, "inputs.tokens", handle.dispatch, ep.DispatchInputs(), d_out, layout_info=info,
                match="inputs.tokens is required")
        refused(log, "outputs.tokens", handle.dispatch, d_in, ep.DispatchOutputs(), layout_info=info)
        refused(log, "inputs.tokens", handle.combine, ep.CombineInputs(topk_weights=None), c_out)
        refused(log, "outputs.tokens", handle.combine, c_in, ep.CombineOutputs())
        refused(log, "inputs.tokens", ep.prepare, handle.dispatch, ep.DispatchInputs(), d_out, layout_info=info)

    def test_a_raw_pointer_tensor_is_a_descriptor_of_its_fields():
        array = dev(np.zeros((3, 4)), np.float32)
        address = array.array.ctypes.data
        t = ep.Tensor(address, dtype=ncclbind.NcclDataType.FLOAT32, shape=(3, 4))
        record = _nccl_ep.ncclEpTensor_t.from_address(t.ptr)
        assert t.ptr == t.address and (record.data, record.ndim, record.datatype) == (address, 2, int(t.datatype))
        assert (t.data, t.sizes, t.datatype, t.ndim, t.buffer) == (address, (3, 4), ncclbind.NcclDataType.FLOAT32, 2,
                                                                    None)
        assert (ctypes.c_size_t * 2).from_address(record.sizes)[:] == [3, 4]
        assert record.magic == _nccl_ep.NCCL_EP_TENSOR_MAGIC
        assert ep.Tensor(address, dtype="float32", shape=[12]).sizes == (12,)
        assert ep.Tensor(address, dtype=int(ncclbind.NcclDataType.INT32), shape=(2,)).datatype == \
            ncclbind.NcclDataType.INT32
        for kwargs, argument in (({"shape": (3, 4)}, "dtype"), ({"dtype": "float32"}, "shape"),
                                 ({"dtype": "float32", "shape": ()}, "shape"),
                                 ({"dtype": "float32", "shape": (3, -1)}, "shape"),
                                 ({"dtype": 999, "shape": (3,)}, "dtype")):
            with pytest.raises(NcclInvalid) as e:
                ep.Tensor(address, **kwargs)
            assert e.value.argument == argument, kwargs
        with pytest.raises(NcclInvalid) as e:
            ep.Tensor(array, dtype="float32")  # dtype / shape are a raw pointer's
        assert e.value.argument == "dtype"
        with pytest.raises(NcclInvalid) as e:
            ep.Tensor(True, dtype="float32", shape=(1,))  # a bool is no address
        assert e.value.argument == "dtype"

    def test_a_raw_pointer_tensor_is_checked_and_used_by_a_call(log, handle):
        rows = dev(ref.tokens(0, T, H), np.float32)
        raw = ep.Tensor(rows.array.ctypes.data, dtype="float32", shape=(T, H))
        _, d_out, info, *_ = step_records()
        log.clear()
        handle.dispatch(ep.DispatchInputs(tokens=raw), d_out, layout_info=info)
        assert log.calls() == ["dispatch"]
        wrong = ep.Tensor(rows.array.ctypes.data, dtype="float32", shape=(T + 1, H))
        refused(log, "inputs.tokens", handle.dispatch, ep.DispatchInputs(wrong), d_out, layout_info=info)

    def test_group_and_handle_adopt_a_raw_pointer_and_show_it_as_ptr(log, comm, routing):
        config = ll_config()
        with ep.Group.create(comm, config) as made:
            assert made.ptr == made.handle
            with made.create_handle("expert_major", routing) as h:
                assert h.ptr == h.handle
        address = _nccl_ep.create_group(comm.handle, config.address)  # made outside ncclbind.ep
        group = ep.Group(address, comm=comm, config=config)
        assert (group.ptr, group.nranks, group.device, group.config) == (address, 1, 0, config)
        topk = ep.Tensor(routing)
        raw_handle = _nccl_ep.create_handle(address, int(ep.Layout.EXPERT_MAJOR), topk.ptr, 0, 0, 0)
        handle = ep.Handle(raw_handle, group=group, layout="expert_major")
        assert handle.ptr == raw_handle and handle.mode == "ll_expert_major" and handle.group is group
        d_in, d_out, info, c_in, c_out, *_ = step_records()
        log.clear()
        handle.dispatch(d_in, d_out, layout_info=info)
        handle.combine(c_in, c_out)
        assert log.calls() == ["dispatch", "combine"]
        group.destroy()  # its handles first
        assert handle.closed and group.closed and log.calls()[-2:] == ["handle_destroy", "group_destroy"]
        with pytest.raises(NcclInvalid) as e:
            group.ptr
        assert e.value.argument == "group"
        # adopted without what it was made with: the checks it cannot make are skipped, the mask calls refused
        masked = ll_config(enable_mask=1)  # alive while its record's address is read
        bare = ep.Group(_nccl_ep.create_group(comm.handle, masked.address))
        assert (bare.config, bare.nranks, bare.device) == (None, None, None)
        refused(log, "group", bare.mask_query, dev(np.zeros(1), np.int32), match="adopted from a raw ncclEpGroup_t")
        lone = ep.Handle(_nccl_ep.create_handle(bare.ptr, int(ep.Layout.EXPERT_MAJOR), topk.ptr, 0, 0, 0))
        assert lone.group is None and lone.mode is None
        log.clear()
        lone.dispatch(d_in, d_out, layout_info=info)
        assert log.calls() == ["dispatch"]
        lone.destroy()
        bare.destroy()
        for bad in (0, -1, "0x10", 2 ** 64):
            with pytest.raises(NcclInvalid) as e:
                ep.Group(bad)
            assert e.value.argument == "ptr"

    def test_complete_takes_config_0_as_the_librarys_defaults_on_its_fast_path(log, handle):
        fast = inspect.getattr_static(type(handle), "complete")
        assert inspect.signature(ep.Handle.complete).parameters["config"].default == 0
        d_in, d_out, info, *_ = step_records()
        staged = ep.DispatchConfig(send_only=True)
        completes = []
        for config in ("default", "default", None, 0, ep.CompleteConfig()):
            handle.dispatch(d_in, d_out, layout_info=info, config=staged)
            log.clear()
            made = fast.made
            handle.complete() if config == "default" else handle.complete(config=config)
            completes.append((fast.made - made, log.lines()))
        assert [made for made, _ in completes] == [0, 1, 1, 0, 0]  # the default and None: the same call, in C
        assert len({tuple(lines) for _, lines in completes}) == 1 and completes[0][1][0].startswith("complete ")
        refused(log, "config", handle.complete, config=0x1000, match="is an address")

    def test_get_lib_version_and_path_describe_the_loaded_libnccl_ep(api):
        version = ep.get_lib_version()
        assert str(version) == api["nccl_ep"]["versions"][-1] and version.code == ep.get_version()
        assert os.path.realpath(ep.get_lib_path()) == os.path.realpath(os.environ["NCCLBIND_NCCL_EP_PATH"])

    # ---- data, one rank, against the GPU test's reference ---------------------------------------

    def test_one_rank_ll_expert_major_dispatch_and_combine_match_the_reference(comm):
        route = ref.routing(0, T, K, E, seed=9)
        rows, w = ref.tokens(0, T, H), ref.weights(0, T, K)
        with ep.Group.create(comm, ll_config()) as g, g.create_handle("expert_major", dev(route, np.int64)) as h:
            recv = dev(np.zeros((E, MAX, H)), np.float32)
            counts = dev(np.zeros(E), np.int32)
            h.dispatch(ep.DispatchInputs(dev(rows, np.float32), topk_weights=dev(w, np.float32)),
                       ep.DispatchOutputs(recv), layout_info=ep.LayoutInfo(expert_counters=counts))
            assert ref.check_ll_expert_major(recv.array, counts.array, [route], [rows], 0, E, 1) == []
            # the reference catches a wrong receive: one row damaged
            damaged = recv.array.copy()
            expert = int(route[0, 0])
            damaged[expert, 0, 5] += 1
            assert ref.check_ll_expert_major(damaged, counts.array, [route], [rows], 0, E, 1) != []
            out = dev(np.zeros((T, H)), np.float32)
            h.combine(ep.CombineInputs(dev(ref.expert_step("ll_expert_major", recv.array), np.float32)),
                      ep.CombineOutputs(out, topk_weights=dev(w, np.float32)))
            assert ref.check_combine(out.array, ref.expected_combine(route, rows, w), "float32") == []
            assert ref.check_combine(out.array * 1.01, ref.expected_combine(route, rows, w), "float32") != []

    def test_the_benchmarks_c_pair_makes_the_layers_calls_from_c(comm, log, tmp_path, monkeypatch):
        """raw_loop.raw_ep_pair (bench/python/bench_loop.c), the EP benchmark's C baseline in the Python
        process: ncclEpDispatch then ncclEpCombine of the loaded libnccl_ep through plain function
        pointers, with the records ncclbind.ep built: the same calls and the same data as the layer's."""
        monkeypatch.setenv("NCCLBIND_BENCH_BUILD", str(tmp_path / "bench-build"))
        sys.path.insert(0, str(ROOT / "bench" / "python"))
        import raw_loop
        pair = raw_loop.raw_ep_pair()
        route = ref.routing(0, T, K, E, seed=11)
        rows, w = ref.tokens(0, T, H), ref.weights(0, T, K)
        with ep.Group.create(comm, ll_config()) as g, g.create_handle("expert_major", dev(route, np.int64)) as h:
            results = []
            for through_c in (False, True):
                recv, counts = dev(np.zeros((E, MAX, H)), np.float32), dev(np.zeros(E), np.int32)
                d_in = ep.DispatchInputs(dev(rows, np.float32), topk_weights=dev(w, np.float32))
                d_out, d_info = ep.DispatchOutputs(recv), ep.LayoutInfo(expert_counters=counts)
                out = dev(np.zeros((T, H)), np.float32)
                c_in, c_out = ep.CombineInputs(recv), ep.CombineOutputs(out, topk_weights=dev(w, np.float32))
                log.clear()
                if through_c:
                    times = pair(h.handle, d_in.address, d_out.address, d_info.address, c_in.address,
                                 c_out.address, 0, False)
                    assert len(times) == 2 and all(t >= 0 for t in times), times
                else:
                    h.dispatch(d_in, d_out, layout_info=d_info)
                    h.combine(c_in, c_out)
                assert log.calls() == ["dispatch", "combine"], log.lines()
                assert ref.check_ll_expert_major(recv.array, counts.array, [route], [rows], 0, E, 1) == []
                results.append((recv.array.copy(), counts.array.copy(), out.array.copy()))
            (recv_py, counts_py, out_py), (recv_c, counts_c, out_c) = results
            assert np.array_equal(recv_c, recv_py) and np.array_equal(counts_c, counts_py)
            assert np.array_equal(out_c, out_py) and np.abs(out_py).max() > 0
            with pytest.raises(RuntimeError, match=r"ncclEpDispatch failed \(\d+\)"):
                pair(h.handle, 0, d_out.address, d_info.address, c_in.address, c_out.address, 0, False)

    # ---- the GPU test's own calls, dry-run on the stand-in ----------------------------------------

    class _FakeTorch:
        """The few torch calls ep_ranks.py makes, over NumPy (a tensor is a DeviceArray with the
        methods used there; bfloat16 is stored as float32, which the rules also allow)."""

        class dtype:
            def __init__(self, name, numpy):
                self.name, self.numpy = name, numpy
                self.is_floating_point = name.startswith(("float", "bfloat"))

            def __str__(self):
                return f"torch.{self.name}"

        def __init__(self):
            for name, numpy in (("float32", np.float32), ("bfloat16", np.float32), ("int32", np.int32),
                                ("int64", np.int64)):
                setattr(self, name, self.dtype(name, numpy))
            torch = self

            class Tensor(DeviceArray):
                def __init__(self, array, dtype):
                    super().__init__(np.ascontiguousarray(array, dtype=dtype.numpy))
                    self.dtype = dtype

                def cuda(self):
                    return self

                def to(self, dtype):
                    return Tensor(self.array, dtype)

                def float(self):
                    return Tensor(self.array, torch.float32)

                def cpu(self):
                    return self

                def numpy(self):
                    return self.array

                def tolist(self):
                    return self.array.tolist()

                def fill_(self, value):
                    self.array[...] = value
                    return self

            self.Tensor = Tensor
            self.cuda = types_namespace(synchronize=lambda: None, current_stream=lambda: 0,
                                        device_count=lambda: 1)

        def from_numpy(self, array):
            kind = {np.dtype(np.float32): self.float32, np.dtype(np.int64): self.int64,
                    np.dtype(np.int32): self.int32}[array.dtype]
            return self.Tensor(array, kind)

        def zeros(self, shape, dtype, device):
            return self.Tensor(np.zeros(shape), dtype)

        def full(self, shape, value, dtype, device):
            return self.Tensor(np.full(shape, value), dtype)

    def types_namespace(**kwargs):
        import types
        return types.SimpleNamespace(**kwargs)

    @pytest.mark.parametrize("algo, layout", [("ll", "expert_major"), ("ll", "rank_major"), ("ht", "flat"),
                                              ("ht", "expert_major")])
    def test_the_gpu_tests_calls_pass_the_checks(comm, algo, layout, monkeypatch, log):
        """ep_ranks.py's round trip on one rank, over the stand-in: every call it makes passes
        ncclbind.ep's checks (its tensors fit the policy's shapes), with update and staged calls; the
        data is checked where the stand-in moves it (LL expert-major)."""
        import ep_ranks
        torch = _FakeTorch()
        env = ep_ranks.Env(torch, comm, 0, 1)
        env.hidden = H
        if (algo, layout) != ("ll", "expert_major"):  # the stand-in moves no data here: checks only
            for name in ("check_ll_rank_major", "check_ht_flat", "check_ht_expert_major", "check_combine"):
                monkeypatch.setattr(ref, name, lambda *a, **k: [])
        group = ep_ranks.make_group(env, algo, 8, H * 4)
        try:
            assert ep_ranks.round_trip(env, group, layout, 5, 2, 8, torch.float32, torch.int64, seed=1,
                                       update_to=3) == []
            if algo == "ll":
                assert ep_ranks.round_trip(env, group, layout, 4, 2, 8, torch.bfloat16, torch.int32, seed=2,
                                           staged=True) == []
            plain = log.calls()
            # through ep.prepare's steps, each made twice: twice the calls
            assert ep_ranks.round_trip(env, group, layout, 5, 2, 8, torch.float32, torch.int64, seed=1,
                                       update_to=3, prepared=True) == []
            if algo == "ll":
                assert ep_ranks.round_trip(env, group, layout, 4, 2, 8, torch.bfloat16, torch.int32, seed=2,
                                           staged=True, prepared=True) == []
            prepared = log.calls()[len(plain):]
            assert ep_ranks.refusals(env, group, algo, 8) == []
            assert ep_ranks.received_ids_refusal(env, group, algo, 8) == []
        finally:
            group.destroy()
        for name in ("dispatch", "combine", "complete"):
            assert prepared.count(name) == 2 * plain.count(name), (name, plain, prepared)
        assert plain.count("dispatch") == plain.count("combine") == (3 if algo == "ll" else 2), "\n".join(log.lines())

    class _BenchTorch(_FakeTorch):
        """_FakeTorch plus the calls ep_bench.py makes: its own stream, randn / rand, zeros of the default
        type, element_size."""

        def __init__(self):
            super().__init__()

            class Stream:
                cuda_stream = 0  # the stand-in ignores streams

            self.cuda.Stream = Stream
            self.Tensor.element_size = lambda tensor: tensor.array.itemsize

        def randn(self, shape, device):
            return self.Tensor(np.random.default_rng(0).standard_normal(shape), self.float32)

        def rand(self, shape, device, dtype):
            return self.Tensor(np.random.default_rng(1).random(shape), dtype)

        def zeros(self, shape, dtype=None, device=None):
            return super().zeros(shape, dtype or self.float32, device)

    @pytest.mark.parametrize("algo", ["ll", "ht"])
    def test_the_ep_benchmarks_calls_dry_run_on_the_stand_in(comm, log, algo, tmp_path, monkeypatch):
        """ep_bench.py's bench_size on one rank, over the stand-in, at a small size: every layer (ncclbind.ep,
        the raw generated calls, the C calls of bench_loop.c) makes each iteration's dispatch and combine,
        and one row per layer and phase comes back; so the GPU session finds no harness error."""
        monkeypatch.setenv("NCCLBIND_BENCH_BUILD", str(tmp_path / "bench-build"))
        sys.path.insert(0, str(ROOT / "tests" / "multigpu" / "ep" / "python"))
        import ep_bench
        from ncclbind import _nccl
        monkeypatch.setattr(_nccl, "cuda_stream_synchronize", lambda stream: None, raising=False)
        real_pair = ep_bench.raw_loop.raw_ep_pair
        monkeypatch.setattr(ep_bench.raw_loop, "raw_ep_pair",  # no CUDA driver here: no synchronize
                            lambda: (lambda *args: real_pair()(*args[:-1], False)))
        iterations = 3
        log.clear()
        rows = ep_bench.bench_size(_BenchTorch(), comm, 0, 1, algo, 5, H, K, E, iterations)
        assert sorted((r["layer"], r["phase"]) for r in rows) == sorted(
            (layer, phase) for layer in ("python", "python_prepared", "python_raw", "c_in_python")
            for phase in ("dispatch", "combine"))
        assert all(r["us_median"] >= 0 and (r["algo"], r["tokens"], r["hidden"]) == (algo, 5, H) for r in rows), rows
        calls = log.calls()
        assert calls.count("dispatch") == calls.count("combine") == 4 * (iterations + 20), calls[:12]

    def test_the_gpu_tests_mask_case_passes_on_the_stand_in(comm, log, monkeypatch):
        """ep_ranks.py's mask case on one rank, over the stand-in (which aborts where libnccl_ep
        0.2.0 asserts): mask_clean before any LL handle is refused and the process goes on; after
        the handle, query, update, clean and the error flag reach the library; then a round trip."""
        import ep_ranks
        env = ep_ranks.Env(_FakeTorch(), comm, 0, 1)
        # the program budgets max_token_bytes for bfloat16 rows, which _FakeTorch stores as float32:
        # twice the bytes per element, so twice the budget here (the policy's [[row_bytes]] check)
        make_group = ep_ranks.make_group
        monkeypatch.setattr(ep_ranks, "make_group", lambda env, algo, experts, token_bytes, **extra: make_group(
            env, algo, experts, token_bytes * 2, **extra))
        assert ep_ranks.mask(env) == []
        calls = log.calls()
        assert calls.count("mask_clean") == 1 and calls.index("create_handle") < calls.index("mask_clean"), calls
        assert calls.count("error_clear") == 1 and calls.count("dispatch") == calls.count("combine") == 1, calls
