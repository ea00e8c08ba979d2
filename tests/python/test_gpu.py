"""On one GPU (marker gpu; skipped, with the reason, without one): every
collective and send/recv to self on a one-rank communicator over torch and
CuPy buffers with the data checked; streams; group simulation; buffer and
window registration; PreMulSum with host and device scalars; mem_alloc;
split; DevComm creation; the host calls of later releases (suspend/resume,
get_unique_id, mem_stats, query_properties, window pointers, teams and rank
conversion, the parameter registry, the LL all-to-all slot count), skipped with
the first release when the loaded NCCL lacks them; ncclbind.empty / zeros
(NCCL memory as torch and CuPy arrays: used, registered, freed); the
variable-count collectives; complex sum and avg; the hang watchdog. torch and CuPy are
imported only here, lazily.

    pip install --no-build-isolation . && NCCL_NVLS_ENABLE=0 python3 -m pytest tests/python -m gpu -v
"""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


# ---- array libraries, behind one small interface ----------------------------

class TorchArrays:
    name = "torch"

    def __init__(self):
        import torch
        self.torch = torch

    def make(self, values, dtype="float32"):
        t = self.torch
        return t.tensor(values, dtype=getattr(t, "float32"), device="cuda:0").to(getattr(t, dtype))

    def zeros(self, n, dtype="float32"):
        return self.torch.zeros(n, dtype=getattr(self.torch, dtype), device="cuda:0")

    def read(self, x):
        return x.float().cpu().tolist() if x.dtype != self.torch.int64 else x.cpu().tolist()

    def stream(self):
        return self.torch.cuda.Stream()

    def synchronize(self):
        self.torch.cuda.synchronize()


class CupyArrays:
    name = "cupy"

    def __init__(self):
        import cupy
        self.cupy = cupy

    def make(self, values, dtype="float32"):
        return self.cupy.asarray(values, dtype=dtype)

    def zeros(self, n, dtype="float32"):
        return self.cupy.zeros(n, dtype=dtype)

    def read(self, x):
        return self.cupy.asnumpy(x).astype("float64").tolist()

    def stream(self):
        return self.cupy.cuda.Stream(non_blocking=True)

    def synchronize(self):
        self.cupy.cuda.Device().synchronize()


@pytest.fixture(params=["torch", "cupy"])
def arrays(request):
    pytest.importorskip(request.param)
    return TorchArrays() if request.param == "torch" else CupyArrays()


@pytest.fixture(scope="module")
def comm():
    import ncclbind
    c = ncclbind.Communicator.init(1, 0, ncclbind.get_unique_id(), device=0)
    yield c
    c.destroy()


DATA = [1.0, 2.0, 3.0, 4.0]


# ---- collectives --------------------------------------------------------------

def test_every_collective_moves_the_data(comm, arrays):
    x = arrays.make(DATA)
    checks = {}
    y = arrays.zeros(4)
    comm.all_reduce(x, y)
    checks["all_reduce"] = y
    y = arrays.zeros(4)
    comm.reduce(x, y, root=0)
    checks["reduce"] = y
    y = arrays.zeros(4)
    comm.broadcast(x, y, root=0)
    checks["broadcast"] = y
    y = arrays.zeros(4)
    comm.all_gather(x, y)
    checks["all_gather"] = y
    y = arrays.zeros(4)
    comm.reduce_scatter(x, y)
    checks["reduce_scatter"] = y
    y = arrays.zeros(4)
    comm.all_to_all(x, y)
    checks["all_to_all"] = y
    y = arrays.zeros(4)
    comm.gather(x, y, root=0)
    checks["gather"] = y
    y = arrays.zeros(4)
    comm.scatter(x, y, root=0)
    checks["scatter"] = y
    for name, y in checks.items():  # default stream both ways: reading y waits for NCCL
        assert arrays.read(y) == DATA, name


def test_nccl4pys_interop_helpers_allocate_with_nccl():
    """ncclbind.torch / ncclbind.cupy (nccl4py's nccl.core.torch / .cupy): empty() in
    ncclMemAlloc memory, C or F order; resolve_* gives (ptr, count, NcclDataType, device)."""
    import ncclbind
    torch = pytest.importorskip("torch")
    t = ncclbind.torch.empty(2, 3, dtype=torch.float32, device=0, morder="F")
    assert t.shape == (2, 3) and t.stride() == (1, 2) and t.device.index == 0
    assert ncclbind.torch.resolve_tensor(t) == (t.data_ptr(), 6, ncclbind.FLOAT32, 0)
    assert ncclbind.torch.empty((4,)).dtype == torch.get_default_dtype()
    with pytest.raises(ncclbind.NcclInvalid, match="morder"):
        ncclbind.torch.empty(2, morder="X")
    cupy = pytest.importorskip("cupy")
    a = ncclbind.cupy.empty((2, 3), order="F")
    assert a.shape == (2, 3) and a.flags.f_contiguous and a.dtype == cupy.float64
    assert ncclbind.cupy.resolve_array(a) == (a.data.ptr, 6, ncclbind.FLOAT64, a.device.id)
    with pytest.raises(ncclbind.NcclInvalid, match="array"):
        ncclbind.cupy.resolve_array(t)


def test_send_and_recv_to_self(comm, arrays):
    import ncclbind
    x, y = arrays.make(DATA), arrays.zeros(4)
    with ncclbind.group():
        comm.send(x, peer=0)
        comm.recv(y, peer=0)
    assert arrays.read(y) == DATA


def test_in_place_and_reduction_ops(comm, arrays):
    import ncclbind
    x = arrays.make(DATA)
    comm.all_reduce(x)
    for op in (ncclbind.NcclRedOp.MAX, "min", ncclbind.NcclRedOp.PROD, ncclbind.NcclRedOp.AVG):
        comm.all_reduce(x, x, op)
    assert arrays.read(x) == DATA


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64",
                                   "float8_e4m3fn", "float8_e5m2"])
def test_every_torch_dtype(comm, dtype):
    torch = pytest.importorskip("torch")
    arrays = TorchArrays()
    x = arrays.make(DATA, dtype)
    y = arrays.zeros(4, dtype)
    comm.all_reduce(x, y)
    comm.all_gather(x, arrays.zeros(4, dtype))
    assert torch.equal(x, y) if not dtype.startswith("float8") else torch.equal(x.float(), y.float())


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int8", "uint8", "int32", "uint32", "int64",
                                   "uint64"])
def test_every_cupy_dtype(comm, dtype):
    pytest.importorskip("cupy")
    arrays = CupyArrays()
    x, y = arrays.make(DATA, dtype), arrays.zeros(4, dtype)
    comm.all_reduce(x, y)
    assert arrays.read(y) == DATA


def test_the_low_level_call(comm):
    torch = pytest.importorskip("torch")
    import ncclbind._nccl as nccl
    from ncclbind import NcclDataType, NcclRedOp
    x = torch.tensor(DATA, device="cuda:0")
    y = torch.zeros(4, device="cuda:0")
    nccl.all_reduce(x.data_ptr(), y.data_ptr(), 4, NcclDataType.FLOAT32, NcclRedOp.SUM, comm.handle, 0)
    assert y.tolist() == DATA


# ---- buffers and streams ---------------------------------------------------------------

def test_the_default_stream_is_the_legacy_default_stream(comm):
    """stream=None is handle 0: ordered after work torch queued on its default stream."""
    torch = pytest.importorskip("torch")
    x = torch.ones(1 << 20, device="cuda:0")
    for _ in range(20):
        x.mul_(1.0)  # keep the default stream busy
    x.mul_(3.0)
    y = torch.zeros_like(x)
    comm.all_reduce(x, y)  # no stream: 0
    assert y[-1].item() == 3.0  # .item() waits on torch's default stream


def test_streams_torch(comm):
    torch = pytest.importorskip("torch")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        x = torch.full((4,), 5.0, device="cuda:0")
        y = torch.zeros(4, device="cuda:0")
    comm.all_reduce(x, y, stream=stream)  # torch.cuda.Stream (.cuda_stream)

    class Protocol:  # the __cuda_stream__ protocol
        def __cuda_stream__(self):
            return (0, stream.cuda_stream)

    comm.all_reduce(x, y, stream=Protocol())
    comm.all_reduce(x, y, stream=stream.cuda_stream)  # an int handle
    stream.synchronize()
    assert y.tolist() == [5.0] * 4


def test_streams_cupy(comm):
    cupy = pytest.importorskip("cupy")
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        x = cupy.full(4, 7.0, dtype="float32")
        y = cupy.zeros(4, dtype="float32")
    comm.all_reduce(x, y, stream=stream)  # CuPy stream (.ptr)
    stream.synchronize()
    assert cupy.asnumpy(y).tolist() == [7.0] * 4


def test_dlpack_and_cuda_array_interface_producers(comm):
    torch = pytest.importorskip("torch")
    x = torch.tensor(DATA, device="cuda:0")

    class OnlyDLPack:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None, **kwargs):
            return self.t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    class OnlyCAI:
        def __init__(self, t):
            self.__cuda_array_interface__ = t.__cuda_array_interface__

    y = torch.zeros(4, device="cuda:0")
    comm.all_reduce(OnlyDLPack(x), OnlyCAI(y))
    assert y.tolist() == DATA


def test_bad_buffers_are_rejected(comm):
    torch = pytest.importorskip("torch")
    from ncclbind.errors import NcclInvalid
    with pytest.raises(NcclInvalid, match="host memory"):
        comm.all_reduce(torch.ones(4))
    with pytest.raises(NcclInvalid, match="non-contiguous"):
        comm.all_reduce(torch.ones(4, 4, device="cuda:0")[:, 0])
    with pytest.raises(NcclInvalid, match="no NCCL data type"):
        comm.all_reduce(torch.ones(4, dtype=torch.bool, device="cuda:0"))
    x, y = torch.ones(4, device="cuda:0"), torch.zeros(4, device="cuda:0")
    comm.all_reduce(x, y)
    y.resize_(3)  # the cached reading of y must notice
    with pytest.raises(NcclInvalid, match="3 elements"):
        comm.all_reduce(x, y)
    if torch.cuda.device_count() > 1:
        with pytest.raises(NcclInvalid, match="device 1"):
            comm.all_reduce(torch.ones(4, device="cuda:1"))


def test_a_cached_tensor_is_proven_unchanged_on_every_call(comm):
    """A cached torch tensor is probed on every call (data_ptr() and numel(); buffer_cache.c calls
    the C functions behind torch's method descriptors directly while torch.Tensor is unchanged):
    one re-pointed in place to new memory of the same size is read again, and a data_ptr given to
    torch.Tensor later is the one the probe calls."""
    torch = pytest.importorskip("torch")
    x, y = torch.ones(4, device="cuda:0"), torch.zeros(4, device="cuda:0")
    comm.all_reduce(x, y)
    fresh = torch.zeros(4, device="cuda:0")
    y.set_(fresh)  # same size, new memory: only data_ptr() tells
    comm.all_reduce(x, y)
    torch.cuda.synchronize()
    assert fresh.tolist() == [1.0] * 4
    calls = []
    original = torch.Tensor.data_ptr
    torch.Tensor.data_ptr = lambda self: calls.append(1) or original(self)
    try:
        comm.all_reduce(x, y)
    finally:
        del torch.Tensor.data_ptr
    assert calls, "the probe did not call torch.Tensor's new data_ptr"
    comm.all_reduce(x, y)  # and the descriptor again once the class is as it was
    torch.cuda.synchronize()
    assert y.tolist() == [1.0] * 4


def test_cupy_arrays_are_made_in_c(comm):
    """CuPy's arrays can be weakly referenced, so NcclBuffer caches them (without a probe: their
    memory and size are fixed): the second call on the same arrays is made in C, and views at
    other offsets and sizes (new objects, resolved afresh) move the right elements."""
    cupy = pytest.importorskip("cupy")
    x, y = cupy.arange(8, dtype=cupy.float32), cupy.zeros(8, dtype=cupy.float32)
    comm.all_reduce(x, y)  # first sight: resolved in Python
    from fast_path import PathLog
    with PathLog() as log:
        comm.all_reduce(x, y)
    assert log.calls == [("all_reduce", True)], "the second call on the same arrays in C"
    y[:] = 0
    for _ in range(2):
        comm.all_reduce(x[2:6], y[:4])
        comm.all_reduce(x[6:], y[6:])
    cupy.cuda.Device().synchronize()
    assert y.tolist() == [2, 3, 4, 5, 0, 0, 6, 7]


# ---- groups, registration, ops, memory ------------------------------------------------------

def test_group_simulation(comm):
    torch = pytest.importorskip("torch")
    import ncclbind
    x = torch.ones(1 << 16, device="cuda:0")
    with ncclbind.group(simulate=True) as g:
        comm.all_reduce(x)
    assert isinstance(g.info, ncclbind.GroupSimInfo)
    assert isinstance(g.info.estimated_time, float)
    print("estimated time:", g.info.estimated_time)


def test_buffer_registration(comm):
    torch = pytest.importorskip("torch")
    x = torch.tensor(DATA, device="cuda:0")
    with comm.register_buffer(x) as handle:
        assert handle.handle
        y = torch.zeros(4, device="cuda:0")
        comm.all_reduce(x, y)
        assert y.tolist() == DATA
    assert handle.closed


def test_window_registration_over_nccl_memory(comm):
    torch = pytest.importorskip("torch")
    import ncclbind
    resource = ncclbind.NcclMemoryResource(device=0)
    block = resource.allocate(1 << 21)
    try:
        window = comm.register_window(block, flags=0)
        x = torch.as_tensor(block, device="cuda:0").view(torch.float32)
        x.fill_(2.0)
        comm.all_reduce(x)
        assert x[:4].tolist() == [2.0] * 4
        print("host RMA available:", window.has_rma)
        window.close()
    finally:
        resource.deallocate(block)


def test_put_signal_counts_its_offset_in_elements(comm, api):
    """nccl4py's put_signal: peer_window_offset is in elements of the local buffer's type (NCCL
    takes bytes). One rank puts 16 float64 from the start of its window into the same window at
    element 100, signals and waits: the values land at byte 800, and nothing else moves. (NCCL
    2.32.3 takes a local buffer only inside a registered symmetric window: "srcWinHost is not in
    a valid symmetric window"; nccl.h does not say so.)"""
    torch = pytest.importorskip("torch")
    import ncclbind
    check_or_skip(api, "ncclSignal", lambda: comm.signal(0))  # (put_signal checks its window first)
    if not comm.host_rma_support:
        pytest.skip("NCCL reports no host RMA for this communicator (ncclCommProperties_t.hostRmaSupport 0)")
    resource = ncclbind.NcclMemoryResource(device=0)
    block = resource.allocate(1 << 21)
    try:
        target = torch.as_tensor(block, device="cuda:0").view(torch.float64)
        target.zero_()
        target[:16] = torch.arange(1, 17, dtype=torch.float64, device="cuda:0")
        window = comm.register_window(block, flags=ncclbind._nccl.NCCL_WIN_COLL_SYMMETRIC)
        comm.put_signal(target[:16], 0, window, 100)
        comm.wait_signal(ncclbind.WaitSignalDesc(peer=0))
        torch.cuda.synchronize()
        assert target[100:116].tolist() == list(map(float, range(1, 17)))
        assert not target[16:100].any() and not target[116:300].any()
        window.close()
    finally:
        resource.deallocate(block)


def test_pre_mul_sum_with_host_and_device_scalars(comm, arrays):
    x = arrays.make(DATA)
    y = arrays.zeros(4)
    with comm.create_pre_mul_sum(2.0, "float32") as op:
        comm.all_reduce(x, y, op)
        assert arrays.read(y) == [2 * v for v in DATA]
    scalar = arrays.make([3.0])
    with comm.create_pre_mul_sum(scalar) as op:
        comm.all_reduce(x, y, op)
        assert arrays.read(y) == [3 * v for v in DATA]
    half = arrays.make(DATA, "float16")
    with comm.create_pre_mul_sum(0.5, "float16") as op:
        comm.all_reduce(half, half, op)
        assert arrays.read(half) == [v / 2 for v in DATA]


def test_mem_alloc(comm):
    torch = pytest.importorskip("torch")
    import ncclbind
    buf = ncclbind.mem_alloc(1 << 20, device=0)
    assert buf.handle and buf.size == 1 << 20 and buf.device_id == 0
    x = torch.as_tensor(buf, device="cuda:0").view(torch.float32)
    x.fill_(2.0)
    assert float(x.sum()) == 2.0 * (1 << 18)
    del x
    ncclbind.mem_free(buf)
    assert buf.closed
    with ncclbind.NcclMemoryResource(device=0).allocate(4096) as block:
        x = torch.as_tensor(block, device="cuda:0").view(torch.float32)
        x.fill_(1.5)
        comm.all_reduce(block.as_buffer("float32"))
        assert x[:2].tolist() == [1.5, 1.5]


def test_split(comm):
    torch = pytest.importorskip("torch")
    part = comm.split(color=0, key=0)
    assert (part.nranks, part.rank, part.device) == (1, 0, comm.device)
    x, y = torch.tensor(DATA, device="cuda:0"), torch.zeros(4, device="cuda:0")
    part.all_reduce(x, y)
    assert y.tolist() == DATA
    part.destroy()
    none = comm.split(color=None, key=0)  # nccl4py: a null Communicator
    assert not none.is_valid and none.ptr == 0


def test_dev_comm(comm):
    import ncclbind
    reqs = ncclbind.NCCLDevCommRequirements()
    with comm.create_dev_comm(reqs) as dev:
        assert (dev.dev_comm.rank, dev.dev_comm.nRanks) == (0, 1)
        assert len(dev.to_bytes()) == dev.dev_comm.nbytes
    assert dev.closed


def test_device_api_properties(comm):
    import ncclbind
    if ncclbind.version_code() < 23203:
        with pytest.raises(ncclbind.NcclSymbolNotFoundError, match="ncclCommQueryProperties"):
            comm.device_api_support
        pytest.skip("ncclCommQueryProperties needs NCCL 2.32.3")
    assert isinstance(comm.device_api_support, bool)
    assert isinstance(comm.gin_type, ncclbind.NcclGinType)


def test_destroy_releases_what_the_communicator_made():
    torch = pytest.importorskip("torch")
    import ncclbind
    comm = ncclbind.Communicator.init(1, 0, ncclbind.get_unique_id(), device=0)
    x = torch.ones(4, device="cuda:0")
    made = [comm.register_buffer(x), comm.create_pre_mul_sum(2.0, "float32"), comm.create_dev_comm()]
    comm.destroy()
    assert all(r.closed for r in made)
    with pytest.raises(ncclbind.NcclInvalid, match="destroyed"):
        comm.all_reduce(x)


def test_init_all_and_device_context():
    import ncclbind
    comms = ncclbind.Communicator.init_all([0])
    assert comms[0].device == 0
    for c in comms:
        c.destroy()
    with ncclbind.CudaDeviceContext(0):
        from ncclbind.base.cuda import get_device
        assert get_device() == 0


def test_async_error_and_last_error(comm):
    import ncclbind
    assert comm.get_async_error() == ncclbind.NcclResult.SUCCESS
    assert isinstance(comm.get_last_error(), str)


# ---- host calls generated from the policy (kind = "call"): NCCL 2.29.7 and later ------------

def needs(api, function):
    """Skip (naming the release, read from the IR) when the loaded NCCL lacks `function`;
    before that, the method must raise NcclSymbolNotFoundError, which the callers check."""
    import ncclbind
    since = next(f["since"] for f in api["nccl"]["functions"] if f["name"] == function)
    return ncclbind.version_code() >= api["nccl"]["version_codes"][since], since


@pytest.fixture
def own_comm():
    import ncclbind
    c = ncclbind.Communicator.init(1, 0, ncclbind.get_unique_id(), device=0)
    yield c
    if not c.closed:
        c.destroy()


def check_or_skip(api, function, call):
    import ncclbind
    has, since = needs(api, function)
    if not has:
        with pytest.raises(ncclbind.NcclSymbolNotFoundError, match=function):
            call()
        pytest.skip(f"{function} first appears in NCCL {since}")


def test_suspend_and_resume(own_comm, api, arrays):
    import ncclbind
    from ncclbind.nccl_enums import NcclCommMemStat
    check_or_skip(api, "ncclCommSuspend", lambda: own_comm.suspend(ncclbind._nccl.NCCL_SUSPEND_MEM))
    own_comm.suspend(ncclbind._nccl.NCCL_SUSPEND_MEM)
    assert own_comm.mem_stats(NcclCommMemStat.STAT_GPU_MEM_SUSPENDED) == 1
    own_comm.resume()
    assert own_comm.mem_stats(NcclCommMemStat.STAT_GPU_MEM_SUSPENDED) == 0
    x = arrays.make(DATA)
    own_comm.all_reduce(x, x)
    arrays.synchronize()
    assert arrays.read(x) == DATA


def test_mem_stats(comm, api):
    from ncclbind.nccl_enums import NcclCommMemStat
    check_or_skip(api, "ncclCommMemStats", lambda: comm.mem_stats(NcclCommMemStat.STAT_GPU_MEM_TOTAL))
    values = {stat: comm.mem_stats(stat) for stat in NcclCommMemStat}
    assert all(isinstance(v, int) and v >= 0 for v in values.values())
    assert values[NcclCommMemStat.STAT_GPU_MEM_TOTAL] >= values[NcclCommMemStat.STAT_GPU_MEM_PERSIST]


def test_get_unique_id(own_comm, api):
    import ncclbind
    check_or_skip(api, "ncclCommGetUniqueId", own_comm.get_unique_id)
    uid = own_comm.get_unique_id()
    assert isinstance(uid, ncclbind.UniqueId) and len(uid.to_bytes()) == 128


def test_query_properties(comm, api):
    check_or_skip(api, "ncclCommQueryProperties", comm.query_properties)
    import ncclbind
    props = comm.query_properties()
    assert isinstance(props, ncclbind.NCCLCommProperties)
    assert (props.rank, props.n_ranks, props.cuda_dev) == (props.rank, props.nRanks, props.cudaDev) == (0, 1, 0)
    assert comm.properties == props and comm.properties is comm.properties  # read once
    assert (comm.cuda_dev, comm.nvml_dev) == (0, props.nvml_dev) and comm.n_lsa_teams >= 1
    assert isinstance(comm.host_rma_support, bool) and isinstance(comm.railed_gin_type, ncclbind.NcclGinType)
    assert comm.device.device_id == 0 and comm.device.compute_capability is not None  # a cuda.core Device too
    print(props)


def test_window_pointers(comm, api):
    import ncclbind
    resource = ncclbind.NcclMemoryResource(device=0)
    block = resource.allocate(1 << 21)
    try:
        window = comm.register_window(block, flags=ncclbind._nccl.NCCL_WIN_COLL_SYMMETRIC)
        # nccl4py's order: the rank first, then the byte offset (default 0)
        check_or_skip(api, "ncclGetLsaDevicePointer", lambda: window.get_lsa_device_pointer(0))
        lsa = window.get_lsa_device_pointer(0)
        peer = window.get_peer_device_pointer(0)
        assert isinstance(lsa, int) and lsa and peer == lsa
        assert window.get_lsa_device_pointer(0, 256) == lsa + 256
        assert window.lsa_pointer(0, 256) == lsa + 256  # ncclbind's name, the same method
        try:
            multimem = window.get_lsa_multimem_device_pointer()
            print("multimem pointer:", "none" if multimem is None else hex(multimem))
        except ncclbind.NcclError as error:  # no NVLS on this machine (or NCCL_NVLS_ENABLE=0)
            print("no multimem pointer:", error)
        window.close()
        with pytest.raises(ncclbind.NcclInvalid, match="closed"):
            window.get_lsa_device_pointer(0)
    finally:
        resource.deallocate(block)


# ---- teams, rank conversion, the parameter registry (returns = "value" and module owners) --

def test_teams_and_rank_conversion(comm, api):
    import ncclbind
    check_or_skip(api, "ncclTeamWorld", lambda: comm.team_world)
    world = comm.team_world
    assert isinstance(world, ncclbind.NCCLTeam)  # nccl4py's record (nRanks answers too)
    assert (world.n_ranks, world.rank) == (comm.nranks, comm.rank) == (world.nRanks, world.rank)
    for rank in range(world.nRanks):
        assert comm.team_rank_to_world(world, rank) == rank
    lsa, rail = comm.team_lsa, comm.team_rail
    assert 1 <= lsa.nRanks <= comm.nranks and 0 <= lsa.rank < lsa.nRanks
    assert lsa.nRanks * rail.nRanks == comm.nranks
    assert comm.team_rank_to_world(lsa, lsa.rank) == comm.rank
    assert comm.team_rank_to_lsa(world, comm.rank) == lsa.rank
    with pytest.raises(ncclbind.NcclInvalid, match="rank"):
        comm.team_rank_to_world(world, world.nRanks)


def test_cft_teams(comm, api):
    import ncclbind
    check_or_skip(api, "ncclTeamCft", comm.team_cft)
    for team in (comm.team_cft(), comm.team_cft_multimem):
        assert isinstance(team, ncclbind.NCCLTeam) and 0 <= team.nRanks <= comm.nranks
        print("CFT team:", team.nRanks, team.rank, team.stride)


def test_parameter_registry(api):
    import ncclbind
    check_or_skip(api, "ncclParamGetAllParameterKeys", ncclbind.params.keys)
    keys = ncclbind.params.keys()
    assert keys and all(isinstance(key, str) and key for key in keys)
    values = {key: ncclbind.params.get(key) for key in keys}
    assert all(isinstance(v, str) for v in values.values())
    assert ncclbind.params.bind(keys[0]).get_bytes()  # NCCL wrote its value's bytes
    print(values)


def test_lla2a_slot_count(api):
    import ncclbind
    slots = ncclbind.dev_comm.lla2a_calc_slots
    check_or_skip(api, "ncclLLA2ACalcSlots", lambda: slots(1024, 8))
    assert 0 < slots(1, 8) <= slots(1024, 8) <= slots(65536, 8)


# ---- NCCL memory as torch tensors and CuPy arrays (ncclbind.empty, zeros) -----------------

def address_of(x, arrays) -> int:
    return x.data_ptr() if arrays.name == "torch" else x.data.ptr


def free_device_memory(arrays) -> int:
    """cudaMemGetInfo's free bytes on device 0."""
    if arrays.name == "torch":
        return arrays.torch.cuda.mem_get_info(0)[0]
    with arrays.cupy.cuda.Device(0):
        return arrays.cupy.cuda.runtime.memGetInfo()[0]


def test_empty_and_zeros_in_nccl_memory_carry_collectives(comm, arrays, monkeypatch):
    import gc

    import ncclbind
    from ncclbind.core import memory
    from ncclbind.base.cuda import MEMORY_DEVICE, pointer_device
    freed = []
    free = memory.mem_free
    monkeypatch.setattr(memory, "mem_free", lambda address: (freed.append(address), free(address))[-1])
    x = ncclbind.empty((2, 2), "float32", like=arrays.name, comm=comm)
    z = ncclbind.zeros(4, "float32", like=arrays.name, comm=comm)
    assert tuple(x.shape) == (2, 2), f"expected shape (2, 2), got {tuple(x.shape)}"
    addresses = [address_of(x, arrays), address_of(z, arrays)]
    assert [pointer_device(a) for a in addresses] == [(MEMORY_DEVICE, 0)] * 2, "expected device memory on GPU 0"
    assert arrays.read(z) == [0.0] * 4, f"zeros: expected 4 zeros, got {arrays.read(z)}"
    comm.all_reduce(arrays.make(DATA), x)  # into NCCL memory
    comm.all_reduce(x)  # in place
    comm.all_reduce(x, z)  # out of it
    got = arrays.read(z)
    assert got == DATA, f"all_reduce over ncclbind.empty memory: expected {DATA}, got {got}"
    view = x.reshape(4)[1:]
    del x, z
    gc.collect()
    ours = [a for a in freed if a in addresses]  # other tests' garbage may be collected here too
    assert ours == [addresses[1]], f"expected only z ({addresses[1]:#x}) freed while a view of x lives: {ours}"
    assert arrays.read(view) == DATA[1:], "a view must keep its memory"
    del view
    gc.collect()
    ours = [a for a in freed if a in addresses]
    assert sorted(ours) == sorted(addresses), f"expected each of {addresses} freed once, freed {ours}"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int64", "complex64", "complex128"])
def test_empty_dtypes(comm, arrays, dtype):
    import ncclbind
    if arrays.name == "cupy" and dtype == "bfloat16":
        pytest.skip("bfloat16 CuPy arrays (through ml_dtypes) are not checked here")
    x = ncclbind.empty(3, dtype, like=arrays.name, comm=comm)
    want = getattr(arrays.torch, dtype) if arrays.name == "torch" else arrays.cupy.dtype(dtype)
    assert x.dtype == want, f"expected dtype {want}, got {x.dtype}"
    comm.all_gather(x, ncclbind.empty(3, dtype, like=arrays.name, comm=comm))


def test_empty_memory_returns_to_the_device_after_del_and_gc(comm, arrays):
    import gc

    import ncclbind
    nbytes = 256 << 20
    arrays.synchronize()
    gc.collect()
    free_device_memory(arrays)  # any first-call setup before the measurement
    before = free_device_memory(arrays)
    x = ncclbind.empty(nbytes // 4, "float32", like=arrays.name, comm=comm)
    held = free_device_memory(arrays)
    assert before - held >= nbytes, f"expected >= {nbytes} bytes fewer free after empty(), {before - held} were"
    del x
    gc.collect()
    after = free_device_memory(arrays)
    assert after - held >= nbytes, (f"expected >= {nbytes} bytes free again after del + gc (ncclMemFree), "
                                    f"{after - held} came back")


def test_a_symmetric_window_over_empty(comm, arrays):
    import ncclbind
    x = ncclbind.empty(1 << 19, "float32", like=arrays.name, comm=comm)  # 2 MiB
    if arrays.name == "torch":
        x.fill_(2.0)
    else:
        x.fill(2.0)
    window = comm.register_window(x, flags=ncclbind._nccl.NCCL_WIN_COLL_SYMMETRIC)
    try:
        assert window.buffer.ptr == address_of(x, arrays)
        comm.all_reduce(x)
        got = arrays.read(x[:4])
        assert got == [2.0] * 4, f"all_reduce on a window over ncclbind.empty: expected [2.0] * 4, got {got}"
    finally:
        window.close()


def test_empty_rejects_a_device_other_than_the_communicators(comm, arrays):
    import ncclbind
    with pytest.raises(ncclbind.NcclInvalid) as info:  # "not the communicator's device 0" or "does not exist"
        ncclbind.empty(4, "float32", like=arrays.name, comm=comm, device=1)
    assert info.value.argument == "device", f"expected NcclInvalid naming device, got {info.value!r}"


# ---- variable-count collectives on one rank: uneven counts and displacements ----------------

def test_all_to_allv_on_one_rank(comm, arrays):
    send = arrays.make([float(i + 1) for i in range(10)])
    recv = arrays.make([-1.0] * 9)
    comm.all_to_allv(send, [4], [3], recv, [4], [5])  # send[3:7] -> recv[5:9]
    expected = [-1.0] * 5 + [4.0, 5.0, 6.0, 7.0]
    got = arrays.read(recv)
    assert got == expected, f"all_to_allv (4 at 3 -> 4 at 5): expected {expected}, got {got}"
    comm.all_to_allv(send, [0], [0], recv, [0], [0])  # empty blocks: no NCCL call, nothing written
    got = arrays.read(recv)
    assert got == expected, f"all_to_allv of empty blocks must leave recvbuf: expected {expected}, got {got}"


def test_all_gatherv_on_one_rank(comm, arrays):
    send = arrays.make([5.0, 6.0, 7.0])
    recv = arrays.make([-1.0] * 8)
    comm.all_gatherv(send, recv, [3], [4])
    expected = [-1.0] * 4 + [5.0, 6.0, 7.0, -1.0]
    got = arrays.read(recv)
    assert got == expected, f"all_gatherv (3 at 4): expected {expected}, got {got}"
    packed = arrays.make([-1.0] * 4)
    stream = arrays.stream()
    arrays.synchronize()
    comm.all_gatherv(send, packed, [3], stream=stream)
    stream.synchronize()
    expected = [5.0, 6.0, 7.0, -1.0]
    got = arrays.read(packed)
    assert got == expected, f"all_gatherv (packed, on a stream): expected {expected}, got {got}"


def test_reduce_scatterv_on_one_rank(comm, arrays):
    send = arrays.make([float(i + 1) for i in range(10)], "int64")
    recv = arrays.make([-1.0] * 5, "int64")
    comm.reduce_scatterv(send, recv, [3], [6])  # send[6:9] -> recv[:3]
    expected = [7, 8, 9, -1, -1]
    got = arrays.read(recv)
    assert got == expected, f"reduce_scatterv (3 at 6): expected {expected}, got {got}"
    comm.reduce_scatterv(send, recv, [2], op="max")  # packed: send[0:2]
    expected = [1, 2, 9, -1, -1]
    got = arrays.read(recv)
    assert got == expected, f"reduce_scatterv (packed, max): expected {expected}, got {got}"


# ---- complex buffers: sum and avg as pairs of reals; other ops rejected -------------------

COMPLEX = [1 + 2j, -3.5 + 0.25j, 0j, 4 - 8j]  # exact in complex64


def complex_array(arrays, values, dtype):
    if arrays.name == "torch":
        return arrays.torch.tensor(values, dtype=getattr(arrays.torch, dtype), device="cuda:0")
    return arrays.cupy.asarray(values, dtype=dtype)


def read_complex(arrays, x):
    return x.cpu().tolist() if arrays.name == "torch" else arrays.cupy.asnumpy(x).tolist()


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_all_reduce_sum_and_avg(comm, arrays, dtype):
    x = complex_array(arrays, COMPLEX, dtype)
    for op in ("sum", "avg"):
        y = complex_array(arrays, [0j] * 4, dtype)
        comm.all_reduce(x, y, op)
        got = read_complex(arrays, y)
        assert got == COMPLEX, f"{op} of {dtype} on one rank: expected {COMPLEX}, got {got}"
    comm.all_reduce(x, x, "sum")  # in place
    got = read_complex(arrays, x)
    assert got == COMPLEX, f"in-place sum of {dtype}: expected {COMPLEX}, got {got}"
    out = complex_array(arrays, [0j] * 3, dtype)
    comm.all_to_allv(x, [2], [1], out, [2], [1])  # a complex block: 2 complex numbers at 1
    got = read_complex(arrays, out)
    assert got == [0j] + COMPLEX[1:3], f"all_to_allv of {dtype}: expected {[0j] + COMPLEX[1:3]}, got {got}"


@pytest.mark.parametrize("op", ["max", "min", "prod"])
def test_complex_max_min_prod_are_rejected(comm, arrays, op):
    import ncclbind
    x = complex_array(arrays, COMPLEX, "complex64")
    y = complex_array(arrays, [0j] * 4, "complex64")
    with pytest.raises(ncclbind.NcclInvalid, match="only sum and avg") as info:
        comm.all_reduce(x, y, op)
    assert info.value.argument == "op", f"expected NcclInvalid naming op, got {info.value!r}"
    assert read_complex(arrays, y) == [0j] * 4, "a rejected all_reduce must not write recvbuf"


# ---- the hang watchdog -------------------------------------------------------------------

def test_work_that_completes_under_the_watchdog_passes(comm, arrays):
    x, y, gathered = arrays.make(DATA), arrays.zeros(4), arrays.zeros(4)
    with comm.watchdog(timeout_s=30) as dog:
        comm.all_reduce(x, y)
        comm.all_gatherv(x, gathered, [4])
        dog.synchronize()
    assert not comm.closed, "a watchdog that did not expire must leave the communicator"
    assert (arrays.read(y), arrays.read(gathered)) == (DATA, DATA), "expected all_reduce and all_gatherv to move DATA"


def test_a_wait_past_the_timeout_aborts_and_the_gpu_stays_usable(comm):
    """No NCCL call can hang on one rank without breaking the GPU, so the stream is
    kept busy by a sleeping kernel (finite, ~1-2 s) queued after a completed
    all_reduce: the watched synchronize outlives timeout_s, the watchdog aborts the
    (idle) communicator, and NcclTimeout names the call enqueued on that stream."""
    import time

    torch = pytest.importorskip("torch")
    import ncclbind
    own = ncclbind.Communicator.init(1, 0, ncclbind.get_unique_id(), device=0)
    stream = torch.cuda.Stream()
    x = torch.tensor(DATA, device="cuda:0")
    torch.cuda.synchronize()
    started = time.monotonic()
    with pytest.raises(ncclbind.NcclTimeout) as info:
        with own.watchdog(timeout_s=0.3, poll_s=0.05) as dog:
            own.all_reduce(x, stream=stream)
            stream.synchronize()  # NCCL is done before the abort: only the sleep is left
            with torch.cuda.stream(stream):
                torch.cuda._sleep(3_000_000_000)  # clock cycles: 1.5 s at 2 GHz
            dog.synchronize(stream.cuda_stream)
    waited = time.monotonic() - started
    assert info.value.function == "all_reduce", f"expected NcclTimeout naming all_reduce, got {info.value!r}"
    assert info.value.timeout_s == 0.3 and isinstance(info.value, TimeoutError)
    assert 0.3 <= waited < 60, f"expected the timeout after >= 0.3 s, it came after {waited:.2f} s"
    assert own.closed, "expected the watchdog to have aborted the communicator"
    torch.cuda.synchronize()
    y = torch.zeros(4, device="cuda:0")
    comm.all_reduce(x, y)  # another communicator on the same GPU still works
    assert y.tolist() == DATA, f"after the abort: expected {DATA}, got {y.tolist()}"


def test_per_call_config_collectives(own_comm, api, arrays):
    """config= takes the *Config variant: an ncclCollConfig_t (through the C fast path) or a
    dict of its fields (through ncclbind.base.calls), with the data checked either way."""
    import ncclbind
    record = ncclbind._nccl.nccl_collconfig_initializer()
    x = arrays.make(DATA)
    check_or_skip(api, "ncclAllReduceConfig", lambda: own_comm.all_reduce(x, config=record))
    own_comm.all_reduce(x)  # first sight: x is resolved (and cached) in Python
    from fast_path import PathLog
    with PathLog() as log:
        own_comm.all_reduce(x, config=record)
        own_comm.all_reduce(x, config={"minCTAs": 1, "maxCTAs": 2})
    y = arrays.make([0.0] * len(DATA))
    own_comm.all_gather(x, y, config=record)
    arrays.synchronize()
    assert arrays.read(x) == DATA and arrays.read(y) == DATA
    assert log.counts("all_reduce") == (1, 1), "the record in C, the dict in Python"
