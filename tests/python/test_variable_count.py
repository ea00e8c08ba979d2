"""Variable-count collectives (all_to_allv, all_gatherv, reduce_scatterv) over the
stand-in libnccl: one-rank communicators move the data; communicators of more
ranks show, through the stand-in's call log, which grouped calls are made; bad
counts and displacements are rejected before any NCCL call."""
from __future__ import annotations

import numpy as np
import pytest

from stand_ins import INSIDE, run_over_stand_in

if not INSIDE:
    def test_variable_count_collectives_over_the_stand_in_library(tmp_path):
        run_over_stand_in(__file__, tmp_path)

else:
    from ncclbind import Communicator, NcclRedOp, UniqueId
    from ncclbind.errors import NcclInvalid
    from stand_ins import CallLog
    from stand_ins import device_array

    FLOAT32 = 7  # ncclFloat32, as the stand-in logs it

    @pytest.fixture
    def log():
        calls = CallLog()
        calls.clear()
        return calls

    @pytest.fixture
    def comm():
        c = Communicator.init(1, 0, UniqueId.generate())
        yield c
        c.destroy()

    @pytest.fixture
    def comm4():
        """Rank 1 of 4: the stand-in only checks arguments and logs the calls."""
        c = Communicator.init(4, 1, UniqueId.generate())
        yield c
        c.destroy()

    def address(a, element=0):
        return a.array.__array_interface__["data"][0] + element * a.array.itemsize

    def test_all_to_allv_on_one_rank_moves_the_block(comm):
        send = device_array([1, 2, 3, 4, 5])
        recv = device_array([0, 0, 0, 0, 0, 0])
        comm.all_to_allv(send, [3], [1], recv, [3], [2])
        assert recv.array.tolist() == [0, 0, 2, 3, 4, 0]

    def test_all_to_allv_sends_and_receives_each_block_in_one_group(comm4, log):
        send = device_array(range(10))
        recv = device_array([0] * 12)
        comm4.all_to_allv(send, [1, 0, 3, 2], [0, 1, 1, 4], recv, [2, 2, 0, 5], [0, 2, 4, 4])
        assert log.calls() == [
            ("group_start",),
            ("send", address(send, 0), 1, FLOAT32, 0), ("recv", address(recv, 0), 2, FLOAT32, 0),
            ("recv", address(recv, 2), 2, FLOAT32, 1),  # nothing to send to rank 1
            ("send", address(send, 1), 3, FLOAT32, 2),  # nothing to receive from rank 2
            ("send", address(send, 4), 2, FLOAT32, 3), ("recv", address(recv, 4), 5, FLOAT32, 3),
            ("group_end",),
        ]

    def test_all_gatherv_packs_blocks_in_rank_order_by_default(comm4, log):
        send = device_array([7, 7, 7])
        recv = device_array([0] * 7)
        comm4.all_gatherv(send, recv, [1, 3, 0, 2])
        receives = [call for call in log.calls() if call[0] == "recv"]
        assert receives == [("recv", address(recv, 0), 1, FLOAT32, 0), ("recv", address(recv, 1), 3, FLOAT32, 1),
                            ("recv", address(recv, 4), 2, FLOAT32, 3)]
        sends = [call for call in log.calls() if call[0] == "send"]
        assert sends == [("send", address(send), 3, FLOAT32, peer) for peer in range(4)]

    def test_all_gatherv_on_one_rank_places_the_block(comm):
        send = device_array([5, 6])
        recv = device_array([0, 0, 0, 0])
        comm.all_gatherv(send, recv, [2], [1])
        assert recv.array.tolist() == [0, 5, 6, 0]

    def test_reduce_scatterv_is_one_reduce_per_block_rooted_at_its_rank(comm4, log):
        send = device_array(range(6))
        recv = device_array([0, 0, 0])
        comm4.reduce_scatterv(send, recv, [1, 3, 0, 2], op=NcclRedOp.MAX)
        assert log.calls() == [
            ("group_start",),
            ("reduce", address(send, 0), 0, 1, FLOAT32, NcclRedOp.MAX, 0),
            ("reduce", address(send, 1), address(recv), 3, FLOAT32, NcclRedOp.MAX, 1),  # this rank's block
            ("reduce", address(send, 4), 0, 2, FLOAT32, NcclRedOp.MAX, 3),
            ("group_end",),
        ]

    def test_reduce_scatterv_on_one_rank(comm):
        send = device_array([1, 2, 3, 4])
        recv = device_array([0, 0])
        comm.reduce_scatterv(send, recv, [2], [2])
        assert recv.array.tolist() == [3, 4]

    @pytest.mark.parametrize("counts, argument, words", [
        ([1, 1, 1], "send_counts", "3 entries; the communicator has 4 ranks"),
        ([1, True, 1, 1], "send_counts", "send_counts[1] is True; it must be an int"),
        ([1, 1, 1.0, 1], "send_counts", "send_counts[2] is 1.0"),
        ([1, 1, 1, -2], "send_counts", "send_counts[3] is -2; it must not be negative"),
        ("1234", "send_counts", "a sequence of 4 ints"),
        ({3: 1, 2: 1, 1: 1, 0: 1}, "send_counts", "a sequence of 4 ints"),  # a dict is not read by key
        ({0, 1, 2, 3}, "send_counts", "a sequence of 4 ints"),  # a set has no rank order
    ])
    def test_bad_counts_name_the_argument_and_index(comm4, log, counts, argument, words):
        with pytest.raises(NcclInvalid) as info:
            comm4.all_to_allv(device_array([0] * 8), counts, [0, 1, 2, 3], device_array([0] * 8), [1] * 4,
                              [0, 1, 2, 3])
        assert info.value.argument == argument and words in str(info.value)
        assert log.calls() == []

    def test_a_block_past_the_end_of_its_buffer(comm4, log):
        with pytest.raises(NcclInvalid) as info:
            comm4.all_to_allv(device_array([0] * 8), [2] * 4, [0, 2, 4, 7], device_array([0] * 8), [2] * 4,
                              [0, 2, 4, 6])
        assert info.value.argument == "send_displs"
        assert "send_displs[3] + send_counts[3] = 7 + 2 is past the end of sendbuf (8 elements)" in str(info.value)
        assert log.calls() == []

    def test_overlapping_receive_blocks(comm4, log):
        with pytest.raises(NcclInvalid) as info:
            comm4.all_gatherv(device_array([0, 0]), device_array([0] * 8), [1, 2, 2, 1], [0, 6, 1, 2])
        assert info.value.argument == "recv_displs"
        assert "receive block 3 overlaps block 2 ([1, 3) and [2, 3) elements)" in str(info.value)
        assert log.calls() == []

    def test_empty_blocks_may_share_a_displacement(comm4, log):
        comm4.all_gatherv(device_array([1]), device_array([0, 0]), [0, 1, 0, 1], [0, 0, 1, 1])
        assert len([call for call in log.calls() if call[0] == "recv"]) == 2

    def test_sendbuf_must_hold_this_ranks_block(comm4, log):
        with pytest.raises(NcclInvalid) as info:
            comm4.all_gatherv(device_array([0, 0, 0]), device_array([0] * 8), [1, 2, 2, 1])
        assert info.value.argument == "sendbuf" and "recv_counts[1]" in str(info.value)
        assert log.calls() == []

    def test_dtypes_must_be_equal(comm4, log):
        with pytest.raises(NcclInvalid) as info:
            comm4.all_to_allv(device_array([0] * 4), [1] * 4, [0, 1, 2, 3], device_array([0] * 4, "int32"),
                              [1] * 4, [0, 1, 2, 3])
        assert info.value.argument == "recvbuf" and "int32" in str(info.value)
        assert log.calls() == []

    def test_recvbuf_too_small_for_reduce_scatterv(comm4, log):
        with pytest.raises(NcclInvalid) as info:
            comm4.reduce_scatterv(device_array([0] * 8), device_array([0]), [2, 2, 2, 2])
        assert info.value.argument == "recvbuf" and "recv_counts[1]" in str(info.value)
        assert log.calls() == []

    def test_numpy_integer_counts_are_ints(comm):
        send, recv = device_array([1, 2]), device_array([0, 0])
        comm.all_to_allv(send, np.array([2]), np.array([0]), recv, np.array([2]), np.array([0]))
        assert recv.array.tolist() == [1, 2]

    def test_a_destroyed_communicator(log):
        c = Communicator.init(1, 0, UniqueId.generate())
        c.destroy()
        with pytest.raises(NcclInvalid, match="destroyed"):
            c.all_gatherv(device_array([1]), device_array([0]), [1])
