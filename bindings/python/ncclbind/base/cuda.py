"""The few CUDA runtime calls the binding needs: the current device (switched
and restored by CudaDeviceContext), pointer attributes, stream sync.

Backend: cuda-bindings (cuda.bindings.runtime) when it is importable, else the
extension's C helper that dlopens libcudart (the copy already in the process
first). NCCLBIND_CUDA_BACKEND=helper forces the helper. Nothing here uses ctypes.
"""
from __future__ import annotations

import os

from .. import _nccl

# cudaPointerGetAttributes' memory types
MEMORY_UNREGISTERED, MEMORY_HOST, MEMORY_DEVICE, MEMORY_MANAGED = 0, 1, 2, 3


class _HelperBackend:
    name = "ncclbind C helper (libcudart via dlopen)"
    get_device = staticmethod(_nccl.cuda_get_device)
    set_device = staticmethod(_nccl.cuda_set_device)
    device_count = staticmethod(_nccl.cuda_device_count)
    pointer_device = staticmethod(_nccl.cuda_pointer_device)
    stream_synchronize = staticmethod(_nccl.cuda_stream_synchronize)


class _CudaBindingsBackend:
    name = "cuda-bindings"

    def __init__(self, runtime):
        self.rt = runtime
        self.success = runtime.cudaError_t.cudaSuccess

    def _check(self, result, function):
        err = result[0]
        if err != self.success:
            from ..errors import NcclError
            raise NcclError(f"{function} failed: {err!r}", code=int(err), name=getattr(err, "name", "cudaError"),
                            function=function)
        return result[1] if len(result) > 1 else None

    def get_device(self) -> int:
        return self._check(self.rt.cudaGetDevice(), "cudaGetDevice")

    def set_device(self, device: int) -> None:
        self._check(self.rt.cudaSetDevice(device), "cudaSetDevice")

    def device_count(self) -> int:
        result = self.rt.cudaGetDeviceCount()
        return result[1] if result[0] == self.success else 0

    def pointer_device(self, address: int) -> tuple[int, int]:
        attributes = self._check(self.rt.cudaPointerGetAttributes(address), "cudaPointerGetAttributes")
        return int(attributes.type), int(attributes.device)

    def stream_synchronize(self, stream) -> None:
        self._check(self.rt.cudaStreamSynchronize(stream or 0), "cudaStreamSynchronize")


_backend = None


def backend():
    """The CUDA runtime backend in use (chosen at first use)."""
    global _backend
    if _backend is None:
        runtime = None
        if os.environ.get("NCCLBIND_CUDA_BACKEND", "") != "helper":
            try:
                from cuda.bindings import runtime
            except ImportError:
                try:
                    from cuda import cudart as runtime  # cuda-python < 12.6
                except ImportError:
                    runtime = None
        _backend = _CudaBindingsBackend(runtime) if runtime is not None else _HelperBackend()
    return _backend


def get_device() -> int:
    return backend().get_device()


def set_device(device: int) -> None:
    backend().set_device(device)


def device_count() -> int:
    """CUDA devices visible; 0 without a driver or device (never raises for that)."""
    try:
        return backend().device_count()
    except Exception:
        return 0


def pointer_device(address: int) -> tuple[int, int]:
    """(memory type, device) of an address (MEMORY_* above)."""
    return backend().pointer_device(address)


def stream_synchronize(stream: int | None = None) -> None:
    backend().stream_synchronize(stream)


class CudaDeviceContext:
    """Make `device` the current CUDA device inside the block and restore the
    previous one after it. device=None, or a machine without CUDA devices,
    changes nothing.

        with CudaDeviceContext(1):
            comm = Communicator.init(...)
    """

    __slots__ = ("device", "_previous")

    def __init__(self, device: int | None):
        self.device = device
        self._previous = None

    def __enter__(self) -> CudaDeviceContext:
        if self.device is not None:
            try:
                previous = get_device()
            except Exception:
                if device_count() == 0:  # no CUDA device at all: nothing to switch
                    return self
                raise
            if previous != self.device:
                set_device(self.device)
                self._previous = previous
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            set_device(self._previous)
            self._previous = None


class CudaDevice(int):
    """A CUDA device ordinal that also answers as nccl4py's `cuda.core` Device: it is the
    int (comparisons, indexing, f"{device}" keep working) with `.device_id`, and any other
    attribute (`sync()`, `set_current()`, `properties`, ...) is that of
    `cuda.core.Device(ordinal)`, made when first asked for (cuda.core must be installed then)."""

    __slots__ = ()

    @property
    def device_id(self) -> int:
        """The ordinal, as cuda.core's Device.device_id."""
        return int(self)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            from cuda.core import Device
        except ImportError:
            try:
                from cuda.core.experimental import Device
            except ImportError:
                raise AttributeError(f"CudaDevice.{name}: this is cuda.core.Device's attribute and "
                                     f"cuda.core is not installed (pip install cuda-core)") from None
        return getattr(Device(int(self)), name)

    def __repr__(self) -> str:
        return f"CudaDevice({int(self)})"

    __str__ = int.__repr__  # f"{device}" and str(device) stay "0"
