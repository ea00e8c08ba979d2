"""What the device-API rank programs (numba_ranks.py, cute_ranks.py) check alike: a PASS/FAIL
report, the refusal of a function the loaded release lacks, the values every coop kind must give,
and the host-side refusals of GIN and multimem where the machine has none. Imports neither Numba
nor the CuTe DSL."""
import os

import numpy as np

LANE_MASK = 0x0F0F0F0F
COOP_KINDS = ("cta", "warp", "thread", f"lanes({LANE_MASK:#x})", "warp spans (ids 1, 2)")


class Report:
    def __init__(self, rank):
        self.rank, self.passed, self.failed = rank, 0, 0

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"rank {self.rank}: PASS {what}", flush=True)
        else:
            self.failed += 1
            print(f"rank {self.rank}: FAIL {what} {detail}", flush=True)

    def compare(self, got, want, what):
        got, want = np.asarray(got), np.asarray(want)
        bad = np.flatnonzero(got.ravel() != want.ravel())
        self.check(bad.size == 0, what,
                   f"({bad.size} of {want.size} elements differ; first at {bad[:3].tolist()}: got "
                   f"{got.ravel()[bad[:3]].tolist()}, want {want.ravel()[bad[:3]].tolist()})" if bad.size else "")


def refused(report, compile_kernel, what):
    """On a release that lacks a function the kernel calls: compiling must raise
    NcclSymbolNotFoundError naming one of them and the releases that have it, as
    cuda_source.require_function words it from the wrapper table."""
    from ncclbind.device import cuda_source
    from ncclbind.errors import NcclSymbolNotFoundError
    expected = []
    for function in cuda_source.missing_functions():
        try:
            cuda_source.require_function(function)
        except NcclSymbolNotFoundError as refusal:
            expected.append(str(refusal))
    try:
        compile_kernel()
    except Exception as error:  # noqa: BLE001 - the error itself is what is checked
        text = str(error)
        named = [m for m in expected if text.splitlines()[0] == m]
        report.check(type(error).__name__ == "NcclSymbolNotFoundError" and bool(named),
                     f"{what}: refused at compile time ({text.splitlines()[0]})")
        return
    report.check(False, f"{what}: compiled although the release lacks functions it calls")


def expected_coop(threads):
    """[kind, (thread_rank, size, num_threads), thread] for a block of `threads` (4 warps): cta,
    warp, thread, lanes(LANE_MASK) (-1 outside the mask), warp spans of 2 warps."""
    t = np.arange(threads)
    want = np.full((5, 3, threads), -1, dtype=np.int32)
    # One row per quantity; NumPy cannot broadcast a list mixing the per-thread array with scalars.
    want[0, 0], want[0, 1], want[0, 2] = t, threads, threads
    want[1, 0], want[1, 1], want[1, 2] = t % 32, 32, 32
    want[2, 0], want[2, 1], want[2, 2] = 0, 1, 1
    lane = t % 32
    inside = ((LANE_MASK >> lane) & 1).astype(bool)
    below = np.array([bin(LANE_MASK & ((1 << n) - 1)).count("1") for n in lane])
    members = bin(LANE_MASK).count("1")
    want[3, 0] = np.where(inside, below, -1)
    want[3, 1] = np.where(inside, members, -1)
    want[3, 2] = np.where(inside, members, -1)
    want[4, 0], want[4, 1], want[4, 2] = t % 64, 64, 64
    return want


def gin_and_multimem_refused(report, dev, win):
    """On a machine without GIN or multicast (one host, NVLS off): the host-side checks refuse
    them before any kernel is launched. Returns the GIN context index where GIN is present."""
    import ncclbind
    from ncclbind.device import gin_context, multimem_window
    gin_index = None
    try:
        gin_index = gin_context(dev, 0)
    except ncclbind.NcclError as error:
        report.check(type(error).__name__ == "NcclStateError" and "GIN" in str(error) and "ncclGin" in str(error),
                     f"ncclGin on a DevComm without GIN: gin_context refuses it before launch ({error})")
    try:
        multimem_window(dev, win)
        report.check(os.environ.get("NCCL_NVLS_ENABLE") != "0", "multimem_window accepted a DevComm although NVLS is off")
    except ncclbind.NcclError as error:
        report.check(type(error).__name__ == "NcclStateError" and "multicast" in str(error)
                     and "multimem pointer" in str(error),
                     f"multimem pointer with NVLS off: multimem_window refuses it before launch ({error})")
    return gin_index
