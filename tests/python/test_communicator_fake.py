"""The Pythonic layer end to end on a CPU: Communicator, collectives, groups,
resources, memory and streams over a stand-in libnccl (fake_nccl.c: claims
2.28.9, runs one-rank collectives with memcpy on host memory).

The library is chosen once per process, so this module runs itself again in a
subprocess with NCCLBIND_NCCL_PATH set to the stand-in (built here with the C
compiler, or given by NCCLBIND_FAKE_NCCL, e.g. from Bazel).
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
import types

import numpy as np
import pytest

from stand_ins import INSIDE, run_over_stand_in

if not INSIDE:
    def test_pythonic_layer_over_the_stand_in_library(tmp_path):
        run_over_stand_in(__file__, tmp_path)

else:
    import ncclbind
    from ncclbind import Communicator, NcclBuffer, NcclRedOp, UniqueId, group
    from ncclbind.errors import NcclInvalid, NcclSymbolNotFoundError
    from stand_ins import DeviceArray, device_array

    def values(a):
        return a.array.tolist()

    @pytest.fixture
    def comm():
        c = Communicator.init(1, 0, UniqueId.generate())
        yield c
        c.destroy()

    def test_the_stand_in_is_loaded():
        assert ncclbind.version_code() == 22809
        loaded = ncclbind.library_info("nccl").path
        assert os.path.realpath(loaded) == os.path.realpath(os.environ["NCCLBIND_NCCL_PATH"])

    def test_init_and_properties(comm):
        assert (comm.rank, comm.nranks, comm.device) == (0, 1, 0)
        assert comm.handle and not comm.closed
        assert repr(comm) == "Communicator(rank=0, nranks=1, device=0)"

    def test_a_null_communicator_is_nccl4pys(comm):
        """Communicator() is null until initialize(); init takes config positionally; init_all
        and split default as nccl4py's; grow's roles are checked before NCCL is called."""
        null = Communicator()
        assert not null.is_valid and null.ptr == 0 and repr(null) == "Communicator(null)"
        with pytest.raises(NcclInvalid, match="null"):
            null.rank
        with pytest.raises(NcclInvalid, match="null"):
            null.all_reduce(device_array([1.0]), device_array([0.0]))
        null.initialize(1, 0, UniqueId.generate(), {"blocking": 1})
        assert null.is_valid and null.ptr == null.handle and (null.rank, null.nranks) == (0, 1)
        with pytest.raises(NcclInvalid, match="already initialized"):
            null.initialize(1, 0, UniqueId.generate())
        null.destroy()
        assert not null.is_valid and null.ptr == 0
        with pytest.raises(NcclInvalid, match="destroyed"):
            null.rank
        Communicator.init(1, 0, UniqueId.generate(), {"comm_name": "positional"}).destroy()
        assert Communicator.init_all(0) == [] and Communicator.init_all([]) == []
        assert (comm.device, comm.cuda_dev, comm.device.device_id) == (0, 0, 0)
        with pytest.raises(NcclInvalid, match="rank"):  # a new rank joins through a null communicator
            comm.grow(2, UniqueId.generate(), rank=1)
        with pytest.raises(NcclInvalid, match="initialized"):  # an existing rank through its own
            Communicator().grow(2)
        with pytest.raises(NcclInvalid, match="unique_id"):
            Communicator().grow(2, None, rank=1)
        with pytest.raises(NcclInvalid, match="rank"):
            Communicator().grow(2, UniqueId.generate(), rank=2)

    def test_close_all_resources_keeps_the_communicator(comm):
        window = comm.register_window(device_array([0.0] * 4))
        op = comm.create_pre_mul_sum(2.0, "float32")
        comm.close_all_resources()
        assert window.closed and op.closed and comm.is_valid
        comm.all_reduce(device_array([1.0]), device_array([0.0]))

    def test_init_with_config_takes_the_loaded_layout_and_stamp():
        # the stand-in rejects a config whose version stamp is not 22809
        for kwargs in ({"blocking": 1, "comm_name": "trainer"}, {"config": {"cgaClusterSize": 2}},
                       {"config": ncclbind._nccl.nccl_config_initializer()},
                       {"config": ncclbind.NCCLConfig(blocking=True, min_ctas=1, comm_name="trainer")}):
            Communicator.init(1, 0, UniqueId.generate(), **kwargs).destroy()

    def test_config_fields_the_loaded_library_lacks_raise(api):
        fields = api["nccl"]["record_variants"]["ncclConfig_t"][-1]["record"]["fields"]
        since = next(f["since"] for f in fields if f["name"] == "graphUsageMode")  # newer than the stand-in
        with pytest.raises(NcclInvalid) as info:
            Communicator.init(1, 0, UniqueId.generate(), graph_usage_mode=1)
        assert "graphUsageMode" in str(info.value) and since in str(info.value)
        with pytest.raises(NcclInvalid):
            Communicator.init(1, 0, UniqueId.generate(), no_such_field=1)
        with pytest.raises(NcclInvalid):
            Communicator.init(1, 0, UniqueId.generate(), version=1)  # the stamp is not the caller's

    def test_init_from_several_ids_and_init_all():
        Communicator.init(1, 0, [UniqueId.generate(), UniqueId.generate()]).destroy()
        comms = Communicator.init_all([0])
        assert [c.device for c in comms] == [0]
        for c in comms:
            c.destroy()

    @pytest.mark.parametrize("nranks, rank, uid", [(0, 0, None), (2, 2, None), (1, 0, "not an id")])
    def test_init_rejects_bad_arguments(nranks, rank, uid):
        with pytest.raises(NcclInvalid):
            Communicator.init(nranks, rank, UniqueId.generate() if uid is None else uid)

    def test_every_collective_moves_the_data(comm):
        a, b = device_array([1, 2]), device_array([0, 0])
        comm.all_reduce(a, b)
        assert values(b) == [1, 2]
        b = device_array([0, 0])
        comm.reduce(a, b, root=0)
        assert values(b) == [1, 2]
        b = device_array([0, 0])
        comm.broadcast(a, b, root=0)
        assert values(b) == [1, 2]
        b = device_array([0, 0])
        comm.all_gather(a, b)
        assert values(b) == [1, 2]
        b = device_array([0, 0])
        comm.reduce_scatter(a, b)
        assert values(b) == [1, 2]
        b = device_array([0, 0])
        comm.all_to_all(a, b)
        assert values(b) == [1, 2]
        b = device_array([0, 0])
        comm.gather(a, b, root=0)
        assert values(b) == [1, 2]
        b = device_array([0, 0])
        comm.scatter(a, b, root=0)
        assert values(b) == [1, 2]
        b = device_array([0, 0])
        with group():
            comm.send(a, peer=0)
            comm.recv(b, peer=0)
        assert values(b) == [1, 2]

    def test_in_place(comm):
        a = device_array([3, 4])
        comm.all_reduce(a)
        comm.all_reduce(a, a)
        comm.broadcast(a, a, root=0)
        assert values(a) == [3, 4]

    @pytest.mark.parametrize("collective, send, recv, argument", [
        ("all_reduce", 2, 3, "recvbuf"), ("reduce", 2, 3, "recvbuf"), ("broadcast", 2, 3, "sendbuf"),
        ("all_gather", 2, 3, "recvbuf"), ("reduce_scatter", 2, 3, "sendbuf"), ("all_to_all", 2, 3, "recvbuf"),
        ("gather", 2, 3, "recvbuf"), ("scatter", 2, 3, "sendbuf"),
    ])
    def test_sizes_that_do_not_fit_name_the_argument(comm, collective, send, recv, argument):
        kwargs = {"root": 0} if collective in ("reduce", "broadcast", "gather", "scatter") else {}
        with pytest.raises(NcclInvalid) as info:
            getattr(comm, collective)(device_array([0] * send), device_array([0] * recv), **kwargs)
        assert info.value.argument == argument

    def test_mismatched_dtypes(comm):
        with pytest.raises(NcclInvalid) as info:
            comm.all_gather(device_array([1, 2], "float32"), device_array([1, 2], "int32"))
        assert "int32" in str(info.value).lower() and info.value.argument == "recvbuf"

    def test_roots_and_peers_out_of_range(comm):
        a = device_array([1])
        for call in (lambda: comm.reduce(a, a, root=1), lambda: comm.broadcast(a, a, root=-1),
                     lambda: comm.send(a, peer=1), lambda: comm.recv(a, peer=True)):
            with pytest.raises(NcclInvalid) as info:
                call()
            assert info.value.argument in ("root", "peer")

    def test_bad_buffers(comm):
        with pytest.raises(NcclInvalid, match="host memory"):
            comm.all_reduce(np.zeros(2, np.float32))
        readonly = DeviceArray(np.zeros(2, np.float32), readonly=True)
        with pytest.raises(NcclInvalid, match="read-only"):
            comm.all_reduce(device_array([1, 2]), readonly)
        with pytest.raises(NcclInvalid, match="read-only"):
            comm.all_reduce(readonly)
        comm.all_reduce(readonly, device_array([0, 0]))  # a read-only input is fine
        with pytest.raises(NcclInvalid, match="another device|device 1"):
            comm.all_reduce((device_array([1]).array.ctypes.data, 1, "float32", 1))
        with pytest.raises(NcclInvalid, match="strided"):
            comm.all_reduce(DeviceArray(np.zeros((2, 4), np.float32)[:, ::2]))

    def test_reduce_ops(comm):
        a, b = device_array([1, 2]), device_array([0, 0])
        for op in (NcclRedOp.MAX, "min", 1, NcclRedOp.AVG):
            comm.all_reduce(a, b, op)
        with pytest.raises(NcclInvalid):
            comm.all_reduce(a, b, "median")

    def test_pre_mul_sum_with_a_host_scalar(comm):
        a, b = device_array([1, 2]), device_array([0, 0])
        op = comm.create_pre_mul_sum(3.0, "float32")
        comm.all_reduce(a, b, op)
        assert values(b) == [3, 6]
        assert int(op) >= 5 and op.dtype == ncclbind.NcclDataType.FLOAT32
        with pytest.raises(NcclInvalid, match="made for FLOAT32"):
            comm.all_reduce(device_array([1], "float64"), device_array([0], "float64"), op)
        op.close()
        with pytest.raises(NcclInvalid, match="closed"):
            comm.all_reduce(a, b, op)

    def test_pre_mul_sum_with_a_device_scalar(comm):
        scalar = device_array([2.0])
        op = comm.create_pre_mul_sum(scalar)
        a, b = device_array([1, 2]), device_array([0, 0])
        comm.all_reduce(a, b, op)
        assert values(b) == [2, 4]
        assert op.scalar.owner is scalar  # the device scalar stays alive with the op
        with pytest.raises(NcclInvalid):
            comm.create_pre_mul_sum(device_array([1.0, 2.0]))
        # nccl4py's inference for a host number without a datatype: int -> int64, float -> float64
        assert comm.create_pre_mul_sum(1.0).dtype == ncclbind.FLOAT64
        assert comm.create_pre_mul_sum(3).dtype == ncclbind.INT64
        assert comm.create_pre_mul_sum(0.5, datatype=ncclbind.FLOAT32).dtype == ncclbind.FLOAT32
        with pytest.raises(NcclInvalid, match="scalar"):
            comm.create_pre_mul_sum(0.5, "int32")  # a float does not fit an int: not truncated
        with pytest.raises(NcclInvalid, match="datatype"):
            comm.create_pre_mul_sum(0.5, datatype="float32", dtype="float64")
        for dtype, scalar in (("float64", 0.5), ("float16", 2.0), ("bfloat16", 1.5), ("int32", 3)):
            comm.create_pre_mul_sum(scalar, dtype)

    def test_an_op_of_another_communicator_is_rejected(comm):
        other = Communicator.init(1, 0, UniqueId.generate())
        op = other.create_pre_mul_sum(2.0, "float32")
        with pytest.raises(NcclInvalid, match="another communicator"):
            comm.all_reduce(device_array([1]), device_array([0]), op)
        other.destroy()

    def test_an_op_value_is_nccls_or_a_live_custom_ops(comm):
        """An op given as an int reaches NCCL only if it is one of NCCL's (NcclRedOp) or the value
        of a CustomRedOp of this communicator, on the C fast path and on the Python path alike."""
        from stand_ins import CallLog
        log = CallLog()
        a, b = device_array([1.0, 2.0]), device_array([0.0, 0.0])
        comm.all_reduce(a, b, 2)  # MAX by its value
        assert values(b) == [1.0, 2.0]
        for bad in (63, 5, -1, ncclbind.NcclRedOp(63)):
            log.clear()
            for call in (lambda: comm.all_reduce(a, b, bad), lambda: ncclbind.prepare(comm.all_reduce, a, b, bad)):
                with pytest.raises(NcclInvalid, match="neither an NcclRedOp") as info:
                    call()
                assert info.value.argument == "op"
            with group():  # grouped, so that a call that got through would be in the log
                with pytest.raises(NcclInvalid):
                    comm.reduce(a, b, bad, 0)
            assert [c[0] for c in log.calls()] == ["group_start", "group_end"], bad
        op = comm.create_pre_mul_sum(2.0, "float32")
        comm.all_reduce(a, b, op.op)  # a live custom op's value: checked as the op itself
        assert values(b) == [2.0, 4.0]
        with pytest.raises(NcclInvalid, match="made for FLOAT32, the buffers are INT32"):
            comm.all_reduce(device_array([1, 2], "int32"), device_array([0, 0], "int32"), op.op)
        op.close()
        with pytest.raises(NcclInvalid, match="neither an NcclRedOp"):
            comm.all_reduce(a, b, op.op)  # released: no longer a value NCCL knows

    def test_prepare_racing_destroy_raises_the_named_error(monkeypatch):
        """A destroy() from another thread between prepare()'s checks and the C path's
        resolution (here made to happen there): NcclInvalid naming comm, as every call after a
        close raises, not an internal RuntimeError."""
        from ncclbind.base import calls
        c = Communicator.init(1, 0, UniqueId.generate())
        a = device_array([1.0])
        method = c.all_reduce.__func__  # the installed fast path, what prepare() looks up
        spec, checked = calls._PREPARABLE[method]

        def checked_then_destroyed(comm, *args):
            out = checked(comm, *args)
            comm.destroy()  # what another thread's destroy() does at this point
            return out
        monkeypatch.setitem(calls._PREPARABLE, method, (spec, checked_then_destroyed))
        with pytest.raises(NcclInvalid, match="destroyed or aborted") as info:
            ncclbind.prepare(c.all_reduce, a)
        assert info.value.argument == "comm"

    def test_a_numpy_integer_is_a_rank(comm):
        a = device_array([1.0])
        comm.broadcast(a, a, root=np.int64(0))
        comm.reduce(a, a, ncclbind.SUM, np.int32(0))
        for bad in (np.float64(0), True, "0", 0.0):
            with pytest.raises(NcclInvalid, match="root") as info:
                comm.broadcast(a, a, root=bad)
            assert info.value.argument == "root"

    def test_group_simulation(comm):
        with group(simulate=True) as g:
            comm.all_reduce(device_array([1, 2]))
        assert g.info.estimated_time == 42.0
        ncclbind.group_start()
        comm.all_reduce(device_array([1]))
        assert ncclbind.group_end(simulate=True).estimated_time == 42.0

    def test_a_group_ends_when_its_block_raises(comm):
        with pytest.raises(ValueError):
            with group():
                raise ValueError
        with group():  # the stand-in would refuse an unbalanced group end
            pass
        with pytest.raises(ncclbind.NcclError):
            ncclbind.group_end()

    def test_registration_and_windows(comm, api):
        a = device_array([1, 2, 3, 4])
        handle = comm.register_buffer(a)
        window = comm.register_window(a, flags=0)
        assert handle.handle and window.window and not window.has_rma
        with pytest.raises(NcclSymbolNotFoundError) as info:
            comm.signal(0)
        since = next(f["since"] for f in api["nccl"]["functions"] if f["name"] == "ncclSignal")
        loaded = str(ncclbind.library_info("nccl").version)
        assert "ncclSignal" in str(info.value) and since in str(info.value) and loaded in str(info.value)
        handle.close()
        handle.close()
        with window:
            pass
        assert window.closed
        with pytest.raises(NcclInvalid, match="closed"):
            comm.put_signal(a, 0, window)

    def test_destroy_releases_resources_first_and_closes_them():
        comm = Communicator.init(1, 0, UniqueId.generate())
        a = device_array([1.0, 2.0])
        made = [comm.register_buffer(a), comm.register_window(a), comm.create_pre_mul_sum(2.0, "float32"),
                comm.create_dev_comm()]
        comm.destroy()
        assert all(r.closed for r in made) and comm.closed
        with pytest.raises(NcclInvalid, match="destroyed"):
            comm.all_reduce(a)
        with pytest.raises(NcclInvalid, match="destroyed"):
            comm.register_buffer(a)
        with pytest.raises(NcclInvalid, match="closed"):
            made[3].to_bytes()
        comm.destroy()  # idempotent

    def test_abort_and_the_with_block():
        with Communicator.init(1, 0, UniqueId.generate()) as comm:
            window = comm.register_window(device_array([1]))
        assert comm.closed and window.closed
        with pytest.raises(RuntimeError):
            with Communicator.init(1, 0, UniqueId.generate()) as comm:
                op = comm.create_pre_mul_sum(1.0, "float32")
                raise RuntimeError("a peer failed")
        assert comm.closed and op.closed  # aborted: NCCL frees, the binding makes no call

    def test_split_and_shrink(comm):
        part = comm.split(color=0, key=0)
        assert part.nranks == 1 and part.device == comm.device
        part.destroy()
        none = comm.split(color=None, key=0)  # nccl4py: a null communicator, not None
        assert isinstance(none, Communicator) and not none.is_valid and none.ptr == 0
        none.destroy()  # nothing to destroy
        smaller = comm.shrink([])
        assert smaller.nranks == 1
        smaller.destroy()
        with pytest.raises(NcclInvalid):
            comm.shrink([3])

    def test_dev_comm(comm, api):
        reqs = ncclbind.NCCLDevCommRequirements(lsa_barrier_count=1)
        reqs.ginContextCount = 2
        assert reqs.lsaBarrierCount == 1 and reqs.gin_context_count == 2
        fields = api["nccl"]["record_variants"]["ncclDevCommRequirements_t"][-1]["record"]["fields"]
        since = next(f["since"] for f in fields if f["name"] == "ginType")  # newer than the stand-in
        with pytest.raises(NcclInvalid) as info:
            ncclbind.NCCLDevCommRequirements(gin_type=1)
        assert since in str(info.value)
        with comm.create_dev_comm(reqs) as dev:
            assert (dev.dev_comm.rank, dev.dev_comm.nRanks) == (0, 1)
            assert len(dev.to_bytes()) == dev.dev_comm.nbytes
            assert dev.ptr == dev.dev_comm.address and dev.resource_handles == ()
        # nccl4py's form: teams with multimem give their handles (the stand-in writes none)
        team = ncclbind.NCCLTeam(1, 0, 1)
        reqs = ncclbind.NCCLDevCommRequirements(lsa_barrier_count=1,
                                                teams=(ncclbind.TeamRequirement(team, multimem=True),))
        with comm.create_dev_comm(reqs) as dev:
            assert dev.multimem_handle(team).mc_base_pointer == 0
            assert dev.multimem_handle(ncclbind._nccl.ncclTeam_t(nRanks=1, rank=0, stride=1)) \
                == dev.multimem_handle(team)
            with pytest.raises(KeyError):
                dev.multimem_handle(ncclbind.NCCLTeam(2, 0, 1))
        with pytest.raises(NcclInvalid, match="closed"):
            dev.ptr

    def test_memory(comm):
        buf = ncclbind.mem_alloc(64, device=0)  # nccl4py's mem_alloc(size, device=None): a buffer object
        assert buf.handle == buf.ptr != 0 and buf.size == 64 and buf.device_id == 0
        ncclbind.mem_free(buf)
        assert buf.closed and buf.handle == 0
        ncclbind.mem_free(buf)  # once freed, again is nothing
        with pytest.raises(NcclInvalid, match="size"):
            ncclbind.mem_alloc(0)
        with pytest.raises(NcclInvalid, match="device"):
            ncclbind.mem_alloc(64, device=-1)
        resource = ncclbind.NcclMemoryResource(device=0)
        block = resource.allocate(16)
        buf = block.as_buffer("float32")
        assert (buf.count, buf.dtype, buf.device) == (4, ncclbind.NcclDataType.FLOAT32, 0)
        comm.all_reduce(buf)
        comm.all_reduce(block)  # as uint8 through its CUDA array interface
        resource.deallocate(block)
        assert block.closed
        with pytest.raises(NcclInvalid):
            block.as_buffer()
        with ncclbind.NcclMemoryResource(device=0) as pool:
            kept = pool.allocate(8)
            other = pool.allocate(8)
            pool.deallocate(other.ptr)  # by address
            assert other.closed
        assert kept.closed  # the pool freed what was still out

    def test_streams(comm):
        a = device_array([1])

        class CudaStream:  # the __cuda_stream__ protocol
            def __cuda_stream__(self):
                return (0, 0)

        class TorchLikeStream:
            cuda_stream = 0

        for stream in (None, 0, CudaStream(), TorchLikeStream()):
            comm.all_reduce(a, stream=stream)
            comm.all_gather(a, device_array([0]), stream=stream)
        with pytest.raises(NcclInvalid) as info:
            comm.all_reduce(a, stream="default")
        assert info.value.argument == "stream"

        class JunkStream:
            def __cuda_stream__(self):
                return (0, "x")

        # a handle no cudaStream_t can be: prepare() took these and its C path then declined them
        # with an internal RuntimeError (issue 24's fuzz); every path names the stream now
        for stream in (-1, 2 ** 64, JunkStream()):
            for call in (lambda: comm.all_reduce(a, stream=stream),
                         lambda: ncclbind.prepare(comm.all_reduce, a, stream=stream)):
                with pytest.raises(NcclInvalid) as info:
                    call()
                assert info.value.argument == "stream", str(info.value)

    def test_errors_and_state(comm):
        assert comm.get_async_error() == ncclbind.NcclResult.SUCCESS
        with pytest.raises(ncclbind.errors.NcclInvalidUsageError) as info:
            ncclbind._nccl.group_end()  # the stand-in fails it: no group was started
        assert comm.get_last_error() == info.value.last_error == "fake: ncclGroupEnd without ncclGroupStart"
        with pytest.raises(NcclSymbolNotFoundError, match="ncclCommQueryProperties"):
            comm.device_api_support

    def test_torch_tensors_are_cached_and_revalidated(comm):
        from stand_ins import install_torch
        torch = install_torch()
        from ncclbind.base import buffer
        a, b = torch.Tensor([1, 2]), torch.Tensor([0, 0])
        comm.all_reduce(a, b)
        assert b.array.tolist() == [1, 2]
        assert buffer.cached(a).ptr == a.data_ptr()
        b.set_([0, 0, 0])  # re-pointed and resized in place: the cache must notice
        with pytest.raises(NcclInvalid, match="3 elements"):
            comm.all_reduce(a, b)
        b.set_([0, 0])
        comm.all_reduce(a, b)
        assert b.array.tolist() == [1, 2]
        with pytest.raises(NcclInvalid, match="host memory"):
            comm.all_reduce(torch.Tensor([1], cuda=False))
        with pytest.raises(NcclInvalid, match="device 1"):
            comm.all_reduce(torch.Tensor([1], index=1))
        with pytest.raises(NcclInvalid, match="no NCCL data type"):
            comm.all_reduce(torch.Tensor([1], "bool"))
        bf = torch.Tensor([0, 0], "float16")
        assert NcclBuffer.resolve(bf).dtype == ncclbind.NcclDataType.FLOAT16
        key = id(a)
        del a
        assert key not in buffer._entries  # entries go with their tensor

    def test_cupy_arrays(comm):
        from stand_ins import install_cupy
        cupy = install_cupy()
        a, b = cupy.ndarray([5, 6]), cupy.ndarray([0, 0])
        comm.all_reduce(a, b, stream=cupy.Stream(0))
        assert b.array.tolist() == [5, 6]
        strided = cupy.ndarray(np.zeros((2, 4), np.float32)[:, ::2])
        with pytest.raises(NcclInvalid, match="non-contiguous"):
            comm.all_reduce(strided)

    def test_a_communicator_not_destroyed_warns():
        comm = Communicator.init(1, 0, UniqueId.generate())
        with pytest.warns(ResourceWarning):
            del comm
            import gc
            gc.collect()

    # ---- the methods' fast path (bindings/python/src/call_engine.c) -----------------------
    # Every buffer-taking method (policy/nccl.toml) is a C descriptor in front of its
    # Python definition (__wrapped__), the method's generated code. The C side
    # makes the call only for buffers NcclBuffer has resolved before and that pass every check;
    # it gives any other call, as it came, to the Python definition. These hold it to that: the
    # same results and the same errors as the Python definition alone.

    from fast_path import PathLog
    from ncclbind import _nccl
    from ncclbind.base import buffer as buffer_module

    def made_in_c(name: str, call) -> bool:
        """Run call (a method call): whether the fast path made it. When it did not, the
        Python definition did (and whatever that raised is dropped here); an error of a
        call the fast path made is raised."""
        with PathLog() as log:
            try:
                call()
            except Exception:
                if log.counts(name)[0]:
                    raise
        assert len(log.calls) == 1 and log.calls[0][0] == name, f"one call, taken once: {log.calls}"
        return log.calls[0][1]

    def fast(comm, send, recv=None, op=NcclRedOp.SUM, stream=None) -> bool:
        """all_reduce through the fast path: whether it made the call."""
        return made_in_c("all_reduce", lambda: comm.all_reduce(send, recv, op, stream=stream))

    def outcome(call):
        """How a call ends: None, or its error's type, text, argument, code and function."""
        try:
            call()
        except Exception as e:
            return (type(e).__name__, str(e), getattr(e, "argument", None), getattr(e, "code", None),
                    getattr(e, "function", None))
        return None

    def same_outcome(comm, send, recv=None, op=NcclRedOp.SUM, stream=None):
        """all_reduce ends as its Python definition alone ends; that ending."""
        reference = type(comm).all_reduce.__wrapped__
        ending = outcome(lambda: comm.all_reduce(send, recv, op, stream=stream))
        assert ending == outcome(lambda: reference(comm, send, recv, op, stream=stream))
        return ending

    @pytest.fixture
    def torch():
        from stand_ins import install_torch
        return install_torch()

    @pytest.fixture
    def cupy(monkeypatch):
        """A CuPy whose arrays cannot be weakly referenced: read again at every call."""
        module = types.ModuleType("cupy")

        class Memory:
            __slots__ = ("ptr", "device_id")

            def __init__(self, ptr, device_id=0):
                self.ptr, self.device_id = ptr, device_id

        class ndarray:  # noqa: N801 - the name the resolver looks for
            __slots__ = ("array", "data", "size", "dtype", "shape", "strides", "_c_contiguous")

            def __init__(self, values, dtype="float32", device_id=0):
                self.array = np.asarray(values, dtype=dtype)
                self.data = Memory(self.array.ctypes.data, device_id)
                self.size, self.dtype = self.array.size, self.array.dtype
                self.shape, self.strides = self.array.shape, self.array.strides
                self._c_contiguous = self.array.flags.c_contiguous

        class WeaklyReferenceable(ndarray):  # as CuPy's own arrays: cached, without a probe
            __slots__ = ("__weakref__",)

        module.ndarray, module.Memory, module.WeaklyReferenceable = ndarray, Memory, WeaklyReferenceable
        monkeypatch.setitem(sys.modules, "cupy", module)
        return module

    def test_the_fast_path_takes_buffers_seen_before(comm, torch, cupy):
        for make in (torch.Tensor, cupy.ndarray):
            a, b = make([1, 2]), make([0, 0])
            assert not fast(comm, a, b)  # first sight: NcclBuffer resolves them
            comm.all_reduce(a, b)
            assert values(b) == [1, 2]
            b.array[:] = 0
            assert fast(comm, a, b) and values(b) == [1, 2]
            assert fast(comm, a) and fast(comm, a, a) and fast(comm, a, b, NcclRedOp.MAX, stream=0)
            assert fast(comm, a, b, 2) and values(b) == [1, 2]
        a, b = device_array([1, 2]), device_array([0, 0])
        comm.all_reduce(a, b)
        assert not fast(comm, a, b)  # the CUDA array interface is read afresh each time, in Python

    def test_a_re_pointed_tensor_is_resolved_again(comm, torch):
        a, b = torch.Tensor([1, 2]), torch.Tensor([0, 0])
        comm.all_reduce(a, b)
        old = b.array
        old[:] = 0
        b.set_([0, 0])  # new memory, same size: only the probe can tell
        assert not fast(comm, a, b)
        assert values(b) == [1, 2] and old.tolist() == [0, 0]
        assert fast(comm, a, b)  # cached again, at its new address
        b.set_([0, 0, 0])
        assert not fast(comm, a, b)
        assert same_outcome(comm, a, b)[1].startswith("recvbuf holds 3 elements, sendbuf 2")

    def test_an_entry_never_serves_another_object(comm, torch, cupy):
        a, b = torch.Tensor([1, 2]), torch.Tensor([0, 0])
        comm.all_reduce(a, b)
        key = id(b)
        del b
        assert key not in buffer_module._entries
        c = torch.Tensor([0, 0])  # often at the dead tensor's address: its id
        assert not fast(comm, a, c)
        comm.all_reduce(a, c)
        assert values(c) == [1, 2]
        # An entry listed under an id that another object now has (as while the dead
        # object's weak-reference callback is pending) is not that object's, even
        # where no probe would tell them apart.
        c, d = cupy.WeaklyReferenceable([0, 0]), cupy.WeaklyReferenceable([0, 0])
        comm.all_reduce(a, c)
        assert fast(comm, a, c)
        buffer_module._entries[id(d)] = buffer_module._entries[id(c)]
        c.array[:] = 0
        assert buffer_module.cached(d) is None
        assert not fast(comm, a, d)
        assert values(d) == [1, 2] and values(c) == [0, 0] and fast(comm, a, d)

    def test_read_only_buffers(comm, torch):
        read_only = DeviceArray(np.zeros(2, np.float32), readonly=True)
        buffer_module._remember(read_only, NcclBuffer.resolve(read_only), False)  # a cached read-only buffer
        a = torch.Tensor([1, 2])
        comm.all_reduce(a)
        assert not fast(comm, a, read_only) and "read-only" in same_outcome(comm, a, read_only)[1]
        assert not fast(comm, read_only) and "read-only" in same_outcome(comm, read_only)[1]
        assert fast(comm, read_only, a)  # an input may be read-only

    def test_buffers_on_another_device(comm, torch, cupy):
        for make in (lambda v: torch.Tensor(v, index=1), lambda v: cupy.ndarray(v, device_id=1)):
            a, far = torch.Tensor([1, 2]), make([0, 0])
            comm.all_reduce(a)
            for send, recv in ((a, far), (far, a), (far, None)):
                assert "device 1" in same_outcome(comm, send, recv)[1]
                assert not fast(comm, send, recv)  # cached or read, but on another device

    def test_dtypes_and_counts_that_disagree(comm, torch, cupy):
        a, half, three = torch.Tensor([1, 2]), torch.Tensor([0, 0], "float16"), torch.Tensor([0, 0, 0])
        for t in (a, half, three, cupy.ndarray([0, 0], "int32")):
            comm.all_reduce(t)
        assert "recvbuf is FLOAT16, sendbuf is FLOAT32" in same_outcome(comm, a, half)[1]
        assert "3 elements" in same_outcome(comm, a, three)[1]
        assert "recvbuf is FLOAT32, sendbuf is INT32" in same_outcome(comm, cupy.ndarray([0, 0], "int32"), a)[1]
        assert not fast(comm, a, half) and not fast(comm, a, three)

    def test_cupy_arrays_are_read_as_buffer_py_reads_them(comm, cupy):
        a, b = cupy.ndarray([1, 2]), cupy.ndarray([0, 0])
        comm.all_reduce(a, b)
        assert cupy.ndarray in buffer_module._read_as_cupy and id(a) not in buffer_module._entries
        moved = np.zeros(2, np.float32)
        b.data = cupy.Memory(moved.ctypes.data)  # read at every call: a change is seen
        assert fast(comm, a, b) and moved.tolist() == [1, 2]
        strided = cupy.ndarray(np.zeros((2, 4), np.float32)[:, ::2])
        b.data = cupy.Memory(0)
        for send, recv, words in ((strided, None, "non-contiguous"), (cupy.ndarray([1, 0], "bool"), None, "bool"),
                                  (a, b, "NULL")):
            assert not fast(comm, send, recv)
            assert words in same_outcome(comm, send, recv)[1]

    def test_nccl_buffers_are_read_as_they_are(comm):
        a, b = device_array([1, 2]), device_array([0, 0])
        send, recv = NcclBuffer.resolve(a), NcclBuffer.resolve(b)
        assert fast(comm, send, recv) and values(b) == [1, 2]
        recv.ptr = send.ptr  # an NcclBuffer's fields can be set: read at every call
        b.array[:] = 0
        assert fast(comm, send, recv) and values(b) == [0, 0]
        far = NcclBuffer(send.ptr, 2, "float32", 1)
        read_only = NcclBuffer(recv.ptr, 2, "float32", 0, readonly=True)
        wrong = NcclBuffer(recv.ptr, 2, "float32", 0)
        wrong.ptr = -1  # the generated call's conversion rejects it
        for send_, recv_, words in ((far, None, "device 1"), (send, read_only, "read-only"),
                                    (read_only, None, "read-only"), (wrong, None, "sendbuff")):
            assert not fast(comm, send_, recv_)
            assert words in same_outcome(comm, send_, recv_)[1]
        unset = NcclBuffer(recv.ptr, 2, "float32", 0)
        del unset.count  # the fast path reads the slots at their offsets: an empty one is declined
        assert not fast(comm, send, unset)
        assert same_outcome(comm, send, unset)[0] == "AttributeError"

    def test_a_closed_communicator(torch):
        c = Communicator.init(1, 0, UniqueId.generate())
        a, b = torch.Tensor([1, 2]), torch.Tensor([0, 0])
        c.all_reduce(a, b)
        assert fast(c, a, b)
        c.destroy()
        assert not fast(c, a, b)
        assert same_outcome(c, a, b)[:3] == ("NcclInvalid", "the communicator was destroyed or aborted", "comm")

    def test_ops_streams_and_conversions_end_as_the_python_path(comm, torch):
        a, b = torch.Tensor([1, 2]), torch.Tensor([0, 0])
        comm.all_reduce(a, b)
        op = comm.create_pre_mul_sum(3.0, "float32")
        assert fast(comm, a, b, op) and values(b) == [3, 6]

        class CudaStream:
            def __cuda_stream__(self):
                return (0, 0)

        assert fast(comm, a, b, stream=CudaStream()) and values(b) == [1, 2]
        other = Communicator.init(1, 0, UniqueId.generate())
        foreign = other.create_pre_mul_sum(2.0, "float32")
        for kwargs in ({"op": 2**40}, {"op": "median"}, {"op": foreign}, {"stream": -1}, {"stream": "default"}):
            ending = same_outcome(comm, a, b, **kwargs)
            assert ending is not None and ending[0] == "NcclInvalid", (kwargs, ending)
        other.destroy()
        op.close()
        assert "closed" in same_outcome(comm, a, b, op)[1]

    def test_nccl_errors_are_raised_as_the_generated_call_raises_them(torch):
        owner = Communicator.init(1, 0, UniqueId.generate())
        twin = Communicator(owner.handle)  # a second wrapper of the same ncclComm_t
        a, b = torch.Tensor([1, 2]), torch.Tensor([0, 0])
        twin.all_reduce(a, b)
        owner.destroy()  # the stand-in now refuses the handle twin still has
        try:
            ending = same_outcome(twin, a, b)
            generated = outcome(lambda: _nccl.all_reduce(a.data_ptr(), b.data_ptr(), 2, 7, 0, twin.handle, 0))
            assert ending == generated and ending[0] == "NcclInvalidArgumentError"
            with pytest.raises(ncclbind.NcclError):
                fast(twin, a, b)  # it made the call: the error is NCCL's
        finally:
            twin._handle = 0  # not twin's to destroy

    # ---- every generated method against its Python definition ---------------------------

    from ncclbind._generated.communicator_methods import METHODS

    def method_calls(spec, torch):
        """(label, args, kwargs) for `spec`'s method: a good call first, then one bad
        argument at a time. Buffers are torch-like tensors of 2 elements per block."""
        def tensors(dtype="float32", n=2, readonly=False, index=0):
            t = torch.Tensor([0.0] * n, dtype, index=index)
            if readonly:
                t.array.setflags(write=False)
            return t

        def good():
            values = {}
            for b in spec.buffers:
                values[b.argument] = tensors()
                values[b.argument].array[:] = range(1, 3)
            if spec.rank_argument:
                values[spec.rank_argument] = 0
            return values

        yield "good", good()
        for b in spec.buffers:
            v = good()
            v[b.argument] = tensors("float16")
            yield f"{b.argument} of another dtype", v
            v = good()
            v[b.argument] = tensors(n=3)
            yield f"{b.argument} of another count", v
            v = good()
            v[b.argument] = tensors(index=1)
            yield f"{b.argument} on another device", v
            v = good()
            v[b.argument] = None
            yield f"{b.argument} None", v
        if spec.rank_argument:
            for bad in (1, -1, True, "0"):
                v = good()
                v[spec.rank_argument] = bad
                yield f"{spec.rank_argument} {bad!r}", v
        if "op" in spec.order:
            for bad in (True, "median", 2**40, NcclRedOp.MAX, "max"):
                v = good()
                v["op"] = bad
                yield f"op {bad!r}", v
        for bad in ("default", -1, 2**64, True):
            v = good()
            v["stream"] = bad
            yield f"stream {bad!r}", v
        if spec.config_low_level:
            v = good()
            v["config"] = {"minCTAs": 1}
            yield "config as a dict", v  # given to Python, which fills a record
            v = good()
            v["config"] = _nccl.nccl_collconfig_initializer()
            yield "config record", v  # the fast path's config variant (missing on the stand-in's 2.28.9)
            v = good()
            v["config"] = "fast"
            yield "config of no kind", v

    @pytest.mark.parametrize("spec", METHODS, ids=[m.name for m in METHODS])
    def test_every_method_ends_as_its_python_definition(comm, torch, spec):
        """Every generated method, good and bad calls: the fast path (or the Python definition
        it gives the call to) ends exactly as the Python definition alone, with the same data."""
        method = getattr(comm, spec.name)
        reference = getattr(type(comm), spec.name).__wrapped__
        group_needed = spec.name in ("send", "recv")
        for label, kwargs in method_calls(spec, torch):
            def run(call):
                if not group_needed:
                    return outcome(lambda: call(**kwargs))
                with group():
                    return outcome(lambda: call(**kwargs))
            run(method)  # first sight: the buffers are resolved (and cached)
            before = {k: values(v) for k, v in kwargs.items() if hasattr(v, "array")}
            ending = run(method)
            after = {k: values(v) for k, v in kwargs.items() if hasattr(v, "array")}
            for k, v in kwargs.items():
                if hasattr(v, "array"):
                    v.array[...] = before[k]
            assert ending == run(lambda **kw: reference(comm, **kw)), (spec.name, label)
            assert after == {k: values(v) for k, v in kwargs.items() if hasattr(v, "array")}, (spec.name, label)
            if label == "good":
                assert ending is None, (spec.name, ending)
                assert made_in_c(spec.name, lambda: run(method) and None), spec.name

    def test_a_config_record_takes_the_fast_path_to_the_config_variant(comm, torch):
        """config=<ncclCollConfig_t> is made in C through the *Config variant (which the
        stand-in's 2.28.9 lacks: the runtime's error names it); a dict goes to Python."""
        a, b = torch.Tensor([1.0, 2.0]), torch.Tensor([0.0, 0.0])
        comm.all_reduce(a, b)
        with PathLog() as log:
            with pytest.raises(NcclSymbolNotFoundError, match="ncclAllReduceConfig"):
                comm.all_reduce(a, b, config=_nccl.nccl_collconfig_initializer())
            assert log.counts("all_reduce") == (1, 0)
            with pytest.raises(NcclSymbolNotFoundError, match="ncclAllReduceConfig"):
                comm.all_reduce(a, b, config={"minCTAs": 1})
            assert log.counts("all_reduce") == (1, 1)

    def test_reduce_and_gather_without_a_root_reach_every_rank(torch):
        """nccl4py's meaning: reduce(send, recv, op) and gather(send, recv) with root None are an
        all-reduce and an all-gather (op is the third positional argument, root the fourth): no
        ncclReduce is made, and every rank needs recvbuf."""
        from stand_ins import CallLog
        log = CallLog()
        comms = Communicator.init_all([0, 0])
        try:
            a, b = torch.Tensor([1.0, 2.0]), torch.Tensor([0.0] * 2)
            log.clear()
            with group():
                for c in comms:
                    c.reduce(a, b, ncclbind.SUM)
            assert [call[0] for call in log.calls()] == ["group_start", "group_end"]
            steps = [ncclbind.prepare(c.reduce, a, b, ncclbind.SUM) for c in comms]  # prepared: the same call
            log.clear()
            with group():
                for step in steps:
                    step()
            assert [call[0] for call in log.calls()] == ["group_start", "group_end"]
            log.clear()
            with group():
                for c in comms:
                    c.reduce(a, b, ncclbind.MAX, 1)
            assert [call[0] for call in log.calls()] == ["group_start", "reduce", "reduce", "group_end"]
            assert [call[5:] for call in log.calls()[1:3]] == [(int(ncclbind.MAX), 1)] * 2
            with pytest.raises(NcclInvalid, match="recvbuf is None here"):
                comms[1].gather(a, None)  # every rank receives: no root-only exemption
            with group():
                for c in comms:
                    c.gather(a, torch.Tensor([0.0] * 4))
        finally:
            for c in comms:
                c.destroy()

    def test_a_root_only_buffer_may_be_none_off_the_root(torch):
        """gather/reduce on a non-root rank take recvbuf=None (scatter/broadcast sendbuf=None):
        the stand-in with 2 ranks checks only the arguments."""
        comms = Communicator.init_all([0, 0])
        try:
            a, b = torch.Tensor([1.0, 2.0]), torch.Tensor([0.0] * 4)
            with group():
                comms[1].gather(a, None, root=0)
                comms[1].reduce(a, None, root=0)
                comms[1].scatter(None, a, root=0)
                comms[1].broadcast(None, a, root=0)
            with pytest.raises(NcclInvalid, match="recvbuf is None on the root"):
                comms[0].gather(a, None, root=0)
            with pytest.raises(NcclInvalid, match="recvbuf holds 3 elements; gather needs nranks"):
                comms[1].gather(a, torch.Tensor([0.0] * 3), 0)  # checked where given
            with group():
                comms[0].gather(a, b, root=0)
        finally:
            for c in comms:
                c.destroy()

    # ---- binding: the descriptor binds the common call shapes itself and gives any other
    # to the Python definition (__wrapped__): every shape must end as that does.

    def test_all_reduce_binds_its_arguments_as_the_python_definition(comm, torch):
        import inspect

        reference = Communicator.all_reduce.__wrapped__
        assert inspect.signature(comm.all_reduce).parameters == inspect.signature(reference.__get__(comm)).parameters
        assert Communicator.all_reduce.__doc__ == reference.__doc__ and Communicator.all_reduce.__name__ == "all_reduce"
        a, b = torch.Tensor([1, 2]), torch.Tensor([0, 0])
        comm.all_reduce(a, b)
        stream = "".join(["str", "eam"])  # an equal keyword that is not the interned one
        shapes = [((), {}), ((a,), {}), ((a, b), {}), ((a, b, "max"), {}), ((a, b, NcclRedOp.SUM, 0), {}),
                  ((a,), {"recvbuf": b}), ((a,), {"op": "max", "stream": 0}), ((a, b), {"op": 2}),
                  ((a, b), {"recvbuf": b}), ((a, b, 0), {"op": 0}), ((), {"sendbuf": a, "recvbuf": b}),
                  ((a, b), {stream: 0}), ((a, b), {"stream": 0, "flags": 1}), ((a, b), {"stream": "default"}),
                  ((a, b), {"op": True}), ((a, b), {"config": 1}),
                  ((device_array([1, 2]), b), {}), ((a, device_array([0], "float64")), {"stream": 0})]
        for args, kwargs in shapes:
            b.array[:] = 0
            ending = outcome(lambda: comm.all_reduce(*args, **kwargs))
            result = values(b)
            b.array[:] = 0
            assert ending == outcome(lambda: reference(comm, *args, **kwargs)), (args, kwargs)
            assert result == values(b), (args, kwargs)

    def test_a_declined_call_is_made_once_by_the_python_definition(comm, torch):
        a, b = torch.Tensor([1, 2]), torch.Tensor([0, 0])
        assert not made_in_c("all_reduce", lambda: comm.all_reduce(a, b, stream=0))  # first sight
        assert values(b) == [1, 2]
        b.array[:] = 0
        assert made_in_c("all_reduce", lambda: comm.all_reduce(a, b, stream=0)) and values(b) == [1, 2]

    def test_the_cache_table_under_churn(comm, cupy):
        """buffer_cache.c's table (open addressing, grown, entries deleted as their
        objects go): every live object keeps its own entry, no dead one keeps any."""
        import random
        arrays = [cupy.WeaklyReferenceable([i, 0]) for i in range(3000)]
        for a in arrays:
            comm.all_reduce(a)
        before = len(buffer_module._entries)
        rng = random.Random(0)
        dead = set()
        for i in rng.sample(range(len(arrays)), 2000):
            dead.add(id(arrays[i]))
            arrays[i] = None
        live = [a for a in arrays if a is not None]
        assert len(buffer_module._entries) == before - 2000
        assert not any(key in buffer_module._entries for key in dead - {id(a) for a in live})
        for a in live:
            assert id(a) in buffer_module._entries and buffer_module.cached(a).ptr == a.data.ptr
            assert fast(comm, a)
        del buffer_module._entries[id(live[0])]  # the view deletes, as the dict did
        assert buffer_module.cached(live[0]) is None and not fast(comm, live[0])
        del buffer_module._entries[id(live[0])]
        with pytest.raises(KeyError):
            buffer_module._entries[id(live[0])]


    # ---- lifetimes under threads (issue 14) --------------------------------------------

    def hammer_until_closed(comm, torch, seconds_before_close, close):
        """Five threads call comm through every kind of path (the C fast path, the Python
        definition, a grouped variable-count collective, a spec'd host call, a communicator
        method) until the call raises; `close` runs on this thread meanwhile. What each
        thread's last call raised."""
        a, b = torch.Tensor([1, 2]), torch.Tensor([0, 0])
        c, d = torch.Tensor([3, 4]), torch.Tensor([0, 0])
        comm.all_reduce(a, b)  # first sight resolves: the fast path takes the next ones
        calls = [lambda: comm.all_reduce(a, b), lambda: comm.all_reduce(c, d),
                 lambda: type(comm).all_reduce.__wrapped__(comm, a, b),
                 lambda: comm.all_gatherv(a, d, [2]), lambda: comm.finalize()]
        start = threading.Barrier(len(calls) + 1)
        ended = [None] * len(calls)

        def run(i):
            start.wait()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    calls[i]()
                except Exception as e:  # noqa: BLE001 - the test reads what it was
                    ended[i] = e
                    return
            ended[i] = "never raised"

        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
        for t in threads:
            t.start()
        start.wait()
        time.sleep(seconds_before_close)
        close()
        for t in threads:
            t.join()
        return ended

    @pytest.fixture
    def stand_in():
        library = ctypes.CDLL(os.environ["NCCLBIND_NCCL_PATH"])  # the copy the runtime loaded
        library.fakeSetCallDelay(50)  # each call stays inside the stand-in 50 us: destroys land there
        yield library
        library.fakeSetCallDelay(0)

    def test_destroy_while_threads_call_never_frees_a_handle_in_use(stand_in, torch):
        """destroy() closes the gate, waits for the calls inside NCCL, then frees: the stand-in
        never sees a destroyed handle, nor a destroy while a call is inside; every thread's
        call completed before it, or raised NcclInvalid naming comm."""
        before = stand_in.fakeUsedAfterFree()
        for round_ in range(25):
            comm = Communicator.init(1, 0, UniqueId.generate())
            ended = hammer_until_closed(comm, torch, 0.0005 * (round_ % 5), comm.destroy)
            assert comm.closed
            for e in ended:
                assert isinstance(e, NcclInvalid) and e.argument == "comm", repr(e)
            assert stand_in.fakeUsedAfterFree() == before, f"round {round_}"

    def test_abort_while_threads_call_ends_every_call(stand_in, torch):
        """abort() lets the calls already inside NCCL return before it frees the handle (none is
        blocked here: each stays 50 us): each thread's call completes or raises an NcclError,
        none hangs, none raises anything else, the stand-in never sees the handle aborted
        under a call, and the handle is aborted exactly once."""
        before = stand_in.fakeUsedAfterFree()
        for round_ in range(10):
            comm = Communicator.init(1, 0, UniqueId.generate())
            handle = comm.handle
            ended = hammer_until_closed(comm, torch, 0.0005 * (round_ % 5), comm.abort)
            for e in ended:
                assert isinstance(e, ncclbind.NcclError), repr(e)
            destroys, aborts = ctypes.c_int(), ctypes.c_int()
            stand_in.fakeCommCalls(ctypes.c_void_p(handle), ctypes.byref(destroys), ctypes.byref(aborts))
            assert (destroys.value, aborts.value) == (0, 1)
            assert stand_in.fakeUsedAfterFree() == before, f"round {round_}"

    def start_a_hung_all_reduce(library, comm, torch):
        """A thread blocked in an ncclAllReduce that returns (with an error) only once the
        communicator is aborted or revoked; (the thread, the list it puts what it raised in)."""
        a = torch.Tensor([1, 2])
        library.fakeHangNextAllReduce()
        raised = []

        def blocked_call():
            try:
                comm.all_reduce(a)
            except Exception as e:  # noqa: BLE001 - the test reads what it was
                raised.append(e)

        blocked = threading.Thread(target=blocked_call, daemon=True)
        blocked.start()
        time.sleep(0.05)  # inside the hung ncclAllReduce
        return blocked, raised

    def test_abort_revokes_a_blocked_call_before_it_frees_the_handle(torch):
        """A call blocked inside NCCL does not leave within the abort's grace: where the
        library has ncclCommRevoke (the stand-in claims 2.28.9), abort revokes, which makes the
        call return with an error, and only then frees the handle."""
        from ncclbind.core import communicator as communicator_module
        library = ctypes.CDLL(os.environ["NCCLBIND_NCCL_PATH"])
        before = library.fakeUsedAfterFree()
        comm = Communicator.init(1, 0, UniqueId.generate())
        blocked, raised = start_a_hung_all_reduce(library, comm, torch)
        started = time.monotonic()
        comm.abort()
        took = time.monotonic() - started
        blocked.join(10)
        assert not blocked.is_alive() and len(raised) == 1 and isinstance(raised[0], ncclbind.NcclError), raised
        assert library.fakeUsedAfterFree() == before  # the hung call had returned before the free
        assert communicator_module.ABORT_GRACE_S <= took < communicator_module.ABORT_GRACE_S + 1

    def test_abort_during_a_destroy_waiting_for_a_blocked_call(torch):
        """A destroy waits for a call blocked inside NCCL; an abort from a third thread makes
        the call return, and the handle is aborted once, never also destroyed."""
        library = ctypes.CDLL(os.environ["NCCLBIND_NCCL_PATH"])
        comm = Communicator.init(1, 0, UniqueId.generate())
        handle = comm.handle
        a = torch.Tensor([1, 2])
        blocked, raised = start_a_hung_all_reduce(library, comm, torch)
        destroyer = threading.Thread(target=comm.destroy, daemon=True)
        destroyer.start()
        time.sleep(0.05)
        try:
            assert destroyer.is_alive() and comm.closed  # waiting; new calls already refused
            with pytest.raises(NcclInvalid):
                comm.all_reduce(a)
        finally:
            comm.abort()
            blocked.join(10)
            destroyer.join(10)
        assert not blocked.is_alive() and not destroyer.is_alive()
        assert len(raised) == 1 and isinstance(raised[0], ncclbind.NcclError), raised
        destroys, aborts = ctypes.c_int(), ctypes.c_int()
        library.fakeCommCalls(ctypes.c_void_p(handle), ctypes.byref(destroys), ctypes.byref(aborts))
        assert (destroys.value, aborts.value) == (0, 1)

    # ---- prepared calls (ncclbind.prepare: calls.py checks once, call_engine.c repeats the call) ----

    def test_a_prepared_call_makes_the_call_each_time_with_the_data_then_in_the_buffers(comm):
        a, b = device_array([1, 2]), device_array([0, 0])
        call = ncclbind.prepare(comm.all_reduce, a, b, stream=0)
        assert values(b) == [0, 0], "preparing calls nothing"
        with PathLog() as log:
            call()
            assert values(b) == [1, 2]
            a.array[:] = [5, 6]
            call()
            assert values(b) == [5, 6]
        assert log.calls == [("all_reduce", True)] * 2, "both made in C"
        assert (call.method, call.count, call.communicator) == ("all_reduce", 2, comm)
        assert call.arguments["stream"] == 0 and call.arguments["sendbuf"].ptr == a.array.ctypes.data
        assert "all_reduce (ncclAllReduce, count 2)" in repr(call)
        assert isinstance(call, ncclbind.PreparedCall)

    def test_prepared_calls_in_place_with_a_root_and_in_a_group(comm):
        a = device_array([3, 4])
        ncclbind.prepare(comm.all_reduce, a)()
        ncclbind.prepare(comm.all_reduce, a, a, "max")()
        ncclbind.prepare(comm.broadcast, a, a, root=0)()
        assert values(a) == [3, 4]
        b = device_array([0, 0])
        send, recv = ncclbind.prepare(comm.send, a, peer=0), ncclbind.prepare(comm.recv, b, peer=0)
        with group():
            send()
            recv()
        assert values(b) == [3, 4]

    def test_prepare_refuses_what_the_method_refuses_naming_the_argument_and_calls_nothing(comm):
        a, short, ints = device_array([1, 2]), device_array([0, 0, 0]), device_array([0, 0], "int32")
        with PathLog() as log:
            for args, argument in (((a, short), "recvbuf"), ((a, ints), "recvbuf")):
                with pytest.raises(NcclInvalid) as prepared:
                    ncclbind.prepare(comm.all_reduce, *args)
                with pytest.raises(NcclInvalid) as called:
                    comm.all_reduce.__wrapped__(comm, *args)
                assert (prepared.value.argument, str(prepared.value)) == (called.value.argument, str(called.value))
                assert prepared.value.argument == argument
            with pytest.raises(NcclInvalid, match="root") as e:
                ncclbind.prepare(comm.broadcast, a, a, root=1)
            assert e.value.argument == "root"
            with pytest.raises(TypeError):
                ncclbind.prepare(comm.all_reduce, a, bogus=1)
        assert log.calls == [], "preparing calls nothing"

    def test_prepare_takes_only_a_bound_buffer_method(comm):
        for method in (comm.destroy, ncclbind.Communicator.all_reduce, print, comm.all_reduce.__wrapped__):
            with pytest.raises(NcclInvalid, match="a buffer-taking method of a communicator") as e:
                ncclbind.prepare(method, device_array([1, 2]))
            assert e.value.argument == "method"

    def test_a_prepared_call_takes_no_arguments_and_keeps_its_buffers_alive(comm):
        import gc
        b = device_array([0, 0])
        call = ncclbind.prepare(comm.all_reduce, device_array([7, 8]), b)
        gc.collect()
        call()
        assert values(b) == [7, 8]
        with pytest.raises(TypeError, match="takes no arguments"):
            call(b)

    def test_a_prepared_call_on_a_destroyed_communicator_raises_as_the_method_does():
        c = Communicator.init(1, 0, UniqueId.generate())
        a = device_array([1, 2])
        call = ncclbind.prepare(c.all_reduce, a)
        c.destroy()
        with pytest.raises(NcclInvalid, match="destroyed") as e:
            call()
        assert e.value.argument == "comm"
