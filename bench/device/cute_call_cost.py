"""The host cost a CuTe DSL kernel call spends on ncclbind's arguments, without a GPU: the CuTe
DSL's own marshalling of one call's arguments (JitCompiledFunction.generate_execution_args, what
every call does before the launch), for the one-shot all-reduce kernel of
tests/multigpu/device/cute_oneshot.py (ncclbind's DevComm and Window, a tensor, three ints) beside
a kernel with the same tensor and ints and no NCCL argument, and ncclbind's two views alone.

    PYTHONPATH=bindings/python:<the CuTe DSL> NCCLBIND_NCCL_PATH=<2.30 or newer> \\
        python3 bench/device/cute_call_cost.py [CALLS]

Both kernels compile to SASS for sm_90a with ncclbind's compile-only placeholders; the host views
stand on placeholder resources (an address each), as a launch would read them. Best of 5 runs of
CALLS (20000) calls, in us. The launch itself (the CuTe DSL's execution engine) needs a GPU:
tests/multigpu/device/oneshot_bench.py's per-call columns."""
import os
import sys
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "multigpu",
                                "device"))

import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402
import numpy as np  # noqa: E402
from cutlass.cute.runtime import from_dlpack, make_fake_compact_tensor  # noqa: E402

import cute_oneshot  # noqa: E402
import ncclbind.device.cute as nc  # noqa: E402
from ncclbind.device.cute import runtime  # noqa: E402

THREADS = 256


@cute.kernel
def plain_kernel(dst: cute.Tensor, count: cutlass.Int32, iterations: cutlass.Int32):
    pass


@cute.jit
def plain_launch(dst: cute.Tensor, count: cutlass.Int32, iterations: cutlass.Int32, blocks: cutlass.Int32):
    plain_kernel(dst, count, iterations).launch(grid=[blocks, 1, 1], block=[THREADS, 1, 1])


def host_view(cls, **resource):
    """A DevComm or Window host view over a stand-in resource (the attributes a launch reads)."""
    view = object.__new__(cls)
    view._resource = types.SimpleNamespace(**resource)
    view._traced_from, view._handle, view._value, view._ptr = view._resource, None, None, None
    return view


def best_us(call, calls: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter_ns() - start) / calls)
    return best / 1000


def main() -> int:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    fake = make_fake_compact_tensor(cutlass.Float32, (4096,))
    ints = (cutlass.Int32(1),) * 3
    arch = "--gpu-arch sm_90a"
    oneshot = cute.compile(cute_oneshot.PROGRAMS["peer"], runtime.make_fake_dev_comm(), runtime.make_fake_window(),
                           fake, *ints, options=arch)
    plain = cute.compile(plain_launch, fake, *ints, options=arch)
    dev = host_view(nc.DevComm, ptr=0x1000)
    win = host_view(nc.Window, is_valid=True, handle=0x2000)
    dst = from_dlpack(np.zeros(4096, dtype=np.float32))
    count, one = cutlass.Int32(4096), cutlass.Int32(1)
    rows = [
        ("one-shot kernel: DevComm, Window, tensor, 3 Python ints",
         lambda: oneshot.generate_execution_args(dev, win, dst, 4096, 1, 1)),
        ("one-shot kernel: the same with cutlass.Int32 ints made once",
         lambda: oneshot.generate_execution_args(dev, win, dst, count, one, one)),
        ("no NCCL argument: tensor, 3 Python ints", lambda: plain.generate_execution_args(dst, 4096, 1, 1)),
        ("ncclbind DevComm.__c_pointers__", dev.__c_pointers__),
        ("ncclbind Window.__c_pointers__", win.__c_pointers__),
    ]
    print(f"{'arguments of one call (CuTe DSL ' + cutlass.__version__ + ')':62s} {'us':>7s}")
    for name, call in rows:
        print(f"{name:62s} {best_us(call, calls):7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
