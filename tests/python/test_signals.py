"""nccl4py 0.6.0's window and signal surface (issue 22): RegisteredWindowHandle's device-pointer
and LE-info queries with the peer (or LSA rank) first and offset=0, None for "no pointer", the
CftLeInfo record; Communicator.put_signal / signal / wait_signal with WaitSignalDesc, where
put_signal's peer_window_offset counts ELEMENTS (NCCL takes bytes); the handles' constructors
and properties. Runs over the stand-in libnccl built with -DFAKE_NCCL_RMA (fake_nccl.c: the
2.29.7+ window queries and one-sided calls, which log what NCCL receives), claiming 2.32.3."""
from __future__ import annotations

import pytest

from stand_ins import HERE, INSIDE, build_shared, run_over_stand_in

if not INSIDE:
    def test_windows_and_signals_over_the_stand_in_library(tmp_path, monkeypatch):
        library = build_shared(tmp_path / "libnccl.so.2",
                               ["-O1", "-fvisibility=hidden", "-DFAKE_NCCL_RMA", str(HERE / "fake_nccl.c")])
        monkeypatch.setenv("NCCLBIND_FAKE_NCCL_VERSION", "23203")
        run_over_stand_in(__file__, tmp_path, library)

else:
    import inspect

    import numpy as np

    import ncclbind
    from ncclbind import (CftLeInfo, Communicator, RegisteredBufferHandle, RegisteredWindowHandle, UniqueId,
                          WaitSignalDesc, WindowFlag)
    from ncclbind import _nccl
    from ncclbind.errors import NcclInvalid
    from stand_ins import CallLog
    from stand_ins import DeviceArray, device_array

    LSA_STRIDE = 1 << 20  # fake_nccl.c's FAKE_LSA_STRIDE

    @pytest.fixture
    def comm():
        c = Communicator.init(1, 0, UniqueId.generate())
        yield c
        c.destroy()

    @pytest.fixture
    def pair():
        """Rank 0 of two (the stand-in reaches only world rank 0 by load/store)."""
        c = Communicator.init(2, 0, UniqueId.generate())
        yield c
        c.destroy()

    @pytest.fixture
    def log():
        log = CallLog()
        log.clear()
        return log

    # ---- the window queries: nccl4py's argument order and results -----------------------------

    def test_the_getters_take_the_rank_first_and_offset_defaults_to_0(comm):
        x = device_array(np.zeros(64))
        with comm.register_window(x) as w:
            base = w.user_ptr
            # lsa_rank first: (1, 256) is LSA rank 1 at byte 256, not rank 256 at byte 1
            assert w.get_lsa_device_pointer(1, 256) == base + LSA_STRIDE + 256
            assert w.get_lsa_device_pointer(1) == base + LSA_STRIDE
            assert w.get_lsa_device_pointer(lsa_rank=0, offset=8) == base + 8
            assert w.get_peer_device_pointer(0, 16) == base + 16
            assert w.get_peer_device_pointer(0) == base

    def test_ncclbinds_names_are_the_same_methods():
        W = RegisteredWindowHandle
        for ours, theirs in [("lsa_pointer", "get_lsa_device_pointer"), ("peer_pointer", "get_peer_device_pointer"),
                             ("multimem_pointer", "get_lsa_multimem_device_pointer"),
                             ("multimem_handle_pointer", "get_multimem_device_pointer"),
                             ("multimem_le_info", "get_multimem_le_info"), ("cft_le_info", "get_cft_le_info"),
                             ("peer_le_info", "get_peer_le_info")]:
            assert getattr(W, ours) is getattr(W, theirs)

    def test_the_signatures_are_nccl4pys():
        def params(method):
            return [(p.name, p.default) for p in list(inspect.signature(method).parameters.values())[1:]]
        W, empty = RegisteredWindowHandle, inspect.Parameter.empty
        assert params(W.get_lsa_device_pointer) == [("lsa_rank", empty), ("offset", 0)]
        assert params(W.get_peer_device_pointer) == [("peer", empty), ("offset", 0)]
        assert params(W.get_lsa_multimem_device_pointer) == [("offset", 0)]
        assert params(W.get_multimem_device_pointer) == [("multimem", empty), ("offset", 0)]
        assert params(W.get_multimem_le_info) == [("offset", 0)]
        assert params(W.get_cft_le_info) == [("peer_cft", empty), ("cft_team", empty), ("offset", 0)]
        assert params(W.get_peer_le_info) == [("peer", empty), ("offset", 0)]
        assert params(Communicator.put_signal)[:7] == [
            ("local_buffer", empty), ("peer", empty), ("peer_window", empty), ("peer_window_offset", 0),
            ("signal_index", 0), ("context", 0), ("flags", 0)]
        assert params(Communicator.signal)[:4] == [("peer", empty), ("signal_index", 0), ("context", 0), ("flags", 0)]
        assert params(Communicator.wait_signal)[0] == ("descs", empty)
        assert params(Communicator.register_window) == [("buffer", empty), ("flags", None)]

    def test_no_pointer_is_none_not_0(pair):
        with pair.register_window(device_array(np.zeros(8))) as w:
            assert w.get_peer_device_pointer(1) is None  # not reachable by load/store
            assert w.get_peer_device_pointer(1, 64) is None
            assert w.get_lsa_multimem_device_pointer() is None  # no multimem
            assert w.get_multimem_device_pointer(_nccl.ncclMultimemHandle_t(mcBasePtr=0)) is None
            assert w.get_multimem_device_pointer(_nccl.ncclMultimemHandle_t(mcBasePtr=0x10000), 32) == 0x10020

    def test_le_info_is_a_cft_le_info(pair):
        team = ncclbind.Team(nRanks=2, rank=0, stride=1)
        with pair.register_window(device_array(np.zeros(8))) as w:
            assert w.get_multimem_le_info() == CftLeInfo(le_id=7, le_offset=0)
            assert w.get_multimem_le_info(64) == CftLeInfo(7, 64)
            info = w.get_cft_le_info(1, team, 32)
            assert isinstance(info, CftLeInfo) and (info.le_id, info.le_offset) == (101, 32)
            assert w.get_peer_le_info(1, 16) == CftLeInfo(201, 16)
            with pytest.raises(AttributeError):
                info.le_id = 0  # a frozen record

    @pytest.mark.parametrize("call, argument", [
        (lambda w, team: w.get_cft_le_info(2, team), "peer_cft"),  # a rank of cft_team: 0..1
        (lambda w, team: w.get_cft_le_info(-1, team), "peer_cft"),
        (lambda w, team: w.get_cft_le_info(0, (2, 0, 1)), "cft_team"),
        (lambda w, team: w.get_peer_device_pointer(0, -1), "offset"),
        (lambda w, team: w.get_lsa_device_pointer(True), "lsa_rank"),
        (lambda w, team: w.get_multimem_device_pointer(0x1000), "multimem"),
    ])
    def test_bad_query_arguments_are_rejected(pair, call, argument):
        team = ncclbind.Team(nRanks=2, rank=0, stride=1)
        with pair.register_window(device_array(np.zeros(8))) as w:
            with pytest.raises(NcclInvalid) as info:
                call(w, team)
            assert info.value.argument == argument

    # ---- put_signal, signal, wait_signal -----------------------------------------------------

    @pytest.mark.parametrize("dtype, itemsize", [("float32", 4), ("float64", 8), ("int8", 1)])
    def test_put_signal_offsets_count_elements(comm, log, dtype, itemsize):
        """nccl4py's peer_window_offset is in elements of local_buffer's type; NCCL gets bytes."""
        target = np.zeros(16, dtype=dtype)
        with comm.register_window(DeviceArray(target)) as w:
            source = device_array([1, 2, 3], dtype)
            log.clear()
            comm.put_signal(source, 0, w, 4)
            (call,) = log.calls()
            assert call[0] == "put_signal" and call[2] == 3 and call[4] == 0 and call[5] == w.handle
            assert call[6] == 4 * itemsize  # the byte offset NCCL receives
            assert list(target[4:7]) == [1, 2, 3] and not target[:4].any() and not target[7:].any()

    def test_put_signal_passes_signal_index_context_and_flags_in_nccl4pys_order(comm, log):
        with comm.register_window(device_array(np.zeros(8, dtype="float32"))) as w:
            log.clear()
            comm.put_signal(device_array([1.0]), 0, w, 0, 3, 2, 0)
            comm.put_signal(device_array([1.0]), 0, w, signal_index=5, context=1)
            assert [c[7:] for c in log.calls()] == [(3, 2, 0), (5, 1, 0)]

    def test_signal_and_wait_signal(pair, log):
        pair.signal(1)
        pair.signal(1, 4, 2)
        pair.wait_signal(WaitSignalDesc(peer=1))
        pair.wait_signal([WaitSignalDesc(1, op_count=2, signal_index=4, context=2), WaitSignalDesc(0, 3)])
        assert log.calls() == [("signal", 1, 0, 0, 0), ("signal", 1, 4, 2, 0),
                               ("wait_signal", 1), ("desc", 1, 1, 0, 0),
                               ("wait_signal", 2), ("desc", 2, 1, 4, 2), ("desc", 3, 0, 0, 0)]

    def test_wait_signal_desc_is_nccl4pys_record():
        d = WaitSignalDesc(2)
        assert (d.peer, d.op_count, d.signal_index, d.context) == (2, 1, 0, 0)
        record = d.to_record()
        assert (record.peer, record.opCnt, record.sigIdx, record.ctx) == (2, 1, 0, 0)
        with pytest.raises(NcclInvalid) as info:
            WaitSignalDesc(True)
        assert info.value.argument == "peer"
        with pytest.raises(NcclInvalid) as info:
            WaitSignalDesc(0, op_count=2 ** 31)
        assert info.value.argument == "op_count"

    @pytest.mark.parametrize("call, argument", [
        (lambda c, w, x: c.put_signal(x, 2, w), "peer"),
        (lambda c, w, x: c.put_signal(x, 0, w.handle), "peer_window"),
        (lambda c, w, x: c.put_signal(x, 0, w, -1), "peer_window_offset"),
        (lambda c, w, x: c.put_signal(x, 0, w, 1.0), "peer_window_offset"),
        (lambda c, w, x: c.put_signal(x, 0, w, 0, -1), "signal_index"),
        (lambda c, w, x: c.put_signal(x, 0, w, 0, 0, 2 ** 31), "context"),
        (lambda c, w, x: c.put_signal(x, 0, w, 0, 0, 0, True), "flags"),
        (lambda c, w, x: c.put_signal("x", 0, w), "local_buffer"),
        (lambda c, w, x: c.signal(5), "peer"),
        (lambda c, w, x: c.signal(0, "1"), "signal_index"),
        (lambda c, w, x: c.signal(0, 0, 0, -1), "flags"),
        (lambda c, w, x: c.wait_signal([]), "descs"),
        (lambda c, w, x: c.wait_signal((0, 1, 0, 0)), "descs"),
        (lambda c, w, x: c.wait_signal(WaitSignalDesc(peer=1)), "descs"),  # rank 1 of a one-rank communicator
        (lambda c, w, x: c.wait_signal(WaitSignalDesc(0, op_count=-1)), "descs"),
    ])
    def test_bad_signal_arguments_are_rejected_before_nccl_is_called(comm, log, call, argument):
        with comm.register_window(device_array(np.zeros(8, dtype="float32"))) as w:
            log.clear()
            with pytest.raises(NcclInvalid) as info:
                call(comm, w, device_array([1.0]))
            assert info.value.argument == argument
            assert log.calls() == []

    def test_put_signal_needs_an_open_window_of_this_communicator(comm, log):
        other = Communicator.init(1, 0, UniqueId.generate())
        try:
            theirs = other.register_window(device_array(np.zeros(4, dtype="float32")))
            with pytest.raises(NcclInvalid, match="another communicator"):
                comm.put_signal(device_array([1.0]), 0, theirs)
            mine = comm.register_window(device_array(np.zeros(4, dtype="float32")))
            mine.close()
            with pytest.raises(NcclInvalid, match="closed") as info:
                comm.put_signal(device_array([1.0]), 0, mine)
            assert info.value.argument == "peer_window" and log.calls() == []
        finally:
            other.destroy()

    # ---- the handles ------------------------------------------------------------------------

    def test_window_handle_properties(comm):
        x = device_array(np.zeros(8, dtype="float32"))
        w = comm.register_window(x)
        address = x.__cuda_array_interface__["data"][0]
        assert w.flags == WindowFlag.DEFAULT and isinstance(w.flags, WindowFlag)
        assert (w.size, w.user_ptr, w.is_valid) == (32, address, True)
        assert w.handle == w.window != 0
        w.close()
        assert not w.is_valid and w.handle == 0
        with pytest.raises(NcclInvalid, match="closed"):
            w.user_ptr
        with comm.register_window(x, WindowFlag.COLL_SYMMETRIC) as s:
            assert s.flags == WindowFlag.COLL_SYMMETRIC == ncclbind._nccl.NCCL_WIN_COLL_SYMMETRIC

    def test_handles_from_an_address_and_size(comm):
        array = np.zeros(8, dtype="float32")
        address = array.__array_interface__["data"][0]
        with RegisteredWindowHandle(comm, address, 16) as w:
            assert (w.user_ptr, w.size, w.buffer) == (address, 16, None)
            assert w.get_peer_device_pointer(0, 4) == address + 4
        with RegisteredBufferHandle(comm, address, 32) as b:
            assert (b.size, b.is_valid) == (32, True)
        assert comm.register_buffer(device_array([0, 0, 0], "float64")).size == 24

    @pytest.mark.parametrize("make, argument", [
        (lambda c, a: RegisteredWindowHandle(c, "0x10", 16), "buffer_ptr"),
        (lambda c, a: RegisteredWindowHandle(c, a, -1), "size"),
        (lambda c, a: RegisteredWindowHandle(c, a, 16, -1), "flags"),
        (lambda c, a: RegisteredWindowHandle(c.handle, a, 16), "comm"),
        (lambda c, a: RegisteredBufferHandle(c, a, True), "size"),
        (lambda c, a: c.register_window(device_array([1.0]), "symmetric"), "flags"),
    ])
    def test_bad_handle_arguments(comm, make, argument):
        array = np.zeros(8, dtype="float32")
        with pytest.raises(NcclInvalid) as info:
            make(comm, array.__array_interface__["data"][0])
        assert info.value.argument == argument
        assert not comm._resources
