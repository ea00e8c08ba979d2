"""ncclbind.empty / ncclbind.zeros over the stand-in libnccl, with small stand-ins
for torch and CuPy (neither is imported here): the arrays live in ncclMemAlloc
memory, which ncclMemFree frees exactly once when the last array or view over
it goes (fakeMemCalls counts both calls); bad arguments are rejected before
anything is allocated; a failure after the allocation frees it. The real
libraries are tested in test_gpu.py (marker gpu)."""
from __future__ import annotations

import inspect

import pytest

from stand_ins import INSIDE, run_over_stand_in


def test_empty_and_zeros_are_exported_with_typed_signatures():
    import ncclbind
    from ncclbind.core import arrays
    assert ncclbind.empty is arrays.empty and ncclbind.zeros is arrays.zeros
    assert {"empty", "zeros"} <= set(ncclbind.__all__)
    for function in (ncclbind.empty, ncclbind.zeros):
        parameters = inspect.signature(function).parameters
        assert list(parameters) == ["shape", "dtype", "device", "like", "comm"]
        assert all(parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in ("device", "like", "comm"))
        assert parameters["like"].default == "torch" and function.__doc__


if not INSIDE:
    def test_arrays_over_the_stand_in_library(tmp_path):
        run_over_stand_in(__file__, tmp_path)

else:
    import ctypes
    import gc
    import os
    import sys
    import threading
    import types

    import numpy as np

    import ncclbind
    from ncclbind import Communicator, UniqueId
    from ncclbind.core.memory import NcclMemoryBlock, mem_alloc
    from ncclbind.errors import NcclError, NcclInvalid

    LIBRARY = ctypes.CDLL(os.environ["NCCLBIND_NCCL_PATH"])  # the copy the runtime loaded

    def mem_calls() -> tuple[int, int]:
        """(ncclMemAlloc calls that succeeded, ncclMemFree calls) so far."""
        allocs, frees = ctypes.c_int(), ctypes.c_int()
        LIBRARY.fakeMemCalls(ctypes.byref(allocs), ctypes.byref(frees))
        return allocs.value, frees.value

    def host_bytes(address: int, nbytes: int) -> np.ndarray:
        return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address)) if nbytes else \
            np.zeros(0, np.uint8)

    # ---- stand-ins for torch and CuPy: only what empty() and NcclBuffer use -----------

    def fake_torch() -> types.ModuleType:
        torch = types.ModuleType("torch")

        class dtype:
            def __init__(self, name):
                self.name = name

            def __str__(self):
                return f"torch.{self.name}"

        dtype.__module__ = "torch"

        class device:
            def __init__(self, index):
                self.type, self.index = "cuda", index

        class Tensor:
            """`array` (NumPy, over the memory) and `storage_owner`, which torch's
            storage holds like the __cuda_array_interface__ object it was made from."""

            is_cuda = True

            def __init__(self, array, storage_owner, dtype_, index):
                self.array, self.storage_owner, self.dtype, self.device = array, storage_owner, dtype_, device(index)

            def data_ptr(self):
                return self.array.__array_interface__["data"][0]

            def numel(self):
                return self.array.size

            def get_device(self):
                return self.device.index

            def is_contiguous(self):
                return self.array.flags.c_contiguous

            def stride(self):
                return tuple(s // self.array.itemsize for s in self.array.strides)

            @property
            def shape(self):
                return self.array.shape

            def __getitem__(self, key):
                return Tensor(self.array[key], self.storage_owner, self.dtype, self.device.index)

            def view(self, what):
                if isinstance(what, dtype):
                    return Tensor(self.array.view(what.name), self.storage_owner, what, self.device.index)
                return Tensor(self.array.reshape(what), self.storage_owner, self.dtype, self.device.index)

            def zero_(self):
                self.array[...] = 0
                return self

        def as_tensor(obj):
            interface = obj.__cuda_array_interface__
            assert interface["typestr"] == "|u1", interface
            address, nbytes = interface["data"][0], interface["shape"][0]
            return Tensor(host_bytes(address, nbytes), obj, torch.uint8, obj.device)  # the device "from the pointer"

        for name in ("uint8", "int32", "int64", "float16", "float32", "float64", "complex64", "complex128"):
            setattr(torch, name, dtype(name))
        torch.Tensor, torch.as_tensor = Tensor, as_tensor
        return torch

    def fake_cupy() -> types.ModuleType:
        cupy = types.ModuleType("cupy")
        cuda = types.ModuleType("cupy.cuda")

        class UnownedMemory:
            def __init__(self, ptr, size, owner, device_id=-1):
                self.ptr, self.size, self.owner, self.device_id = ptr, size, owner, device_id

        class MemoryPointer:
            def __init__(self, mem, offset):
                self.mem, self.ptr, self.device_id = mem, mem.ptr + offset, mem.device_id

        class Device:
            def __init__(self, index):
                self.id = index

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return None

        class ndarray:
            def __init__(self, shape, dtype, memptr):
                self.dtype = np.dtype(dtype)
                count = int(np.prod(shape))
                self.array = host_bytes(memptr.ptr, count * self.dtype.itemsize).view(self.dtype).reshape(shape)
                self.data, self.size, self.shape, self.strides = memptr, count, tuple(shape), self.array.strides
                self._c_contiguous = True

            def fill(self, value):
                self.array[...] = value

        cuda.UnownedMemory, cuda.MemoryPointer, cuda.Device = UnownedMemory, MemoryPointer, Device
        cupy.cuda, cupy.ndarray = cuda, ndarray
        return cupy

    @pytest.fixture
    def torch(monkeypatch):
        module = fake_torch()
        monkeypatch.setitem(sys.modules, "torch", module)
        return module

    @pytest.fixture
    def cupy(monkeypatch):
        module = fake_cupy()
        monkeypatch.setitem(sys.modules, "cupy", module)
        monkeypatch.setitem(sys.modules, "cupy.cuda", module.cuda)
        return module

    @pytest.fixture(params=["torch", "cupy"])
    def like(request, torch, cupy):
        return request.param

    @pytest.fixture
    def comm():
        c = Communicator.init(1, 0, UniqueId.generate())
        yield c
        c.destroy()

    def values(array):
        return array.array.tolist()

    def address(array, like):
        return array.data_ptr() if like == "torch" else array.data.ptr

    # ---- what empty() gives ------------------------------------------------------------

    def test_empty_is_an_array_of_the_shape_and_dtype_in_nccl_memory(like):
        before = mem_calls()
        x = ncclbind.empty((2, 3), "int32", like=like)
        assert mem_calls() == (before[0] + 1, before[1]), "one ncclMemAlloc, no ncclMemFree"
        assert tuple(x.shape) == (2, 3) and x.array.dtype == np.int32 and x.array.flags.c_contiguous
        x.array[...] = np.arange(6).reshape(2, 3)
        assert values(x) == [[0, 1, 2], [3, 4, 5]]
        del x
        gc.collect()
        assert mem_calls() == (before[0] + 1, before[1] + 1), "one ncclMemFree after the array went"

    def test_zeros(like):
        z = ncclbind.zeros(5, "float64", like=like)
        assert values(z) == [0.0] * 5

    @pytest.mark.parametrize("dtype, itemsize", [("complex64", 8), ("complex128", 16)])
    def test_complex_arrays(like, dtype, itemsize):
        x = ncclbind.empty(3, dtype, like=like)
        assert x.array.dtype == np.dtype(dtype) and x.array.nbytes == 3 * itemsize

    @pytest.mark.parametrize("shape, expected", [(0, (0,)), ((4, 0), (4, 0)), ((), ())])
    def test_empty_and_scalar_shapes(like, shape, expected):
        before = mem_calls()
        x = ncclbind.empty(shape, "float32", like=like)
        assert tuple(x.shape) == expected
        del x
        gc.collect()
        assert mem_calls() == (before[0] + 1, before[1] + 1), "an empty array still has (and frees) its own block"

    def test_numpy_integers_are_extents(like):
        x = ncclbind.empty((np.int64(2), np.uint8(2)), np.float32, like=like)
        assert tuple(x.shape) == (2, 2)

    # ---- freed exactly once, never while an array over the memory lives ----------------

    def test_a_torch_view_keeps_the_memory(torch):
        before = mem_calls()
        x = ncclbind.empty(8, "float32", like="torch")
        view = x.view((2, 4))[1]
        del x
        gc.collect()
        assert mem_calls()[1] == before[1], "freed while a view over the memory lives"
        view.array[...] = 7.0  # still ours: the stand-in's calloc'ed block
        del view
        gc.collect()
        assert mem_calls() == (before[0] + 1, before[1] + 1), "expected exactly one ncclMemFree"

    def test_a_cupy_memory_pointer_keeps_the_memory(cupy):
        before = mem_calls()
        a = ncclbind.empty(8, "float32", like="cupy")
        pointer = a.data
        del a
        gc.collect()
        assert mem_calls()[1] == before[1], "freed while a MemoryPointer over the memory lives"
        assert pointer.ptr
        del pointer
        gc.collect()
        assert mem_calls() == (before[0] + 1, before[1] + 1), "expected exactly one ncclMemFree"

    def test_close_from_many_threads_frees_once():
        before = mem_calls()
        block = mem_alloc(64, device=0)
        assert isinstance(block, NcclMemoryBlock)
        start = threading.Barrier(16)

        def close():
            start.wait()
            block.close()

        threads = [threading.Thread(target=close) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        del block
        gc.collect()
        assert mem_calls() == (before[0] + 1, before[1] + 1), "expected one ncclMemFree for 16 closes and the GC"

    # ---- used by NCCL ------------------------------------------------------------------

    def test_all_reduce_and_window_registration(comm, like):
        x = ncclbind.empty(4, "float32", like=like, comm=comm)
        x.array[...] = [1, 2, 3, 4]
        y = ncclbind.zeros(4, "float32", like=like, comm=comm)
        comm.all_reduce(x, y)
        assert values(y) == [1, 2, 3, 4]
        with comm.register_window(x) as window:
            assert window.buffer.ptr == address(x, like)
        del x, y
        gc.collect()

    def test_complex_all_reduce(comm, like):
        x = ncclbind.empty(2, "complex64", like=like, comm=comm)
        x.array[...] = [1 + 2j, 3 - 4j]
        y = ncclbind.zeros(2, "complex64", like=like, comm=comm)
        comm.all_reduce(x, y, "avg")
        assert values(y) == [1 + 2j, 3 - 4j]

    # ---- rejected before ncclMemAlloc ----------------------------------------------------

    @pytest.mark.parametrize("arguments, argument, words", [
        ((True, "float32"), "shape", "shape is True"),
        ((-1, "float32"), "shape", "shape[0] is -1; it must not be negative"),
        (((2, -3), "float32"), "shape", "shape[1] is -3"),
        (((2, 1.5), "float32"), "shape", "shape[1] is 1.5; it must be an int"),
        (((2, True), "float32"), "shape", "shape[1] is True"),
        (((np.bool_(True),), "float32"), "shape", "shape[0] is True"),
        (("23", "float32"), "shape", "not str"),
        ((None, "float32"), "shape", "not NoneType"),
        ((4, "bool"), "dtype", "no NCCL data type"),
        ((4, "complex32"), "dtype", "no NCCL data type"),
        ((4, "float32", {"like": "numpy"}), "like", "'torch', 'cupy'"),
        ((4, "float32", {"like": None}), "like", "like is None"),
        ((4, "float32", {"device": -1}), "device", "not -1"),
        ((4, "float32", {"device": True}), "device", "not True"),
        ((4, "float32", {"device": "0"}), "device", "not '0'"),
        ((4, "float32", {"comm": "comm"}), "comm", "a Communicator, not str"),
    ])
    def test_bad_arguments_name_the_argument_and_allocate_nothing(like, arguments, argument, words):
        shape, dtype, *keywords = arguments
        keywords = dict(keywords[0]) if keywords else {}
        keywords.setdefault("like", like)
        before = mem_calls()
        with pytest.raises(NcclInvalid) as info:
            ncclbind.empty(shape, dtype, **keywords)
        assert info.value.argument == argument, f"expected NcclInvalid naming {argument}, got {info.value!r}"
        assert words in str(info.value), f"expected {words!r} in {info.value}"
        assert mem_calls() == before, "nothing may be allocated for rejected arguments"

    def test_the_device_must_be_the_communicators(like, comm):
        before = mem_calls()
        with pytest.raises(NcclInvalid, match="device 1 is not the communicator's device 0") as info:
            ncclbind.empty(4, "float32", like=like, comm=comm, device=1)
        assert info.value.argument == "device"
        comm.destroy()
        with pytest.raises(NcclInvalid, match="destroyed"):
            ncclbind.empty(4, "float32", like=like, comm=comm)
        assert mem_calls() == before

    @pytest.mark.parametrize("library", ["torch", "cupy"])
    def test_without_the_library_an_import_error_and_nothing_allocated(monkeypatch, library):
        monkeypatch.setitem(sys.modules, library, None)  # import fails as if not installed
        before = mem_calls()
        with pytest.raises(ImportError, match=f"like='{library}'. needs {library}"):
            ncclbind.empty(4, "float32", like=library)
        assert mem_calls() == before

    # ---- a failure after the allocation frees it -------------------------------------------

    def test_a_failed_ncclMemAlloc_leaves_nothing(like):
        before = mem_calls()
        LIBRARY.fakeFailNextMemAlloc()
        with pytest.raises(NcclError):
            ncclbind.empty(4, "float32", like=like)
        assert mem_calls() == before

    def test_torch_failing_to_wrap_frees_the_memory(monkeypatch, torch):
        def refuse(obj):
            raise RuntimeError("no tensor today")

        monkeypatch.setattr(torch, "as_tensor", refuse)
        before = mem_calls()
        with pytest.raises(RuntimeError, match="no tensor today"):
            ncclbind.empty(4, "float32", like="torch")
        gc.collect()
        assert mem_calls() == (before[0] + 1, before[1] + 1), "expected the block freed once after the failure"

    def test_torch_copying_instead_of_wrapping_is_an_error_and_frees(monkeypatch, torch):
        wrap = torch.as_tensor
        monkeypatch.setattr(torch, "as_tensor", lambda obj: torch.Tensor(
            np.zeros(obj.nbytes, np.uint8), None, torch.uint8, 0) if wrap(obj) is not None else None)
        before = mem_calls()
        with pytest.raises(NcclError, match="did not wrap the NCCL memory"):
            ncclbind.empty(4, "float32", like="torch")
        gc.collect()
        assert mem_calls() == (before[0] + 1, before[1] + 1)

    def test_cupy_failing_to_wrap_frees_the_memory(monkeypatch, cupy):
        def refuse(*args, **kwargs):
            raise ValueError("unsupported dtype")

        monkeypatch.setattr(cupy, "ndarray", refuse)
        before = mem_calls()
        with pytest.raises(ValueError, match="unsupported dtype"):
            ncclbind.empty(4, "float32", like="cupy")
        gc.collect()
        assert mem_calls() == (before[0] + 1, before[1] + 1), "expected the block freed once after the failure"
