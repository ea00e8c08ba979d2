"""CUDA C++ kernels on NCCL's device API, compiled from Python through
ncclbind.device.cuda_source against the loaded libnccl's headers, launched with the binding's
DevComm and windows: one process per GPU (spawned), the unique id made by the parent and handed
to each rank (no torch: the only libnccl in each process is the one ncclbind loads).

    python3 tests/multigpu/devapi/cuda_cpp_kernel.py [NRANKS]

For each cooperative-group kind (thread, warp, lanes, warp span with distinct ids, CTA):
  exchange: C++ API, LSA barrier sessions on the kind's groups, stores through peer pointers,
            each rank checks its whole window (kernel and host);
  exchange through the C ABI: the same with ncclCoopAnyInit*, ncclCoop{ThreadRank,Size,NumThreads,
            Sync}, every ncclLsaBarrierSession* function and ncclGetPeerPointerTeam (on NCCL 2.28.9
            over the wrapper's own ncclCoopAny), ncclCoopSize/NumThreads of every group checked;
  reduce:   the generated C-ABI wrapper (ncclCoopAnyInit*, ncclLsaBarrierSession*,
            ncclLsaReduceSum_F32) all-reduces a symmetric window; the host checks every element.
            Where the release's wrapper lacks functions of either (NCCL 2.28.9: ncclLsaReduceSum_F32),
            a SKIP line names them and the release that has them (the IR's table), and
            require_function must raise saying so.
Then the one-shot all-reduce (oneshot_kernel.cu through oneshot.py), checked element by element,
and capabilities: require_gin / require_multimem raise on a DevComm without GIN or multimem.
Prints PASS/FAIL/SKIP lines and "cuda_cpp_kernel: N ranks, P passed, F failed"; exits non-zero
on a failure.
"""
import multiprocessing
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import launch  # noqa: E402  (tests/multigpu/launch.py: NVLS off, the ranks' launch)

HERE = Path(__file__).parent
SLOT_INTS = 4096          # ints per peer slot of the exchange window
REDUCE_COUNT = 100_003    # floats all-reduced (odd: the chunks are not all equal)
# (kernel suffix, grid, block, groups): groups <= MAX_GROUPS, one LSA barrier each.
KINDS = [("thread", 1, 8, 8), ("warp", 1, 128, 4), ("lanes", 1, 32, 2), ("warp_span", 1, 128, 2), ("cta", 4, 128, 4)]
MAX_GROUPS = max(k[3] for k in KINDS)
C_ABI_BARRIER_FUNCTIONS = ["ncclCoopAnyInitThread", "ncclCoopAnyInitWarp", "ncclCoopAnyInitLanes",
                           "ncclCoopAnyInitWarpSpan", "ncclCoopAnyInitCta", "ncclCoopThreadRank", "ncclCoopSize",
                           "ncclCoopNumThreads", "ncclCoopSync", "ncclLsaBarrierSessionInit",
                           "ncclLsaBarrierSessionSync", "ncclLsaBarrierSessionArrive", "ncclLsaBarrierSessionWait",
                           "ncclLsaBarrierSessionDestroy", "ncclLsaBarrierSession_C_size", "ncclDevComm_LsaBarrier",
                           "ncclGetPeerPointerTeam"]
C_ABI_FUNCTIONS = ["ncclCoopAnyInitThread", "ncclCoopAnyInitWarp", "ncclCoopAnyInitLanes", "ncclCoopAnyInitWarpSpan",
                   "ncclCoopAnyInitCta", "ncclCoopThreadRank", "ncclCoopSize", "ncclCoopSync",
                   "ncclLsaBarrierSessionInit", "ncclLsaBarrierSessionSync", "ncclLsaBarrierSessionDestroy",
                   "ncclDevComm_LsaBarrier", "ncclLsaReduceSum_F32"]


class Report:
    def __init__(self, rank):
        self.rank, self.failures = rank, 0

    def check(self, ok, what):
        if not ok:
            self.failures += 1
        if self.rank == 0 or not ok:
            print(f"rank {self.rank}: {'PASS' if ok else 'FAIL'} {what}", flush=True)

    def skip(self, what):
        if self.rank == 0:
            print(f"rank {self.rank}: SKIP {what}", flush=True)


def source_values(numpy, rank, n):
    i = numpy.arange(n, dtype=numpy.int64)
    return ((rank + 1) * 3 + i % 11).astype(numpy.float32)   # small integers: every sum is exact


def run(comm, rank, nranks, report):
    import cupy
    import numpy

    import ncclbind
    from ncclbind.device import capabilities, cuda_source
    from ncclbind.errors import NcclStateError
    version = ncclbind.version_code()
    missing = cuda_source.missing_functions()
    lacking = [f for f in C_ABI_FUNCTIONS if f in missing]
    lacking_barrier = [f for f in C_ABI_BARRIER_FUNCTIONS if f in missing]
    defines = (() if lacking else ("-DNCCLBIND_HAVE_C_ABI_REDUCE",)) + \
        (() if lacking_barrier else ("-DNCCLBIND_HAVE_C_ABI_BARRIER",))
    module = cuda_source.compile_module((HERE / "coop_kernels.cu").read_text(), include_wrapper=True,
                                        options=defines)
    report.check(True, f"coop_kernels.cu compiled against NCCL {version}'s headers "
                       f"({cuda_source.nccl_include_dir()}) with the {cuda_source.header_set_version()} wrapper")
    dev = comm.create_dev_comm(ncclbind.NCCLDevCommRequirements(lsa_barrier_count=MAX_GROUPS))
    dev_buffer = cuda_source.dev_comm_buffer(dev)
    lsa_size = dev.dev_comm.lsaSize
    report.check(lsa_size == nranks, f"the LSA team spans every rank ({lsa_size} of {nranks})")

    # exchange: C++ API, every kind
    window_ints = lsa_size * SLOT_INTS
    exchange_buf = ncclbind.zeros(window_ints, "int32", like="cupy", comm=comm)
    cupy.cuda.Device().synchronize()
    win = comm.register_window(exchange_buf, flags=ncclbind._nccl.NCCL_WIN_COLL_SYMMETRIC)
    mismatch = cupy.zeros(4, dtype=cupy.int32)
    lsa_rank = dev.dev_comm.lsaRank
    runs = [("exchange", kind) for kind in KINDS]
    if lacking_barrier:
        skipped(report, cuda_source, missing, lacking_barrier, version, "exchange through the C ABI")
    else:
        runs += [("exchange_c", kind) for kind in KINDS]
    for round_, (prefix, (kind, grid, block, groups)) in enumerate(runs):
        mismatch.fill(0)
        kernel = module.get_function(f"{prefix}_{kind}")
        round_no = round_ % 7 + 1   # differs from the previous run's; (round << 28) stays an int
        args = (dev_buffer, cuda_source.window_handle(win), numpy.uint64(SLOT_INTS), numpy.int32(round_no), mismatch)
        info = cupy.full(2 * groups, -1, dtype=cupy.int32)
        kernel((grid,), (block,), args + ((info,) if prefix == "exchange_c" else ()))
        cupy.cuda.Device().synchronize()
        found = mismatch.get()
        what = "exchange" if prefix == "exchange" else "exchange through the C ABI"
        report.check(found[0] == 0, f"{what} {kind} ({groups} groups): kernel found {found[0]} wrong"
                                    + (f"; first: peer {found[1]} [{found[2]}] = {found[3]}" if found[0] else ""))
        if prefix == "exchange_c":
            expected_size = {"thread": 1, "warp": 32, "lanes": 16, "warp_span": 64, "cta": block}[kind]
            report.check(bool((info.get() == expected_size).all()),
                         f"{what} {kind}: ncclCoopSize, ncclCoopNumThreads of every group are {expected_size} "
                         f"({info.get().tolist()})")
        host = exchange_buf.get().reshape(lsa_size, SLOT_INTS)
        i = numpy.arange(SLOT_INTS, dtype=numpy.int64)
        wrong = 0
        for peer in range(lsa_size):
            writer = rank + (peer - lsa_rank)   # one LSA team spanning every rank: stride 1
            want = (round_no << 28) | ((writer + 1) << 16) | (i & 0xffff)
            wrong += int((host[peer] != want.astype(numpy.int32)).sum())
        report.check(wrong == 0, f"{what} {kind}: host read {wrong} of {host.size} ints wrong")
    win.close()

    # reduce: the C-ABI wrapper, every kind
    if lacking:
        skipped(report, cuda_source, missing, lacking, version, "reduce through the C ABI")
    else:
        src = ncclbind.empty(REDUCE_COUNT, "float32", like="cupy", comm=comm)
        src[...] = cupy.asarray(source_values(numpy, rank, REDUCE_COUNT))
        cupy.cuda.Device().synchronize()
        swin = comm.register_window(src, flags=ncclbind._nccl.NCCL_WIN_COLL_SYMMETRIC)
        want = sum(source_values(numpy, r, REDUCE_COUNT).astype(numpy.float64) for r in range(nranks))
        for kind, grid, block, groups in KINDS:
            dst = cupy.full(REDUCE_COUNT, -1.0, dtype=cupy.float32)
            sizes = cupy.zeros(groups, dtype=cupy.int32)
            kernel = module.get_function(f"reduce_{kind}")
            kernel((grid,), (block,), (dev_buffer, cuda_source.window_handle(swin), dst,
                                       numpy.uint64(REDUCE_COUNT), sizes))
            cupy.cuda.Device().synchronize()
            got = dst.get().astype(numpy.float64)
            bad = numpy.nonzero(got != want)[0]
            report.check(bad.size == 0, f"reduce {kind} through the C ABI: {bad.size} of {REDUCE_COUNT} wrong"
                                        + (f"; first [{bad[0]}] = {got[bad[0]]}, want {want[bad[0]]}" if bad.size else ""))
            expected_size = {"thread": 1, "warp": 32, "lanes": 16, "warp_span": 64, "cta": block}[kind]
            report.check(bool((sizes.get() == expected_size).all()),
                         f"reduce {kind}: ncclCoopSize of every group is {expected_size} ({sizes.get().tolist()})")
        swin.close()

    # the one-shot all-reduce the benchmark uses
    sys.path.insert(0, str(HERE))
    from oneshot import OneShotAllReduce
    op = OneShotAllReduce(comm, REDUCE_COUNT)
    op.input[...] = cupy.asarray(source_values(numpy, rank, REDUCE_COUNT))
    cupy.cuda.Device().synchronize()
    comm_barrier(comm, cupy)
    out = cupy.full(REDUCE_COUNT, -1.0, dtype=cupy.float32)
    op(out, REDUCE_COUNT)
    cupy.cuda.Device().synchronize()
    want = sum(source_values(numpy, r, REDUCE_COUNT).astype(numpy.float64) for r in range(nranks))
    bad = numpy.nonzero(out.get().astype(numpy.float64) != want)[0]
    report.check(bad.size == 0, f"one-shot all-reduce ({'ncclLsaReduceSum' if op.uses_lsa_reduce_sum else 'peer loop'}):"
                                f" {bad.size} of {REDUCE_COUNT} wrong")
    op.close()

    # capabilities: GIN on one host, multimem with NVLS off
    for check_fn, name in ((capabilities.require_gin, "GIN"), (capabilities.require_multimem, "multimem")):
        has = (capabilities.has_gin if name == "GIN" else capabilities.has_multimem)(dev)
        try:
            check_fn(dev)
            report.check(has, f"require_{name.lower()} passes: the DevComm has {name}")
        except NcclStateError as e:
            report.check(not has, f"require_{name.lower()} raises before any launch: {str(e)[:90]}...")
    dev.close()


def skipped(report, cuda_source, missing, lacking, version, what):
    """A SKIP line naming what the release's wrapper lacks and from which release (the IR's table),
    and require_function must refuse the first of them saying so."""
    from ncclbind.errors import NcclSymbolNotFoundError
    need = sorted({missing[f] or "none" for f in lacking})
    report.skip(f"{what}: NCCL {version}'s wrapper lacks {', '.join(lacking)} (needs NCCL >= {', '.join(need)})")
    try:
        cuda_source.require_function(lacking[0])
        report.check(False, f"require_function({lacking[0]!r}) raises on this release")
    except NcclSymbolNotFoundError as e:
        report.check("needs NCCL >=" in str(e) and "loaded" in str(e), f"require_function says: {e}")


def comm_barrier(comm, cupy):
    """Every rank's writes to its window are done before any kernel reads them: an all_reduce."""
    token = cupy.zeros(1, dtype=cupy.float32)
    comm.all_reduce(token, token)
    cupy.cuda.Device().synchronize()


def rank_main(rank, nranks, uid_bytes):
    import ncclbind
    ncclbind.library_info("nccl")  # ncclbind's libnccl in the process before any other library's
    import cupy
    cupy.cuda.Device(rank).use()
    report = Report(rank)
    try:
        uid = ncclbind.UniqueId.from_bytes(uid_bytes)
        with ncclbind.Communicator.init(nranks, rank, uid, device=rank) as comm:
            run(comm, rank, nranks, report)
    except Exception:  # noqa: BLE001 - reported as a failure of this rank
        traceback.print_exc()
        report.failures += 1
    print(f"rank {rank}: {report.failures} failed", flush=True)
    sys.exit(1 if report.failures else 0)


def gpu_count(queue):
    """In a child process: this one spawns the ranks and keeps no CUDA context of its own."""
    try:
        import cupy
        queue.put(cupy.cuda.runtime.getDeviceCount())
    except Exception as e:  # noqa: BLE001 - no driver, no device: the reason is printed
        queue.put(f"{type(e).__name__}: {e}")


def main():
    try:
        import cupy  # noqa: F401
        import numpy  # noqa: F401

        import ncclbind
    except ImportError as e:
        print(f"SKIPPED: {e}")
        return 0
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    probe = ctx.Process(target=gpu_count, args=(queue,))
    probe.start()
    probe.join(120)
    devices = queue.get() if not queue.empty() else "the probe gave no answer"
    if not isinstance(devices, int):
        print(f"SKIPPED: no GPU ({devices})")
        return 0
    nranks = launch.ranks_to_run(sys.argv[1:], devices)
    if nranks is None:
        return 0
    return launch.run_ranks(rank_main, nranks, (ncclbind.get_unique_id().to_bytes(),), timeout=240,
                            name="cuda_cpp_kernel")


if __name__ == "__main__":
    sys.exit(main())
