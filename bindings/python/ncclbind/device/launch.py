"""A Numba kernel launched with one driver call: the launch configuration and the arguments
prepared once, every later launch one cuLaunchKernel.

    from ncclbind.device import prepared_launch
    launch = prepared_launch(all_reduce, blocks, threads, (comm_arg, win_arg, dst, count), stream=s)
    for _ in range(iterations):
        launch()                     # the same kernel, arguments and stream each time

`kernel[blocks, threads](*args)` does, at every call, what prepared_launch does once: it builds
a launch configuration, types each argument to find the compiled kernel, marshals the arguments
(an array into its data pointer, shape and strides) and hands them to cuda.core's launch, some
10 to 20 us of host time, more than a small collective takes on the GPU. The arguments must
stay what they were: device arrays (a host array would need a copy at every launch: refused),
scalars fixed at preparation; prepare another launch for other ones (a few tens of us)."""
from __future__ import annotations

import ctypes
from typing import Any, Sequence

from ..base.streams import stream_handle
from ..errors import NcclInvalid, NcclUnhandledCudaError

__all__ = ["PreparedLaunch", "prepared_launch"]


def _dim3(value: Any, argument: str) -> tuple[int, int, int]:
    dims = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims):
        raise NcclInvalid(f"{argument} must be a positive int or a tuple of 1 to 3 of them, not {value!r}", argument)
    return tuple(dims) + (1,) * (3 - len(dims))  # type: ignore[return-value]


def _c_value(value: Any) -> Any:
    """One flattened kernel argument as the ctypes object whose bytes the driver copies: numba
    passes ctypes scalars as such, a Python int as a pointer-sized integer (a pointer, a size, a
    stride), a bool as one byte."""
    if isinstance(value, ctypes._SimpleCData):
        return value
    if isinstance(value, bool):
        return ctypes.c_bool(value)
    if isinstance(value, int):
        return ctypes.c_uint64(value % (1 << 64))
    raise NcclInvalid(f"a kernel argument flattened to {type(value).__name__}, which a prepared launch cannot "
                      f"pass; launch this kernel through its dispatcher", "args")


class PreparedLaunch:
    """One compiled Numba kernel with its grid, block, dynamic shared memory, stream and
    arguments, launched by calling it (a cuLaunchKernel through cuda-bindings, the driver binding
    numba-cuda uses). Keeps the arguments alive. Launch it with the device it was prepared on
    current (numba's cuda.select_device)."""

    def __init__(self, dispatcher: Any, griddim: Any, blockdim: Any, args: Sequence[Any], stream: Any = None,
                 sharedmem: int = 0):
        from cuda.bindings import driver
        if not hasattr(dispatcher, "typeof_pyval") or not hasattr(dispatcher, "compile"):
            raise NcclInvalid(f"kernel must be a Numba-CUDA kernel (@cuda.jit), not {type(dispatcher).__name__}",
                              "kernel")
        if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
            raise NcclInvalid(f"args must be a tuple of the kernel's arguments, not {type(args).__name__}", "args")
        if isinstance(sharedmem, bool) or not isinstance(sharedmem, int) or sharedmem < 0:
            raise NcclInvalid(f"sharedmem must be an int >= 0, not {sharedmem!r}", "sharedmem")
        self.griddim, self.blockdim = _dim3(griddim, "griddim"), _dim3(blockdim, "blockdim")
        self.sharedmem = sharedmem
        self.stream = stream_handle(stream)
        argtypes = tuple(dispatcher.typeof_pyval(a) for a in args)
        self.kernel = dispatcher.compile(argtypes)  # the overload a call with these arguments would launch
        if getattr(self.kernel, "debug", False):
            raise NcclInvalid("the kernel is compiled with debug=True: launch it through its dispatcher, which "
                              "reads the exception state after each launch", "kernel")
        flattened: list[Any] = []
        for i, (argtype, value) in enumerate(zip(argtypes, args)):
            copies: list[Any] = []
            self.kernel._prepare_args(argtype, value, 0, copies, flattened)
            if copies:
                raise NcclInvalid(f"args[{i}] is host memory ({type(value).__name__}), which a launch would copy to the "
                                  f"device each time: pass a device array", f"args[{i}]")
        self._values = [_c_value(v) for v in flattened]
        self._pointers = (ctypes.c_void_p * max(1, len(self._values)))(
            *[ctypes.addressof(v) for v in self._values])
        self._args = tuple(args)  # the device memory the pointers name stays allocated
        cufunc = self.kernel._codelibrary.get_cufunc()
        self.registers, self.local_bytes = cufunc.attrs.regs, cufunc.attrs.local
        self._function = driver.CUfunction(int(cufunc.handle))  # a CUkernel: cuLaunchKernel takes either
        self._stream = driver.CUstream(self.stream)
        self._success = driver.CUresult.CUDA_SUCCESS
        self._launch = driver.cuLaunchCooperativeKernel if self.kernel.cooperative else driver.cuLaunchKernel
        self._extra = () if self.kernel.cooperative else (0,)
        self._call = (self._function, *self.griddim, *self.blockdim, sharedmem, self._stream,
                      ctypes.addressof(self._pointers), *self._extra)

    def __call__(self) -> None:
        result = self._launch(*self._call)[0]
        if result != self._success:
            what = self._launch.__name__
            raise NcclUnhandledCudaError(f"{what} of {self.kernel.py_func.__name__} failed: {result.name}",
                                         code=int(result), function=what)

    def __repr__(self) -> str:
        return (f"<PreparedLaunch grid={self.griddim} block={self.blockdim} sharedmem={self.sharedmem} "
                f"stream={self.stream:#x} registers={self.registers} local={self.local_bytes} B>")


def prepared_launch(kernel: Any, griddim: Any, blockdim: Any, args: Sequence[Any], stream: Any = None,
                    sharedmem: int = 0) -> PreparedLaunch:
    """`kernel[griddim, blockdim, stream, sharedmem](*args)` prepared once: calling the result
    launches it again with one driver call. Compiles the kernel for these arguments if it is not
    yet (as the first call would). stream: None (the default stream), an int handle, a Numba, torch
    or CuPy stream, or an object with __cuda_stream__. A host array among args is refused
    (NcclInvalid naming it), as is a kernel compiled with debug=True."""
    return PreparedLaunch(kernel, griddim, blockdim, args, stream, sharedmem)
