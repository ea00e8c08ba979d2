"""One-shot small-message all-reduce (float32 sum) over a symmetric window on every GPU of the
machine, five ways, one process per GPU:

- nccl: Communicator.all_reduce (ncclAllReduce) on the window's buffer;
- cuda c++: oneshot_kernel.cu (NCCL's C++ device API, ncclCoopCta), compiled with
  ncclbind.device.cuda_source.compile_module and launched with CuPy;
- numba: the same kernel written with ncclbind.device.intrinsics (below), compiled with
  link-time optimization (numba-cuda's default where nvJitLink is), launched with
  ncclbind.device.prepared_launch (one cuLaunchKernel per call); "numba disp" is the same kernel
  launched through Numba's dispatcher, kernel[blocks, threads](*args);
- cute reduce: the same kernel in the CuTe DSL over ncclbind.device.cute (cute_oneshot.py),
  launched through its compiled function; cute peer: the CuTe kernel summing over peer
  pointers itself, which every release has (it compares ncclbind's bitcode on 2.28.9 with
  NCCL's on 2.32.3). Without the CuTe DSL these columns are left out, saying why.

Each kernel: per block, LSA barrier, ncclLsaReduceSum of its chunk, LSA barrier. Latency per call
back to back (CUDA events over ITERS calls after WARMUP), 8 B to 1 MiB; then the device work alone
(loop: the kernels repeat the barrier-reduce-barrier ITERS times inside one launch). Every result
is checked element by element against the sum of the ranks' inputs before it is timed; a wrong
one is a FAIL line and exit status 1. Rank 0 first prints the C++ kernel's registers and local
memory per thread, how ncclbind.device links the wrapper (LTO-IR, else why not) and each CuTe
kernel's compile time.

    python3 tests/multigpu/device/oneshot_bench.py [NRANKS]     # ONESHOT_JSON=rows.json: the rows too

Goals (reported, not asserted): numba and cute within 1.1x of cuda c++ (and cute of numba), and
below nccl from 8 B to 64 KiB. The C++ and Numba kernels need LsaReduceSum (NCCL 2.29.7 or newer);
on an older release only nccl and cute peer run (nothing at all without the CuTe DSL: it says so
and exits 0)."""
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import launch  # noqa: E402  (tests/multigpu/launch.py: NVLS off, the ranks' launch)

# ncclbind's libnccl (NCCLBIND_NCCL_PATH) must be in the process before torch, which links its own
# libnccl.so.2: the first one loaded is the one both use. This runs in every spawned rank too (the
# children import this module as __mp_main__) before rank_main imports torch.
import ncclbind  # noqa: E402,F401

NCCL = launch.loaded_nccl()
# Before numba: ncclbind.device's NumPy alias that numba-cuda 0.30 needs at import (NumPy 2.4+).
from ncclbind.device import numba_compat  # noqa: E402,F401
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from ncclbind.device import intrinsics as nd  # noqa: E402

SIZES = [8, 64, 512, 4096, 16384, 65536, 262144, 1048576]
WARMUP, ITERS = 20, 200
THREADS = 256  # the C++ kernel takes ~250 registers per thread (NCCL's unrolled reduce): 512 threads do not fit a block
MAX_BLOCKS = 16
HERE = os.path.dirname(os.path.abspath(__file__))


def blocks_for(count):
    return max(1, min(MAX_BLOCKS, (count + 8191) // 8192))


@cuda.jit
def oneshot_all_reduce(comm_arg, win_handle, dst, count):
    comm = nd.dev_comm(comm_arg)
    win = nd.window(win_handle)
    team = comm.team_lsa()
    coop = nd.coop_cta()
    bar = nd.lsa_barrier_session(coop, comm, team, comm.lsa_barrier(), cuda.blockIdx.x)
    per = (count + cuda.gridDim.x - 1) // cuda.gridDim.x
    first = per * cuda.blockIdx.x
    n = min(per, count - first) if first < count else 0
    bar.sync(coop, nd.MEMORY_ORDER_RELAXED)
    nd.lsa_reduce_sum(coop, win, first * 4, dst[first:], n, team)
    bar.sync(coop, nd.MEMORY_ORDER_RELEASE)


@cuda.jit
def oneshot_all_reduce_loop(comm_arg, win_handle, dst, count, iterations):
    comm = nd.dev_comm(comm_arg)
    win = nd.window(win_handle)
    team = comm.team_lsa()
    coop = nd.coop_cta()
    bar = nd.lsa_barrier_session(coop, comm, team, comm.lsa_barrier(), cuda.blockIdx.x)
    per = (count + cuda.gridDim.x - 1) // cuda.gridDim.x
    first = per * cuda.blockIdx.x
    n = min(per, count - first) if first < count else 0
    for _ in range(iterations):
        bar.sync(coop, nd.MEMORY_ORDER_RELAXED)
        nd.lsa_reduce_sum(coop, win, first * 4, dst[first:], n, team)
        bar.sync(coop, nd.MEMORY_ORDER_RELEASE)


def inputs(rank, count):
    return ((rank + np.arange(count)) % 7 + 1).astype(np.float32)


def timed(torch, call, iters):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        call()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1000.0 / iters  # microseconds per call


def report(rows, kernels, loops, nranks):
    """The table (microseconds per call; loop: per round inside one launch), the goals, and the
    rows as JSON ($ONESHOT_JSON) for comparing runs on two releases."""
    columns = ["nccl"] + kernels + [name + " loop" for name in loops]
    print("\n" + " ".join(f"{c:>13}" for c in ["size"] + columns), flush=True)
    for row in rows:
        print(" ".join([f"{row['size']:>13}"] + [f"{row[c]:13.2f}" for c in columns]), flush=True)

    def ratio(a, b, rows_=rows):
        return max(r[a] / r[b] for r in rows_) if all(a in r and b in r for r in rows_) else None

    small = [r for r in rows if r["size"] <= 65536]
    lines = []
    for a, b, what in (("numba loop", "cuda c++ loop", "numba/c++ (loop)"),
                       ("cute reduce loop", "cuda c++ loop", "cute/c++ (loop)"),
                       ("cute reduce loop", "numba loop", "cute/numba (loop)")):
        worst = ratio(a, b)
        if worst is not None:
            lines.append(f"{what} <= 1.1 at every size: {'met' if worst <= 1.1 else 'not met'} (worst {worst:.2f})")
    for name in ("numba", "cute reduce", "cute peer"):
        if all(name in r for r in small):
            below = all(r[name] < r["nccl"] for r in small)
            lines.append(f"{name} below nccl at 8 B-64 KiB (per call): {'met' if below else 'not met'}")
    print("goals, " + str(nranks) + " ranks: " + "; ".join(lines), flush=True)
    if os.environ.get("ONESHOT_JSON"):
        import json
        with open(os.environ["ONESHOT_JSON"], "w") as f:
            json.dump({"nccl": str(NCCL.version), "ranks": nranks, "rows": rows}, f, indent=1)


def rank_main(rank, nranks, port, failures):
    import cupy
    import torch
    import torch.distributed as dist

    import ncclbind
    from ncclbind.device import cuda_source, kernel_arg, linking, prepared_launch
    sys.path.insert(0, HERE)  # cute_oneshot.py
    torch.cuda.set_device(rank)
    cuda.select_device(rank)
    cupy.cuda.Device(rank).use()
    store = dist.TCPStore("127.0.0.1", port, nranks, rank == 0)
    comm = ncclbind.Communicator.init(nranks, rank, ncclbind.UniqueId.share_store(store, rank), device=rank)
    failed = 0

    def fail(what):
        nonlocal failed
        failed += 1
        print(f"rank {rank}: FAIL {what}", flush=True)

    try:
        missing = cuda_source.missing_functions()
        have_reduce = "ncclLsaReduceSum_F32" not in missing and "ncclCoopAnyInitCta" not in missing
        try:
            import cute_oneshot
            from cutlass.cute.runtime import from_dlpack
        except ImportError as error:  # no CuTe DSL here: its columns are left out, saying why
            cute_oneshot = None
            if rank == 0:
                print(f"cute: not run ({error})", flush=True)
        if not have_reduce and cute_oneshot is None:
            if rank == 0:
                print(f"SKIPPED: the one-shot kernels need NCCL >= "
                      f"{missing.get('ncclLsaReduceSum_F32') or missing.get('ncclCoopAnyInitCta')}", flush=True)
            return
        dev = comm.create_dev_comm(ncclbind.NCCLDevCommRequirements(lsa_barrier_count=MAX_BLOCKS))
        pool = ncclbind.NcclMemoryResource(device=rank)
        block = pool.allocate(max(SIZES))
        window = torch.as_tensor(block).view(torch.uint8)[:max(SIZES)].view(torch.float32)
        win = comm.register_window(window, flags=ncclbind._nccl.NCCL_WIN_COLL_SYMMETRIC)
        kernels = {}  # name: (run(count, iterations), its output's host copy)
        if have_reduce:
            comm_arg = kernel_arg(dev)
            comm_ptr = np.uint64(comm_arg.device_ctypes_pointer.value)
            started = time.perf_counter()
            with open(os.path.join(HERE, "oneshot_kernel.cu")) as f:
                # NCCL's reduce/copy functions need device lambdas
                cxx = cuda_source.compile_module(f.read(), options=["--extended-lambda"]).get_function(
                    "oneshot_all_reduce_cxx")
            cxx_compile_s = time.perf_counter() - started
            win_arg = kernel_arg(win)
            dst_nb = cuda.to_device(np.zeros(max(SIZES) // 4, np.float32))
            dst_cxx = cupy.zeros(max(SIZES) // 4, cupy.float32)

            def run_cxx(count, iterations=1):
                cxx((blocks_for(count),), (THREADS,), (comm_ptr, win_arg, dst_cxx, np.uint64(count),
                                                       np.int32(iterations)))

            launches = {}

            def run_numba(count, iterations=1):  # one prepared launch per size and form
                key = (count, iterations)
                if key not in launches:
                    kernel = oneshot_all_reduce if iterations == 1 else oneshot_all_reduce_loop
                    args = (comm_arg, win_arg, dst_nb, count) + (() if iterations == 1 else (iterations,))
                    launches[key] = prepared_launch(kernel, blocks_for(count), THREADS, args)
                launches[key]()

            def run_numba_dispatcher(count, iterations=1):
                oneshot_all_reduce[blocks_for(count), THREADS](comm_arg, win_arg, dst_nb, count)

            started = time.perf_counter()  # the first launch compiles and links (every rank: its barriers)
            run_numba(SIZES[0] // 4)
            cuda.synchronize()
            if rank == 0:
                print(f"cuda c++: compiled in {cxx_compile_s:.2f} s (cuda_source.compile_module); numba: compiled, "
                      f"linked and launched in {time.perf_counter() - started:.2f} s (its first prepared launch)",
                      flush=True)
            kernels["cuda c++"] = (run_cxx, lambda count: cupy.asnumpy(dst_cxx[:count]))
            kernels["numba"] = (run_numba, lambda count: dst_nb.copy_to_host()[:count])
            kernels["numba disp"] = (run_numba_dispatcher, lambda count: dst_nb.copy_to_host()[:count])
        if cute_oneshot is not None:
            for kind in ("reduce", "peer"):
                if any(f in missing for f in cute_oneshot.NEEDS[kind]):
                    continue
                dst = torch.zeros(max(SIZES) // 4, dtype=torch.float32, device="cuda")
                one = cute_oneshot.OneShot(kind, dev, win, from_dlpack(dst), blocks_for)
                if rank == 0:
                    print(f"cute {kind}: compiled in {one.compile_s:.2f} s", flush=True)
                kernels[f"cute {kind}"] = (one.run, lambda count, dst=dst: dst[:count].cpu().numpy())
        if rank == 0 and have_reduce:
            attrs = cxx.attributes
            print(f"kernels: c++ {attrs['num_regs']} registers, {attrs['local_size_bytes']} B local; wrapper linked as "
                  f"{'LTO-IR' if linking.lto_available()[0] else 'a cubin: ' + linking.lto_available()[1]}",
                  flush=True)
        loops = [name for name in kernels if name != "numba disp"]  # the device work alone: ITERS in one launch
        rows = []
        for size in SIZES:
            count = size // 4
            host_in = inputs(rank, count)
            want = sum(inputs(r, count).astype(np.float64) for r in range(nranks)).astype(np.float32)
            window[:count].copy_(torch.from_numpy(host_in))
            nccl_buf = torch.from_numpy(host_in).cuda()
            torch.cuda.synchronize()
            comm.all_reduce(torch.zeros(1, device="cuda"))
            torch.cuda.synchronize()

            def run_nccl():
                comm.all_reduce(nccl_buf)

            def settle():
                torch.cuda.synchronize()
                cuda.synchronize()
                cupy.cuda.Device().synchronize()

            # correctness first, one call each
            for name, (run, result) in kernels.items():
                run(count)
                settle()
                got = result(count)
                bad = np.flatnonzero(got != want)
                if bad.size:
                    fail(f"{name} one-shot all-reduce {size} B: {bad.size} of {count} wrong, first at {bad[0]}: "
                         f"{got[bad[0]]} != {want[bad[0]]}")
                else:
                    print(f"rank {rank}: PASS {name} one-shot all-reduce {size} B", flush=True)
            run_nccl()
            torch.cuda.synchronize()
            if not np.array_equal(nccl_buf.cpu().numpy(), want):
                fail(f"nccl all_reduce {size} B")
            nccl_buf.copy_(torch.from_numpy(host_in))  # keep its values small while timing
            torch.cuda.synchronize()

            row = {"size": size}
            for name, run in [("nccl", lambda: run_nccl())] + [(n, (lambda r=r: r(count))) for n, (r, _) in
                                                                kernels.items()]:
                for _ in range(WARMUP):
                    run()
                settle()
                comm.all_reduce(torch.zeros(1, device="cuda"))
                settle()
                row[name] = timed(torch, run, ITERS)
                settle()
            for name in loops:
                run = kernels[name][0]
                run(count, ITERS)
                settle()
                comm.all_reduce(torch.zeros(1, device="cuda"))
                settle()
                row[name + " loop"] = timed(torch, lambda: run(count, ITERS), 1) / ITERS
                settle()
                if not np.array_equal(kernels[name][1](count), want):
                    fail(f"{name} loop all-reduce {size} B")
            rows.append(row)
        if rank == 0:
            report(rows, list(kernels), loops, nranks)
        comm.all_reduce(torch.zeros(1, device="cuda"))
        torch.cuda.synchronize()
        win.close()
        dev.close()
    except Exception:  # noqa: BLE001 - a failure in one rank is reported, not hidden
        traceback.print_exc()
        fail("no exception")
    finally:
        comm.destroy()
        print(f"rank {rank}: {'FAIL' if failed else 'PASS'} ({failed} failures)", flush=True)
        sys.exit(1 if failed else 0)


def main():
    nranks = launch.ranks_to_run(sys.argv[1:], launch.torch_gpu_count())
    if nranks is None:
        return 0
    print(f"ncclbind uses {NCCL}", flush=True)
    return launch.run_ranks(rank_main, nranks, (launch.free_port(), None), timeout=280, name="oneshot_bench")


if __name__ == "__main__":
    sys.exit(main())
