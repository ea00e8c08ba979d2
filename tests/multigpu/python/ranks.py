"""Multi-GPU run of the Python binding: one process per GPU, the unique id shared
through a torch.distributed TCPStore (UniqueId.share_store), as users do.

    python3 tests/multigpu/python/ranks.py [NRANKS]            # correctness
    python3 tests/multigpu/python/ranks.py [NRANKS] --bench    # figures

Correctness: every collective and a send/recv ring over several sizes (1 element
to 256 MiB) and every data type torch has for NCCL, on torch tensors and CuPy
arrays, checked element by element; a group mixing collectives and
point-to-point; split and shrink; registered buffers and symmetric windows;
DevComm creation; abort while a peer waits. --bench: bus bandwidth by size for
all_reduce, all_gather and reduce_scatter through ncclbind next to
torch.distributed, and 2-float all-reduce latency (with a stream sync after each
call, and back to back) through Communicator.all_reduce, the generated
low-level call, torch.distributed and CuPy's nccl module, in one run.
Runs unchanged on any number of GPUs (1 included). GPU only; not in bazel test.
"""
import os
import socket
import sys
import time
import traceback

for var, value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                   ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[var] = value

MiB = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Checker:
    def __init__(self, rank):
        self.rank, self.checks, self.failures = rank, 0, 0

    def __call__(self, ok, what):
        self.checks += 1
        if not ok:
            self.failures += 1
            if self.failures <= 20:
                print(f"rank {self.rank}: FAIL {what}", flush=True)


def values(torch, rank, n, offset=0):
    """Small integers, exact in every type (sums over 8 ranks stay <= 40)."""
    i = torch.arange(offset, offset + n, dtype=torch.int64)
    return ((rank + i) % 5 + 1).to(torch.float64)


def check_collectives(torch, comm, check, dtype, count, make):
    """make(host_float64_tensor, dtype) -> device buffer of that dtype (torch or CuPy)."""
    import ncclbind
    n, me = comm.nranks, comm.rank
    fp8 = dtype in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None))
    op = ncclbind.NcclRedOp.MAX if fp8 else ncclbind.NcclRedOp.SUM
    tag = f"{dtype} x{count}"

    def reduced(offset=0):
        stacked = torch.stack([values(torch, r, count, offset) for r in range(n)])
        return stacked.max(0).values if fp8 else stacked.sum(0)

    def host(buf):
        return torch.as_tensor(buf).to("cpu").to(torch.float64) if not hasattr(buf, "get") else \
            torch.from_numpy(buf.get().astype("float64"))

    send = make(values(torch, me, count), dtype)
    recv = make(torch.full((count,), -1.0, dtype=torch.float64), dtype)
    comm.all_reduce(send, recv, op)
    torch.cuda.synchronize()
    check(torch.equal(host(recv), reduced()), f"all_reduce {tag}")

    root = n - 1
    out = make(torch.zeros(count, dtype=torch.float64), dtype)
    comm.broadcast(send, out, root)
    torch.cuda.synchronize()
    check(torch.equal(host(out), values(torch, root, count)), f"broadcast {tag}")

    out = make(torch.zeros(count, dtype=torch.float64), dtype)
    comm.reduce(send, out, 0, op)
    torch.cuda.synchronize()
    if me == 0:
        check(torch.equal(host(out), reduced()), f"reduce {tag}")

    gathered = make(torch.zeros(count * n, dtype=torch.float64), dtype)
    comm.all_gather(send, gathered)
    torch.cuda.synchronize()
    want = torch.cat([values(torch, r, count) for r in range(n)])
    check(torch.equal(host(gathered), want), f"all_gather {tag}")

    big = make(values(torch, me, count * n), dtype)
    out = make(torch.zeros(count, dtype=torch.float64), dtype)
    comm.reduce_scatter(big, out, op)
    torch.cuda.synchronize()
    full = torch.stack([values(torch, r, count * n) for r in range(n)])
    full = full.max(0).values if fp8 else full.sum(0)
    check(torch.equal(host(out), full[me * count:(me + 1) * count]), f"reduce_scatter {tag}")

    out = make(torch.zeros(count * n, dtype=torch.float64), dtype)
    comm.all_to_all(big, out)
    torch.cuda.synchronize()
    want = torch.cat([values(torch, r, count * n)[me * count:(me + 1) * count] for r in range(n)])
    check(torch.equal(host(out), want), f"all_to_all {tag}")

    out = make(torch.zeros(count * n, dtype=torch.float64), dtype)
    comm.gather(send, out if me == root else None, root)
    torch.cuda.synchronize()
    if me == root:
        check(torch.equal(host(out), torch.cat([values(torch, r, count) for r in range(n)])), f"gather {tag}")
    out = make(torch.zeros(count, dtype=torch.float64), dtype)
    comm.scatter(big if me == root else None, out, root)
    torch.cuda.synchronize()
    check(torch.equal(host(out), values(torch, root, count * n)[me * count:(me + 1) * count]), f"scatter {tag}")

    out = make(torch.zeros(count, dtype=torch.float64), dtype)
    with ncclbind.group():
        comm.send(send, (me + 1) % n)
        comm.recv(out, (me - 1) % n)
    torch.cuda.synchronize()
    check(torch.equal(host(out), values(torch, (me - 1) % n, count)), f"send/recv ring {tag}")


def rank_main(rank, nranks, port, bench, results):
    import torch
    import torch.distributed as dist

    import ncclbind
    torch.cuda.set_device(rank)
    store = dist.TCPStore("127.0.0.1", port, nranks, rank == 0)
    uid = ncclbind.UniqueId.share_store(store, rank)
    comm = ncclbind.Communicator.init(nranks, rank, uid, device=rank)
    check = Checker(rank)
    try:
        if bench:
            run_bench(torch, dist, store, comm, rank, nranks)
        else:
            run_checks(torch, comm, check, rank, nranks)
    except Exception:  # noqa: BLE001 - a failure in one rank is reported, not hidden
        traceback.print_exc()
        check(False, "exception")
    finally:
        comm.destroy()
    print(f"rank {rank}/{nranks} (libnccl {ncclbind.get_version()}): {check.checks} checks, "
          f"{check.failures} failed", flush=True)
    sys.exit(1 if check.failures else 0)


def run_checks(torch, comm, check, rank, nranks):
    import ncclbind

    def torch_buf(t, dtype):
        return t.to(dtype).cuda()
    dtypes = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.float32, torch.float64,
              torch.bfloat16] + [d for d in (getattr(torch, "float8_e4m3fn", None),
                                             getattr(torch, "float8_e5m2", None)) if d is not None]
    for dtype in dtypes:
        for count in (1, 4099, 1 << 18):
            check_collectives(torch, comm, check, dtype, count, torch_buf)
    for nbytes in (16 * MiB, 256 * MiB):  # float32 up to a 256 MiB buffer per rank
        check_collectives(torch, comm, check, torch.float32, nbytes // 4 // nranks, torch_buf)
    try:
        import cupy
        for name in ("int8", "float16", "float32", "float64"):
            def cupy_buf(t, dtype, name=name):
                return cupy.asarray(t.numpy().astype(name))
            check_collectives(torch, comm, check, name, 4099, cupy_buf)
    except ImportError:
        print("CuPy not installed: CuPy buffers not checked", flush=True)

    # a group mixing collectives and point-to-point
    a = values(torch, rank, 4096).float().cuda()
    p = values(torch, rank + 10, 4096).float().cuda()
    out = torch.zeros_like(p)
    with ncclbind.group():
        comm.all_reduce(a, a)
        comm.send(p, (rank + 1) % nranks)
        comm.recv(out, (rank - 1) % nranks)
    torch.cuda.synchronize()
    check(torch.equal(a.double().cpu(), torch.stack([values(torch, r, 4096) for r in range(nranks)]).sum(0)),
          "grouped all_reduce")
    check(torch.equal(out.double().cpu(), values(torch, (rank - 1) % nranks + 10, 4096)), "grouped send/recv")

    # split by parity; shrink away the last rank
    half = comm.split(rank % 2, rank)
    same = [r for r in range(nranks) if r % 2 == rank % 2]
    x = values(torch, rank, 1000).float().cuda()
    half.all_reduce(x, x)
    torch.cuda.synchronize()
    check(half.nranks == len(same) and torch.equal(
        x.double().cpu(), torch.stack([values(torch, r, 1000) for r in same]).sum(0)), "split by parity")
    half.destroy()
    if nranks > 1 and rank != nranks - 1:
        small = comm.shrink([nranks - 1])
        x = values(torch, rank, 1000).float().cuda()
        small.all_reduce(x, x)
        torch.cuda.synchronize()
        check(small.nranks == nranks - 1 and torch.equal(
            x.double().cpu(), torch.stack([values(torch, r, 1000) for r in range(nranks - 1)]).sum(0)),
            "shrink without the last rank")
        small.destroy()

    # registered buffers and symmetric windows
    with ncclbind.NcclMemoryResource(device=rank) as pool:
        block = pool.allocate(4 * MiB)
        buf = torch.as_tensor(block) if hasattr(block, "__cuda_array_interface__") else None
        if buf is not None:
            buf = buf.view(torch.float32)
            buf.copy_(values(torch, rank, buf.numel()).float())
            reg = comm.register_buffer(buf)
            comm.all_reduce(buf, buf)
            torch.cuda.synchronize()
            want = torch.stack([values(torch, r, buf.numel()) for r in range(nranks)]).sum(0)
            check(torch.equal(buf.double().cpu(), want), "all_reduce on a registered buffer")
            reg.close()
            win = comm.register_window(buf, flags=ncclbind._nccl.NCCL_WIN_COLL_SYMMETRIC)
            buf.copy_(values(torch, rank, buf.numel()).float())
            comm.all_reduce(buf, buf)
            torch.cuda.synchronize()
            check(torch.equal(buf.double().cpu(), want), "all_reduce on a symmetric window")
            win.close()
        else:
            check(False, "NcclMemoryResource blocks expose no __cuda_array_interface__")
    dev = comm.create_dev_comm(ncclbind.NCCLDevCommRequirements(lsa_barrier_count=1))
    check(dev is not None, "DevComm created")
    dev.close()

    # abort while a peer waits
    if nranks > 1:
        doomed = comm.split(0, rank)
        pending = torch.zeros(256, device="cuda")
        if rank <= 1:  # one matched exchange first: NCCL connects peers on first use, on the host
            with ncclbind.group():
                doomed.send(pending, 1 - rank)
                doomed.recv(pending, 1 - rank)
            torch.cuda.synchronize()
        if rank == 0:
            doomed.recv(pending, 1)  # never matched
            time.sleep(0.2)
            check(not torch.cuda.current_stream().query(), "the unmatched receive is pending before abort")
        t0 = time.perf_counter()
        doomed.abort()
        if rank == 0:
            print(f"abort with a pending receive returned after {time.perf_counter() - t0:.2f} s", flush=True)
        torch.cuda.synchronize()


def timed(fn, iters, sync):
    import torch
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
        if sync:
            torch.cuda.current_stream().synchronize()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def run_bench(torch, dist, store, comm, rank, nranks):
    import ncclbind
    dist.init_process_group("nccl", store=store, rank=rank, world_size=nranks,
                            device_id=torch.device("cuda", rank))
    # Bus bandwidth by size, ncclbind and torch.distributed side by side.
    if rank == 0:
        print(f"\n{'collective':<15}{'bytes':>12}{'ncclbind us':>13}{'busbw GB/s':>12}{'torch us':>11}"
              f"{'busbw GB/s':>12}", flush=True)
    nbytes = 8
    while nbytes <= 256 * MiB:
        for name in ("all_reduce", "all_gather", "reduce_scatter"):
            count = nbytes // 4 // (1 if name == "all_reduce" else nranks)
            if count == 0:
                continue
            small = torch.ones(count, device="cuda")
            large = torch.ones(count * nranks, device="cuda")
            if name == "all_reduce":
                ours, theirs = (lambda: comm.all_reduce(small, small)), (lambda: dist.all_reduce(small))
                factor = 2 * (nranks - 1) / nranks
            elif name == "all_gather":
                ours = lambda: comm.all_gather(small, large)  # noqa: E731
                theirs = lambda: dist.all_gather_into_tensor(large, small)  # noqa: E731
                factor = (nranks - 1) / nranks
            else:
                ours = lambda: comm.reduce_scatter(large, small)  # noqa: E731
                theirs = lambda: dist.reduce_scatter_tensor(small, large)  # noqa: E731
                factor = (nranks - 1) / nranks
            iters = 10 if nbytes >= 64 * MiB else 50
            t_ours = timed(ours, iters, False)
            t_theirs = timed(theirs, iters, False)
            if rank == 0:
                print(f"{name:<15}{nbytes:>12}{t_ours:>13.2f}{nbytes / t_ours / 1e3 * factor:>12.2f}"
                      f"{t_theirs:>11.2f}{nbytes / t_theirs / 1e3 * factor:>12.2f}", flush=True)
        nbytes *= 8

    # Small-message latency: a 2-float all-reduce.
    x = torch.ones(2, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    low = ncclbind._nccl.all_reduce
    dt, op, handle = int(ncclbind.NcclDataType.FLOAT32), int(ncclbind.NcclRedOp.SUM), comm.handle
    ptr = x.data_ptr()
    ways = {
        "ncclbind Communicator.all_reduce (torch)": lambda: comm.all_reduce(x, x),
        "ncclbind low-level _nccl.all_reduce": lambda: low(ptr, ptr, 2, dt, op, handle, stream),
        "torch.distributed.all_reduce": lambda: dist.all_reduce(x),
    }
    try:
        import cupy
        from cupy.cuda import nccl as cupy_nccl
        cx = cupy.ones(2, dtype=cupy.float32)
        ways["ncclbind Communicator.all_reduce (CuPy)"] = lambda: comm.all_reduce(cx, cx)
        if rank == 0:  # get_unique_id() gives a tuple of ints; the communicator takes bytes
            cuid = bytes(b & 0xff for b in cupy_nccl.get_unique_id())
            store.set("cupy_uid", cuid)
        else:
            cuid = store.get("cupy_uid")
        ccomm = cupy_nccl.NcclCommunicator(nranks, bytes(cuid), rank)
        cs = cupy.cuda.Stream.null.ptr
        ways["CuPy cupy.cuda.nccl (raw pointers)"] = lambda: ccomm.allReduce(
            cx.data.ptr, cx.data.ptr, 2, cupy_nccl.NCCL_FLOAT32, cupy_nccl.NCCL_SUM, cs)
    except Exception as e:  # noqa: BLE001
        if rank == 0:
            print(f"CuPy nccl not measured: {e}", flush=True)
    try:
        import nccl.core as nccl4py  # noqa: F401
        if rank == 0:
            print("nccl4py importable (not wired into this comparison)", flush=True)
    except ImportError:
        if rank == 0:
            print("nccl4py not installed here: not measured", flush=True)
    # ncclAllReduce from a C loop, no binding in between (a benchmark-only module, built on first use)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench", "python"))
    import raw_loop
    raw = raw_loop.raw_all_reduce_loop()

    def raw_c_rounds(sync):
        if sync:  # one call and one stream synchronize per C call
            return timed(lambda: raw(handle, ptr, ptr, 2, dt, stream, 1, True), 2000, False)
        raw(handle, ptr, ptr, 2, dt, stream, 100, True)
        return raw(handle, ptr, ptr, 2, dt, stream, 2000, True) / 2000 * 1e6

    for sync in (True, False):
        rounds = [raw_c_rounds(sync) for _ in range(3)]
        if rank == 0:
            print(f"latency {'with sync   ' if sync else 'back to back'} {'raw C ncclAllReduce (C loop)':<45} "
                  + " ".join(f"{r:7.2f}" for r in rounds) + " us/call", flush=True)
        for label, fn in ways.items():
            rounds = [timed(fn, 2000, sync) for _ in range(3)]
            if rank == 0:
                print(f"latency {'with sync   ' if sync else 'back to back'} {label:<45} "
                      + " ".join(f"{r:7.2f}" for r in rounds) + " us/call", flush=True)
    dist.destroy_process_group()


def main():
    import torch
    import torch.multiprocessing as mp
    if not torch.cuda.is_available():
        print("SKIPPED: no GPU")
        return 0
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    nranks = int(args[0]) if args else torch.cuda.device_count()
    if nranks > torch.cuda.device_count():
        print(f"SKIPPED: {nranks} ranks asked, {torch.cuda.device_count()} GPUs present")
        return 0
    port = free_port()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=rank_main, args=(r, nranks, port, "--bench" in sys.argv, None))
             for r in range(nranks)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(900)
    failed = sum(1 for p in procs if p.exitcode != 0)
    for p in procs:
        if p.is_alive():
            p.kill()
    print(f"{nranks} ranks: {nranks - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
