"""ncclbind.symmetric with torch: SymmTensor over MockAllocator (host memory, no GPU, no
communicator) — no copies, freed when the last view goes, clone() plain, mxfp8 data and
scale views, the graph sub-pool, statistics, and (hypothesis) live tensors never share
bytes; then, marked gpu, over a one-rank communicator on device 0: NcclSymPool as a
tensor, SymmTensors in every collective, and torch_pool's MemPool registered as windows.

Skipped as a whole, with the reason, where torch cannot be imported (this CI machine);
tests/multigpu/symmetric/run.sh runs it on the GPU machine:
    NCCL_NVLS_ENABLE=0 python3 -m pytest tests/python/test_symmetric_torch.py -v -rs
"""
from __future__ import annotations

import copy
import gc
import pickle

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here (the GPU machine runs these)")

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # the property test below then skips, saying so
    given = None

import ncclbind  # noqa: E402
from ncclbind.errors import NcclInvalid  # noqa: E402
from ncclbind.symmetric import MockAllocator, SymmAllocator, SymmTensor  # noqa: E402
from ncclbind.symmetric.freelist import SubPoolBookkeeping  # noqa: E402



def refused(call, argument):
    with pytest.raises(NcclInvalid) as info:
        call()
    assert info.value.argument == argument and argument in str(info.value), str(info.value)


# ---- MockAllocator: SymmTensor without a GPU ------------------------------------------------

def test_the_mock_is_the_real_allocator_over_host_memory():
    alloc = MockAllocator(1 << 16, alignment=256)
    assert isinstance(alloc, SymmAllocator) and type(alloc.books) is SubPoolBookkeeping
    x = alloc.empty((4, 8), torch.float32)
    assert type(x) is SymmTensor and isinstance(x, torch.Tensor)
    assert x.shape == (4, 8) and x.dtype == torch.float32 and x.is_contiguous()
    base = alloc.pool_tensor.data_ptr()
    assert x.data_ptr() == base + x.symm_offset and x.symm_offset % 256 == 0
    x.fill_(3.0)  # no copy: the pool's bytes change
    assert torch.equal(alloc.pool_tensor[x.symm_offset:x.symm_offset + 128].view(torch.float32),
                       torch.full((32,), 3.0))


def test_a_block_is_freed_when_its_last_view_goes():
    alloc = MockAllocator(1 << 16, alignment=256)
    x = alloc.empty(100, "float32")
    view = x[10:20]
    reshaped = x.view(10, 10)
    assert alloc.stats().allocations == 1
    del x
    gc.collect()
    assert alloc.stats().allocations == 1  # views still hold it
    del view
    assert alloc.stats().allocations == 1
    del reshaped  # the last one: freed at once, by reference counting
    assert alloc.stats().allocations == 0 and alloc.stats().in_use == 0


def test_ops_and_clone_give_plain_tensors():
    alloc = MockAllocator(1 << 16)
    x = alloc.zeros(16, torch.float32)
    for result in (x.clone(), x + 1, x[2:], x.view(4, 4), x * x):
        assert type(result) is torch.Tensor
    c = x.clone()
    start, end = alloc.pool.ptr, alloc.pool.ptr + alloc.pool.nbytes
    assert not start <= c.data_ptr() < end  # a clone lives in torch's memory
    assert x[2:].data_ptr() == x.data_ptr() + 8  # a view stays in the pool


def test_copies_are_plain_tensors():
    alloc = MockAllocator(1 << 16)
    x = alloc.empty(8, torch.float32)
    x.copy_(torch.arange(8.0))
    for copied in (copy.deepcopy(x), pickle.loads(pickle.dumps(x))):
        assert type(copied) is torch.Tensor and torch.equal(copied, torch.arange(8.0))
        assert copied.data_ptr() != x.data_ptr()


def test_mxfp8_layout_data_then_aligned_scales():
    alloc = MockAllocator(1 << 16, alignment=4096)
    q = alloc.mxfp8((4, 64))
    assert q.dtype == torch.float8_e4m3fn and q.shape == (4, 64) and q.symm_layout == "mxfp8"
    assert q.mx_data is q
    scales = q.mx_scales
    assert scales.dtype == torch.uint8 and scales.shape == (4, 2)
    count = 4 * 64
    assert scales.data_ptr() == q.data_ptr() + count  # 256 is already 16-aligned
    assert q.allocation.numel() == count + count // 32 and q.symm_nbytes == 4096
    scales.fill_(127)
    assert torch.equal(q.allocation[count:], torch.full((8,), 127, dtype=torch.uint8))
    odd = alloc.mxfp8((3, 32))  # 96 values: scales at 96 (a multiple of 16)
    assert odd.mx_scales.data_ptr() - odd.data_ptr() == 96
    odd2 = alloc.mxfp8((1, 32 * 3 + 32))  # 128 values
    assert odd2.mx_scales.shape == (1, 4)
    del q, scales, odd, odd2
    assert alloc.stats().allocations == 0


def test_mxfp8_views_keep_the_block_until_the_last_goes():
    alloc = MockAllocator(1 << 16)
    q = alloc.mxfp8((2, 32))
    scales = q.mx_scales
    del q
    assert alloc.stats().allocations == 1
    del scales
    assert alloc.stats().allocations == 0


def test_bad_requests_are_refused():
    alloc = MockAllocator(1 << 16)
    refused(lambda: alloc.empty(-1, "float32"), "shape")
    refused(lambda: alloc.empty("4", "float32"), "shape")
    refused(lambda: alloc.empty(4, "no_such_dtype"), "dtype")
    refused(lambda: alloc.mxfp8((4, 33)), "shape")
    refused(lambda: alloc.empty(4, "float32").mx_scales, "mx_scales")
    refused(lambda: MockAllocator(1 << 16, alignment=3), "alignment")
    refused(lambda: MockAllocator(0), "nbytes")
    gc.collect()  # the caught exceptions' tracebacks hold the mx_scales tensor in a cycle
    assert alloc.stats().allocations == 0


def test_captured_tensors_come_from_the_graph_sub_pool():
    alloc = MockAllocator(1 << 16, alignment=4096)  # graph sub-pool: the last quarter
    eager = alloc.empty(10, "float32")
    alloc.capturing = True
    captured = alloc.empty(10, "float32")
    alloc.capturing = False
    assert eager.symm_offset < 3 * (1 << 14) <= captured.symm_offset
    assert alloc.stats().graph.allocations == 1 and alloc.stats().eager.allocations == 1
    forced = alloc.empty(1, "uint8", captured=True)
    assert forced.symm_offset >= 3 * (1 << 14)


def test_stats_follow_allocations():
    alloc = MockAllocator(16 * 4096, alignment=4096, graph_bytes=0)
    tensors = [alloc.empty(4096, "uint8") for _ in range(4)]
    del tensors[1]
    s = alloc.stats()
    assert (s.in_use, s.free, s.largest_free) == (3 * 4096, 13 * 4096, 12 * 4096)
    assert s.fragmentation == pytest.approx(1 - 12 / 13)
    assert "in_use=12288" in repr(alloc)


def live_tensors_never_share_bytes(steps):
    alloc = MockAllocator(1 << 16, alignment=64)
    live = []
    for index, (allocate, count, pick) in enumerate(steps):
        if allocate:
            try:
                t = alloc.empty(count, torch.uint8)
            except MemoryError:
                continue
            t.fill_(index % 251)
            live.append((t, index % 251))
            del t
        elif live:
            live.pop(pick % len(live))
        assert all(bool((t == value).all()) for t, value in live), "a tensor's bytes were overwritten by another's"
    live.clear()
    assert alloc.stats().allocations == 0


if given is not None:
    test_live_tensors_never_share_bytes = settings(
        max_examples=100, derandomize=True, database=None, deadline=None,
        suppress_health_check=[HealthCheck.too_slow])(given(steps=st.lists(
            st.tuples(st.booleans(), st.integers(0, 3000), st.integers(0, 31)), max_size=40))(
            live_tensors_never_share_bytes))
else:
    def test_live_tensors_never_share_bytes():
        pytest.skip("hypothesis is not installed")


# ---- on a GPU: one rank ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def comm():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    c = ncclbind.Communicator.init(1, 0, ncclbind.get_unique_id(), device=0)
    yield c
    c.destroy()


@pytest.mark.gpu
def test_a_pool_is_a_uint8_tensor_without_a_copy(comm):
    with ncclbind.NcclSymPool(comm, 1 << 20) as pool:
        whole = pool.as_tensor()
        assert whole.dtype == torch.uint8 and whole.numel() == pool.nbytes
        assert whole.data_ptr() == pool.ptr and whole.device == torch.device("cuda", 0)
        whole.fill_(5)
        comm.all_reduce(pool)  # the pool itself as a buffer
        torch.cuda.synchronize()
        assert bool((whole == 5).all())


@pytest.mark.gpu
def test_symm_tensors_in_every_collective_on_one_rank(comm):
    with ncclbind.NcclSymPool(comm, 4 << 20) as pool:
        x = pool.tensor("float32", 1024)
        y = pool.tensor(torch.float32, 1024)
        assert type(x) is SymmTensor and x.is_cuda and pool.contains(x.data_ptr(), 4096)
        x.copy_(torch.arange(1024, dtype=torch.float32))
        for call in (lambda: comm.all_reduce(x, y), lambda: comm.broadcast(x, y, 0),
                     lambda: comm.all_gather(x, y), lambda: comm.reduce_scatter(x, y),
                     lambda: comm.reduce(x, y, root=0)):
            y.zero_()
            call()
            torch.cuda.synchronize()
            assert torch.equal(y, x)
        q = pool.allocator.mxfp8((8, 64))
        out = pool.allocator.empty(q.allocation.numel(), torch.uint8)
        q.allocation.fill_(9)
        comm.all_gather(q.allocation, out)  # data and scales in one call
        torch.cuda.synchronize()
        assert bool((out == 9).all())
        del x, y, q, out
        torch.cuda.synchronize()
        assert pool.allocator.stats().allocations == 0


@pytest.mark.gpu
def test_torch_pool_allocations_register_as_symmetric_windows(comm):
    pool = ncclbind.torch_pool(comm)
    before = pool.library.counts()
    with pool:
        x = torch.ones(1 << 18, device="cuda:0")
    assert pool.library.counts()[0] > before[0]  # ncclMemAlloc served torch
    segments = pool.segments()
    assert any(start <= x.data_ptr() < start + size for start, size in segments), segments
    pool.register_windows()
    window = pool.window_of(x.data_ptr())
    assert window is not None and window.flags == ncclbind._nccl.NCCL_WIN_COLL_SYMMETRIC
    comm.all_reduce(x)
    torch.cuda.synchronize()
    assert bool((x == 1).all())
    pool.close()
    assert pool.windows == {}
    del x
