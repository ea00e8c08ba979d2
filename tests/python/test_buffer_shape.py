"""NcclBuffer.shape on every path of the buffer resolver, as ncclbind.ep reads it for a tensor's
extents: a torch or CuPy object resolved the first time (its handler), again (the extension's
per-object cache, buffer_cache.c, which hands back a copy of the cached NcclBuffer), after a torch
tensor is re-pointed (set_), and through ep.Tensor, whose ncclEpTensor_t sizes are those extents.
The second GPU run failed every ncclbind.ep case with "'NcclBuffer' object has no attribute
'shape'" at ep/tensor.py on torch CUDA tensors; these are the paths such a tensor takes."""
from __future__ import annotations

import numpy as np
import pytest

from stand_ins import INSIDE, run_over_stand_in

if not INSIDE:
    def test_buffer_shapes_over_the_stand_in_library(tmp_path):
        run_over_stand_in(__file__, tmp_path)

else:
    from stand_ins import install_cupy, install_torch
    from ncclbind import NcclBuffer
    from ncclbind.base import buffer as buffer_module
    from stand_ins import DeviceArray, DLPackArray

    torch = install_torch()
    cupy = install_cupy()

    @pytest.mark.parametrize("extents", [(5,), (3, 4), (2, 3, 4), (1, 7, 1)])
    def test_a_torch_cuda_tensor_has_its_shape_first_and_from_the_cache(extents):
        t = torch.Tensor(np.zeros(extents, np.float32))
        first = NcclBuffer.resolve(t, "x")
        assert buffer_module.cached(t) is not None, "a torch CUDA tensor is cached (the fast path's table)"
        again = NcclBuffer.resolve(t, "x")
        assert (first.shape, again.shape) == (extents, extents)
        assert again.count == int(np.prod(extents)) and again.owner is t

    def test_a_re_pointed_torch_tensor_has_its_new_shape():
        t = torch.Tensor(np.zeros((2, 3), np.float32))
        assert NcclBuffer.resolve(t, "x").shape == (2, 3)
        t.set_(np.zeros((4, 5), np.float32))
        assert NcclBuffer.resolve(t, "x").shape == (4, 5)

    def test_a_cupy_array_has_its_shape_first_and_from_the_cache():
        a = cupy.ndarray(np.zeros((6, 2)), "float32")
        assert NcclBuffer.resolve(a, "x").shape == (6, 2)
        assert buffer_module.cached(a) is not None
        assert NcclBuffer.resolve(a, "x").shape == (6, 2)

    def test_interface_dlpack_and_spec_producers_have_their_shape():
        assert NcclBuffer.resolve(DeviceArray(np.zeros((3, 5), np.float32)), "x").shape == (3, 5)
        assert NcclBuffer.resolve(DLPackArray(np.zeros((2, 2, 2), np.float32)), "x").shape == (2, 2, 2)
        assert NcclBuffer.resolve((0x10000, (4, 8), "float32", 0), "x").shape == (4, 8)
        assert NcclBuffer.resolve((0x10000, 32, "float32", 0), "x").shape == (32,)

    def test_an_ep_tensor_over_a_torch_tensor_has_its_extents_on_every_resolution():
        from ncclbind import ep
        t = torch.Tensor(np.zeros((3, 4), np.float32))
        for _ in range(3):  # the first resolution, then the cached ones
            tensor = ep.Tensor(t, argument="tokens")
            assert tensor.shape == (3, 4) and tensor.ndim == 2 and list(tensor._sizes) == [3, 4]
