"""ncclbind.symmetric over the stand-in libnccl (fake_nccl.c, host memory for device
memory), without torch: NcclSymPool's making and teardown order, its cleanup when a step
fails, its argument checks, the pool and addresses inside it as buffers of collectives;
and the torch allocator's shared object (torch_allocator.c) calling ncclMemAlloc /
ncclMemFree through the runtime. What needs torch is in test_symmetric_torch.py.

The library is chosen once per process: this module runs itself again over the stand-in
(stand_ins.run_over_stand_in). The allocator's shared object is compiled here with
the C compiler from its source and the runtime's (NCCLBIND_TORCH_ALLOCATOR: a built one).
"""
from __future__ import annotations

import ctypes
import os
import pathlib

import pytest

from stand_ins import INSIDE, given_or_built, run_over_stand_in

ROOT = pathlib.Path(__file__).resolve().parents[2]

if not INSIDE:
    def test_symmetric_over_the_stand_in_library(tmp_path):
        run_over_stand_in(__file__, tmp_path)

else:
    import ncclbind
    from ncclbind import Communicator, UniqueId, _nccl
    from ncclbind.errors import NcclError, NcclInvalid
    from ncclbind.symmetric import NcclSymPool, window_alignment
    from ncclbind.symmetric.torch_pool import AllocatorLibrary

    class Fake:
        def __init__(self):
            self.library = ctypes.CDLL(os.environ["NCCLBIND_NCCL_PATH"])

        def mem_calls(self):
            allocs, frees = ctypes.c_int(), ctypes.c_int()
            self.library.fakeMemCalls(ctypes.byref(allocs), ctypes.byref(frees))
            return allocs.value, frees.value

        def fail_next_mem_alloc(self):
            self.library.fakeFailNextMemAlloc()

    fake = Fake()

    @pytest.fixture
    def comm():
        c = Communicator.init(1, 0, UniqueId.generate())
        yield c
        c.destroy()

    @pytest.fixture
    def calls(monkeypatch):
        """The order of the NCCL calls that make and release a pool: [(name, first argument)]."""
        log = []
        for name in ("mem_alloc", "mem_free", "dev_comm_create", "dev_comm_destroy", "comm_window_register",
                     "comm_window_deregister"):
            real = getattr(_nccl, name)

            def traced(*args, _name=name, _real=real):
                log.append(_name)
                return _real(*args)
            monkeypatch.setattr(_nccl, name, traced)
        return log

    def refused(call, argument):
        with pytest.raises(NcclInvalid) as info:
            call()
        assert info.value.argument == argument and argument in str(info.value), str(info.value)

    def test_a_pool_is_memory_then_dev_comm_then_window_and_goes_in_reverse(comm, calls):
        before = fake.mem_calls()
        pool = NcclSymPool(comm, 10_000)
        assert calls == ["mem_alloc", "dev_comm_create", "comm_window_register"]
        assert pool.nbytes % window_alignment() == 0 and pool.nbytes >= 10_000
        assert pool.ptr and not pool.closed and pool.window.flags == _nccl.NCCL_WIN_COLL_SYMMETRIC
        assert pool.window.buffer.ptr == pool.ptr and pool.window.buffer.nbytes == pool.nbytes
        assert pool.dev_comm is not None and not pool.dev_comm.closed
        calls.clear()
        pool.close()
        assert calls == ["comm_window_deregister", "dev_comm_destroy", "mem_free"]
        assert pool.closed and pool.ptr == 0
        pool.close()  # idempotent
        assert calls == ["comm_window_deregister", "dev_comm_destroy", "mem_free"]
        assert fake.mem_calls() == (before[0] + 1, before[1] + 1)

    def test_the_window_alignment_is_nccl_s(comm):
        assert window_alignment() == _nccl.NCCL_WIN_REQUIRED_ALIGNMENT
        with NcclSymPool(comm, 1) as pool:
            assert pool.nbytes == _nccl.NCCL_WIN_REQUIRED_ALIGNMENT

    def test_lsa_multimem_is_off_unless_asked(comm):
        with NcclSymPool(comm, 4096) as pool:
            assert pool.dev_comm.requirements.lsaMultimem is False and pool.lsa_multimem is False
        with NcclSymPool(comm, 4096, lsa_multimem=True) as pool:
            assert pool.dev_comm.requirements.lsaMultimem is True
        with NcclSymPool(comm, 4096, dev_comm=False) as pool:
            assert pool.dev_comm is None and pool.window is not None

    def test_a_failed_window_undoes_the_dev_comm_and_the_memory(comm, calls, monkeypatch):
        def refuse(*args):
            raise NcclError("fake: window registration refused")
        monkeypatch.setattr(_nccl, "comm_window_register", refuse)
        before = fake.mem_calls()
        with pytest.raises(NcclError):
            NcclSymPool(comm, 4096)
        assert calls == ["mem_alloc", "dev_comm_create", "dev_comm_destroy", "mem_free"]
        assert fake.mem_calls() == (before[0] + 1, before[1] + 1)
        assert not comm._resources  # nothing left with the communicator

    def test_a_failed_allocation_makes_nothing_else(comm, calls):
        fake.fail_next_mem_alloc()
        with pytest.raises(NcclError):
            NcclSymPool(comm, 4096)
        assert calls == ["mem_alloc"] and not comm._resources

    def test_bad_arguments_are_refused_before_anything_is_allocated(comm, calls):
        refused(lambda: NcclSymPool("comm", 4096), "comm")
        for bad in (0, -1, True, 1.5, "4096"):
            refused(lambda: NcclSymPool(comm, bad), "nbytes")
        refused(lambda: NcclSymPool(comm, 4096, lsa_multimem=1), "lsa_multimem")
        refused(lambda: NcclSymPool(comm, 4096, flags=-1), "flags")
        destroyed = Communicator.init(1, 0, UniqueId.generate())
        destroyed.destroy()
        refused(lambda: NcclSymPool(destroyed, 4096), "comm")
        assert calls == []

    def test_destroying_the_communicator_first_leaves_only_the_memory_to_free(calls):
        comm = Communicator.init(1, 0, UniqueId.generate())
        pool = NcclSymPool(comm, 4096)
        calls.clear()
        comm.destroy()  # the communicator releases its device communicator and window
        assert calls == ["dev_comm_destroy", "comm_window_deregister"]
        pool.close()
        assert calls == ["dev_comm_destroy", "comm_window_deregister", "mem_free"]

    def test_the_pool_and_addresses_inside_it_are_buffers_of_every_collective(comm):
        with NcclSymPool(comm, 3 * 4096) as pool:
            n = 256
            send, recv = pool.ptr, pool.ptr + 4096
            values = (ctypes.c_float * n)(*range(n))
            ctypes.memmove(send, values, ctypes.sizeof(values))
            out = (ctypes.c_float * n).from_address(recv)
            for call in (lambda: comm.all_reduce((send, n, "float32"), (recv, n, "float32")),
                         lambda: comm.broadcast((send, n, "float32"), (recv, n, "float32"), 0),
                         lambda: comm.all_gather((send, n, "float32"), (recv, n, "float32")),
                         lambda: comm.reduce_scatter((send, n, "float32"), (recv, n, "float32"))):
                ctypes.memset(recv, 0, 4 * n)
                call()
                assert list(out) == list(range(n))
            comm.all_reduce(pool)  # the whole pool, as uint8, through its __cuda_array_interface__
            assert list(out) == list(range(n))

    # ---- the torch allocator's shared object -------------------------------------------------

    @pytest.fixture(scope="module")
    def allocator_so(tmp_path_factory):
        return given_or_built("NCCLBIND_TORCH_ALLOCATOR", tmp_path_factory.mktemp("allocator") / "torch_allocator.so",
                              ["-std=c11", "-fvisibility=hidden", "-Wall", "-Werror", "-I", str(ROOT / "runtime" / "include"),
                               str(ROOT / "bindings/python/ncclbind/symmetric/torch_allocator.c"),
                               *map(str, sorted((ROOT / "runtime" / "src").glob("*.c"))), "-ldl", "-lpthread"])

    def test_the_torch_allocator_calls_nccl_mem_alloc_and_free(allocator_so, comm):
        so = AllocatorLibrary(allocator_so)
        before, counts = fake.mem_calls(), so.counts()
        a = so.library.ncclbind_symmetric_alloc(1000, 0, None)
        b = so.library.ncclbind_symmetric_alloc(5000, 0, None)
        assert a and b and a != b
        assert fake.mem_calls() == (before[0] + 2, before[1])  # the stand-in's ncclMemAlloc, twice
        ctypes.memset(a, 7, 1000)  # it is real (host) memory here
        assert so.live_blocks()[-2:] == [(a, 1000), (b, 5000)]  # oldest first
        so.library.ncclbind_symmetric_free(a, 1000, 0, None)
        assert (b, 5000) in so.live_blocks() and all(p != a for p, _ in so.live_blocks())
        so.library.ncclbind_symmetric_free(b, 5000, 0, None)
        assert fake.mem_calls() == (before[0] + 2, before[1] + 2)
        assert so.counts() == (counts[0] + 2, counts[1] + 2, counts[2])

    def test_a_failed_nccl_mem_alloc_gives_torch_null_and_keeps_nccl_s_code(allocator_so, comm):
        so = AllocatorLibrary(allocator_so)
        counts = so.counts()
        fake.fail_next_mem_alloc()
        assert so.library.ncclbind_symmetric_alloc(4096, 0, None) is None
        assert so.last_result() == ncclbind.NcclResult.SYSTEM_ERROR
        assert so.counts() == (counts[0], counts[1], counts[2] + 1)
