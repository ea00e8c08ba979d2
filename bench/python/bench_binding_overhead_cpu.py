"""The binding's own cost per all_reduce call, measured on a CPU: no GPU, no
CUDA, no NCCL work to blur it. The library is the stand-in libnccl of the
tests (tests/python/fake_nccl.c, built here with the C compiler unless
--fake-nccl names a built one): its ncclAllReduce checks its arguments and
copies 2 floats on host memory, so what is left is the call path itself.

    python3 bench/python/bench_binding_overhead_cpu.py [--iterations 200000] [--repeats 15] [--json out.json]

Rows, each an out-of-place all-reduce of 2 float32 on stream 0:
  raw C            ncclAllReduce in a C loop through a plain function pointer
                   (bench/python/bench_loop.c, synchronize=False)
  generated        ncclbind._nccl.all_reduce with ints
  torch-like       Communicator.all_reduce on stand-ins for torch tensors whose
                   data_ptr() and numel() are C builtins, as torch's are
  CAI              ... on __cuda_array_interface__ objects (resolved each call)
  CuPy-like        ... on stand-ins for CuPy arrays (a __slots__ class named
                   ndarray in a module named cupy: not weakly referenceable)
  CuPy-like, weakref  ... the same with __weakref__, as CuPy's own arrays have
                   (cached like torch tensors, without the probe)
  NcclBuffer       ... on explicit NcclBuffer(pointer, count, dtype, device)
  ... reference    Communicator.all_reduce.__wrapped__, the Python definition
                   (ncclbind.base.calls) that runs when the fast path declines
Rows are measured interleaved (each repeat takes every row in turn) and the
best of --repeats is reported, in ns per call and ns over raw C. The Python
rows include their `for` loop (about 15 ns per call), as in bench_allreduce.py.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import types

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_raw_loop():
    """ncclAllReduce from a C loop (bench/python/bench_loop.c, built on first use)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import raw_loop
    return raw_loop.raw_all_reduce_loop()


def build_fake_nccl(directory: str) -> str:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not compiler:
        sys.exit("no C compiler to build tests/python/fake_nccl.c; pass --fake-nccl")
    out = os.path.join(directory, "libnccl.so.2")
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-o", out,
                    str(ROOT / "tests" / "python" / "fake_nccl.c")], check=True)
    return out


def install_standins(np):
    """torch and cupy modules with just what ncclbind reads (see buffer.py)."""
    torch = types.ModuleType("torch")

    class dtype:
        def __init__(self, name):
            self.name = name

        def __str__(self):
            return f"torch.{self.name}"

    dtype.__module__ = "torch"
    torch.float32 = dtype("float32")

    class Tensor:
        """data_ptr and numel are bound builtins (int.__int__ of the values), so
        calling them costs what a C method costs, close to torch's."""

        __slots__ = ("array", "data_ptr", "numel", "dtype", "is_cuda", "__weakref__")

        def __init__(self, values):
            self.array = np.ascontiguousarray(np.asarray(values, dtype=np.float32))
            self.data_ptr = self.array.ctypes.data.__int__
            self.numel = self.array.size.__int__
            self.dtype, self.is_cuda = torch.float32, True

        def is_contiguous(self):
            return True

        def get_device(self):
            return 0

    torch.Tensor = Tensor

    cupy = types.ModuleType("cupy")

    class MemoryPointer:
        __slots__ = ("ptr", "device_id")

        def __init__(self, ptr, device_id):
            self.ptr, self.device_id = ptr, device_id

    class ndarray:  # noqa: N801 - the name the resolver looks for
        __slots__ = ("array", "data", "size", "dtype", "shape", "strides", "_c_contiguous")

        def __init__(self, values):
            self.array = np.ascontiguousarray(np.asarray(values, dtype=np.float32))
            self.data = MemoryPointer(self.array.ctypes.data, 0)
            self.size, self.dtype = self.array.size, self.array.dtype
            self.shape, self.strides, self._c_contiguous = self.array.shape, self.array.strides, True

    class weakly_referenceable(ndarray):  # noqa: N801 - as CuPy's own (its _ndarray_base has __weakref__)
        __slots__ = ("__weakref__",)

    cupy.ndarray = ndarray
    sys.modules["torch"], sys.modules["cupy"] = torch, cupy
    return torch, cupy, weakly_referenceable


class DeviceArray:
    """__cuda_array_interface__ over host memory (no CUDA driver: taken for device memory)."""

    def __init__(self, array):
        self.array = array
        self._interface = {"shape": array.shape, "typestr": array.dtype.str,
                           "data": (array.ctypes.data, False), "version": 3, "strides": None, "stream": None}

    @property
    def __cuda_array_interface__(self):
        return dict(self._interface)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=200000, help="calls per row per repeat")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--fake-nccl", help="a built tests/python/fake_nccl.c (default: build one)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    scratch = tempfile.mkdtemp(prefix="ncclbind-bench-")
    library = os.path.abspath(args.fake_nccl or build_fake_nccl(scratch))
    # Chosen once per process, before ncclbind loads anything; no CUDA device may
    # contradict host memory standing in for device memory.
    os.environ["NCCLBIND_NCCL_PATH"] = library
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ["NCCLBIND_CUDA_BACKEND"] = "helper"
    try:
        import ncclbind
    except ImportError:
        sys.path.insert(0, str(ROOT / "bindings" / "python"))  # an in-place build
        import ncclbind
    import numpy as np

    import ncclbind._nccl as low
    from ncclbind import NcclDataType, NcclRedOp

    torch, cupy, cupy_weakly_referenceable = install_standins(np)
    comm = ncclbind.Communicator.init(1, 0, ncclbind.get_unique_id())
    h, n = comm.handle, args.iterations
    x, y = np.ones(2, np.float32), np.zeros(2, np.float32)
    xp, yp = x.ctypes.data, y.ctypes.data
    rows, skipped = {}, {}

    raw_loop = load_raw_loop()

    def raw(count):
        raw_loop(h, xp, yp, 2, 7, 0, count, False)

    rows["raw C ncclAllReduce loop"] = raw

    def generated(count, f=low.all_reduce, f32=NcclDataType.FLOAT32, ssum=NcclRedOp.SUM):
        for _ in range(count):
            f(xp, yp, 2, f32, ssum, h, 0)

    rows["ncclbind._nccl.all_reduce (generated)"] = generated

    pairs = {"torch-like": (torch.Tensor([1, 2]), torch.Tensor([0, 0])),
             "CAI": (DeviceArray(np.ones(2, np.float32)), DeviceArray(np.zeros(2, np.float32))),
             "CuPy-like": (cupy.ndarray([1, 2]), cupy.ndarray([0, 0])),
             "CuPy-like, weakref": (cupy_weakly_referenceable([1, 2]), cupy_weakly_referenceable([0, 0])),
             "NcclBuffer": (ncclbind.NcclBuffer(xp, 2, "float32", 0), ncclbind.NcclBuffer(yp, 2, "float32", 0))}
    for kind, (a, b) in pairs.items():
        def collective(count, a=a, b=b, ar=comm.all_reduce):
            for _ in range(count):
                ar(a, b, stream=0)

        rows[f"Communicator.all_reduce ({kind})"] = collective
    reference = getattr(type(comm).all_reduce, "__wrapped__", None)
    if reference is None:
        skipped["... reference path"] = "this ncclbind's all_reduce has no Python definition behind a fast path"
    else:
        for kind in ("torch-like", "CuPy-like"):
            def resolving(count, a=pairs[kind][0], b=pairs[kind][1], ar=reference, ssum=NcclRedOp.SUM, c=comm):
                for _ in range(count):
                    ar(c, a, b, ssum, stream=0)

            rows[f"  reference path ({kind})"] = resolving

    for name, loop in list(rows.items()):
        try:
            loop(1000)  # warm-up: first-call resolution, caches
        except Exception as e:  # a row that cannot run is reported, not measured
            skipped[name] = repr(e)
            del rows[name]
    best = {name: float("inf") for name in rows}
    for _ in range(args.repeats):
        for name, loop in rows.items():
            t = time.perf_counter()
            loop(n)
            best[name] = min(best[name], (time.perf_counter() - t) / n)
    assert y.tolist() == [1.0, 1.0]
    comm.destroy()
    shutil.rmtree(scratch, ignore_errors=True)

    raw_ns = best.get("raw C ncclAllReduce loop", 0.0) * 1e9
    print(f"2-float all-reduce, stand-in libnccl, {n} calls per row, best of {args.repeats} "
          f"(Python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    print(f"{'':46} {'ns/call':>9} {'+ns vs raw C':>13}")
    results = {}
    for name, seconds in best.items():
        ns = seconds * 1e9
        results[name] = ns
        print(f"{name:46} {ns:9.1f} {ns - raw_ns:13.1f}")
    for name, why in skipped.items():
        print(f"{name:46} skipped: {why}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"ns_per_call": results, "skipped": skipped}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
