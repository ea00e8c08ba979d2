"""Complex buffers: complex64 / complex128 resolve to their real part's NCCL type
with twice the elements; collectives move them, and reduce them with sum or avg
only (any other op is rejected naming `op`, before NCCL is called)."""
from __future__ import annotations

import numpy as np
import pytest

from stand_ins import INSIDE, run_over_stand_in

if not INSIDE:
    def test_complex_buffers_over_the_stand_in_library(tmp_path):
        run_over_stand_in(__file__, tmp_path)

else:
    from ncclbind import Communicator, NcclBuffer, NcclDataType, NcclRedOp, UniqueId
    from ncclbind.base.dtypes import check_op_for_complex, complex_part_type
    from ncclbind.errors import NcclInvalid
    from stand_ins import DeviceArray, DLPackArray

    @pytest.fixture
    def comm():
        c = Communicator.init(1, 0, UniqueId.generate())
        yield c
        c.destroy()

    def complex_array(values, dtype="complex64"):
        return DeviceArray(np.ascontiguousarray(np.asarray(values, dtype=dtype)))

    @pytest.mark.parametrize("spelling, part", [
        ("complex64", "FLOAT32"), ("torch.cfloat", "FLOAT32"), (np.complex128, "FLOAT64"), ("<c16", "FLOAT64"),
        ((5, 64, 1), "FLOAT32"), ("float32", None), ("int8", None),
    ])
    def test_the_part_type_of_each_spelling(spelling, part):
        assert complex_part_type(spelling) == (NcclDataType[part] if part else None)

    @pytest.mark.parametrize("make", [
        lambda a: DeviceArray(a), lambda a: DLPackArray(a), lambda a: (a.ctypes.data, a.size, a.dtype),
    ])
    def test_a_complex_buffer_is_its_part_type_twice(make):
        a = np.zeros(3, np.complex128)
        buffer = NcclBuffer.resolve(make(a), "x")
        assert (buffer.dtype, buffer.count, buffer.complex, buffer.elements) == (NcclDataType.FLOAT64, 6, True, 3)
        assert buffer.nbytes == a.nbytes
        assert buffer.__cuda_array_interface__["typestr"] == "<c16"
        assert buffer.__cuda_array_interface__["shape"] == (3,)

    def test_sum_and_avg_reduce_complex_buffers(comm):
        send = complex_array([1 + 2j, 3 - 4j])
        recv = complex_array([0, 0])
        for op in (NcclRedOp.SUM, "avg", int(NcclRedOp.SUM)):
            comm.all_reduce(send, recv, op)
            assert recv.array.tolist() == [1 + 2j, 3 - 4j]
        comm.reduce_scatter(send, complex_array([0, 0]))

    @pytest.mark.parametrize("collective", ["all_reduce", "reduce", "reduce_scatter", "reduce_scatterv"])
    @pytest.mark.parametrize("op", [NcclRedOp.MAX, "prod", int(NcclRedOp.MIN)])
    def test_other_ops_on_complex_buffers_name_op(comm, collective, op):
        send, recv = complex_array([1j, 2j]), complex_array([0, 0])
        arguments = {"all_reduce": (send, recv, op), "reduce": (send, recv, op, 0),
                     "reduce_scatter": (send, recv, op), "reduce_scatterv": (send, recv, [2], None, op)}[collective]
        with pytest.raises(NcclInvalid) as info:
            getattr(comm, collective)(*arguments)
        assert info.value.argument == "op"
        assert "complex64" in str(info.value) and "only sum and avg" in str(info.value)
        assert recv.array.tolist() == [0, 0]

    def test_a_custom_op_on_a_complex_buffer_is_rejected():
        buffer = NcclBuffer(4096, 2, "complex64")
        with pytest.raises(NcclInvalid, match="only sum and avg"):
            check_op_for_complex(buffer, object())
        check_op_for_complex(NcclBuffer(4096, 2, "float32"), NcclRedOp.MAX)  # not complex: any op

    def test_non_reducing_collectives_move_complex_data(comm):
        send, recv = complex_array([1 + 1j, 2 - 2j], "complex128"), complex_array([0, 0], "complex128")
        comm.all_gather(send, recv)
        assert recv.array.tolist() == [1 + 1j, 2 - 2j]
        recv = complex_array([0, 0, 0], "complex128")
        comm.all_to_allv(send, [1], [1], recv, [1], [2])
        assert recv.array.tolist() == [0, 0, 2 - 2j]

    def test_complex_and_real_buffers_do_not_mix_in_variable_count_collectives(comm):
        with pytest.raises(NcclInvalid) as info:
            comm.all_gatherv(complex_array([1j]), DeviceArray(np.zeros(2, np.float32)), [1])
        assert info.value.argument == "recvbuf" and "complex64" in str(info.value)

    def test_complex_buffers_are_never_cached():
        from ncclbind.base import buffer as buffer_module
        from stand_ins import install_torch
        torch = install_torch()
        torch.complex64 = type(torch.float32)("complex64")
        t = torch.Tensor([1j, 2j], "complex64")
        assert NcclBuffer.resolve(t, "x").complex
        assert buffer_module.cached(t) is None
