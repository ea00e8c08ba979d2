"""Multi-GPU run of the Python binding: one process per GPU, the unique id shared
through a torch.distributed TCPStore (UniqueId.share_store), as users do.

    python3 tests/multigpu/python/ranks.py [NRANKS]            # correctness
    python3 tests/multigpu/python/ranks.py [NRANKS] --bench    # figures

Correctness: every collective and a send/recv ring over several sizes (1 element
to 256 MiB) and every data type torch has for NCCL, on torch tensors and CuPy
arrays, checked element by element; a group mixing collectives and
point-to-point; split and shrink; registered buffers and symmetric windows;
DevComm creation; abort while a peer waits; the watchdog aborting an all_reduce
the other ranks skip (NcclTimeout on rank 0, every rank continues). --bench: bus bandwidth by size for
all_reduce, all_gather and reduce_scatter through ncclbind next to
torch.distributed, and 2-float latency with a stream sync after each call
(latency_rows: all_reduce, all_gather, broadcast and a send/recv ring through
Communicator, the generated low-level call, torch.distributed and CuPy's nccl
module against the raw C loop of bench/python/bench_loop.c, in one run).
Runs unchanged on any number of GPUs (1 included). GPU only; not in bazel test.
"""
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import launch  # noqa: E402  (tests/multigpu/launch.py: NVLS off, the ranks' launch)

MiB = 1 << 20


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
    comm.reduce(send, out, op, 0)
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
    launch.load_named_libraries_first()
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
    print(f"rank {rank}/{nranks} (libnccl {ncclbind.version_code()}): {check.checks} checks, "
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
        check_watchdog(torch, comm, check, rank, nranks)


def check_watchdog(torch, comm, check, rank, nranks, timeout_s=3.0):
    """Every rank but 0 skips an all_reduce on a split communicator: rank 0's watchdog
    aborts it after timeout_s and raises NcclTimeout naming all_reduce; then every rank
    meets on `comm`, which still works, and drops its part of the split one."""
    import ncclbind
    doomed = comm.split(0, rank)
    x = torch.ones(1024, device="cuda")
    doomed.all_reduce(x)  # a matched call first: NCCL connects peers on first use, on the host
    torch.cuda.synchronize()
    if rank == 0:
        t0 = time.perf_counter()
        try:
            with doomed.watchdog(timeout_s=timeout_s, poll_s=0.1):
                doomed.all_reduce(x)  # no other rank joins
            check(False, "watchdog: expected NcclTimeout for an all_reduce the other ranks skip; none was raised")
        except ncclbind.NcclTimeout as e:
            waited = time.perf_counter() - t0
            check(e.function == "all_reduce", f"watchdog: expected NcclTimeout naming all_reduce, got {e!r}")
            check(timeout_s <= waited < 60, f"watchdog: expected the timeout after {timeout_s} s, not {waited:.2f} s")
            check(doomed.closed, "watchdog: expected the communicator aborted after NcclTimeout")
            print(f"watchdog: NcclTimeout after {waited:.2f} s: {e}", flush=True)
        torch.cuda.synchronize()  # the aborted all_reduce has left the stream
    y = torch.full((16,), float(rank + 1), device="cuda")
    comm.all_reduce(y)  # every rank continues on the world communicator
    torch.cuda.synchronize()
    want = float(nranks * (nranks + 1) // 2)
    check(torch.equal(y.cpu(), torch.full((16,), want)), f"after the watchdog: expected a world all_reduce of {want}")
    doomed.abort()  # idempotent on rank 0; the other ranks never finish their part


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


def latency_rows(torch, dist, comm, rank, nranks, iterations=2000, repeats=5, extra_all_reduce=None,
                 synchronize=None):
    """2-float all_reduce (in place), all_gather, broadcast (in place) and a send/recv ring,
    each call followed by a stream synchronize, on a non-blocking stream: the raw C loop
    (bench/python/bench_loop.c, synchronizing in C), the generated low-level call,
    Communicator on torch and CuPy, torch.distributed. Rows interleaved over `repeats`;
    rank 0 prints best and median us/call, "x raw C" and "+us vs raw" per collective, and
    the goal (Communicator within 1.05x of raw C). extra_all_reduce: {name: fn(stream)}
    more all_reduce rows. synchronize: fn(stream) instead of cuStreamSynchronize (for the
    CPU stand-in test; the raw loop then skips its synchronize). Returns {row: (best, median)}."""
    import statistics

    import ncclbind
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench", "python"))
    import raw_loop
    raw = raw_loop.raw_collective_loop()
    raw_sync = 2 if synchronize is None else 0  # 2: cuStreamSynchronize after every call, in C
    sync = synchronize or raw_loop.stream_synchronize()
    low = ncclbind._nccl
    f32, ssum, h = ncclbind.NcclDataType.FLOAT32, ncclbind.NcclRedOp.SUM, comm.handle
    me, nxt, prv = rank, (rank + 1) % nranks, (rank - 1) % nranks
    stream = torch.cuda.Stream()
    S = stream.cuda_stream
    x, y = torch.ones(2, device="cuda"), torch.zeros(2, device="cuda")
    gathered = torch.zeros(2 * nranks, device="cuda")
    xp, yp, gp = x.data_ptr(), y.data_ptr(), gathered.data_ptr()
    buffers = [("torch", x, y, gathered)]
    try:
        import cupy
        with cupy.cuda.Device(torch.cuda.current_device()):  # this rank's GPU, as torch's buffers
            buffers.append(("CuPy", cupy.ones(2, dtype=cupy.float32), cupy.zeros(2, dtype=cupy.float32),
                            cupy.zeros(2 * nranks, dtype=cupy.float32)))
    except ImportError:
        pass

    def raw_row(name, send, recv, **extras):
        return lambda count: raw(name, h, send, recv, 2, int(f32), S, count, raw_sync, extras.get("op", 0),
                                 extras.get("root", 0), extras.get("send_peer", 0), extras.get("recv_peer", 0))

    def synced(call):
        def loop(count):
            for _ in range(count):
                call()
                sync(S)
        return loop

    def ring_low():
        low.group_start()
        low.send(xp, 2, f32, nxt, h, S)
        low.recv(yp, 2, f32, prv, h, S)
        low.group_end()

    groups = {
        "all_reduce in place": {
            "raw C all_reduce": raw_row("all_reduce", xp, xp),
            "_nccl.all_reduce": synced(lambda: low.all_reduce(xp, xp, 2, f32, ssum, h, S)),
        },
        "all_gather": {
            "raw C all_gather": raw_row("all_gather", xp, gp),
            "_nccl.all_gather": synced(lambda: low.all_gather(xp, gp, 2, f32, h, S)),
        },
        "broadcast in place (root 0)": {
            "raw C broadcast": raw_row("broadcast", xp, xp, root=0),
            "_nccl.broadcast": synced(lambda: low.broadcast(xp, xp, 2, f32, 0, h, S)),
        },
        "send/recv ring": {
            "raw C send/recv ring": raw_row("send_recv", xp, yp, send_peer=nxt, recv_peer=prv),
            "_nccl group_start, send, recv, group_end": synced(ring_low),
        },
    }
    for lib, a, b, g in buffers:
        def ring(a=a, b=b):
            with ncclbind.group():
                comm.send(a, nxt, stream=S)
                comm.recv(b, prv, stream=S)
        groups["all_reduce in place"][f"Communicator.all_reduce ({lib})"] = synced(
            lambda a=a: comm.all_reduce(a, stream=S))
        groups["all_gather"][f"Communicator.all_gather ({lib})"] = synced(lambda a=a, g=g: comm.all_gather(a, g, stream=S))
        groups["broadcast in place (root 0)"][f"Communicator.broadcast ({lib})"] = synced(
            lambda a=a: comm.broadcast(a, a, 0, stream=S))
        groups["send/recv ring"][f"with group(): Communicator.send, recv ({lib})"] = synced(ring)
    for name, fn in (extra_all_reduce or {}).items():
        groups["all_reduce in place"][name] = synced(lambda fn=fn: fn(S))
    skipped = {}
    if dist is not None and dist.is_initialized():
        tx, ty, tg = torch.ones(2, device="cuda"), torch.zeros(2, device="cuda"), torch.zeros(2 * nranks, device="cuda")

        def dist_ring():
            for work in dist.batch_isend_irecv([dist.P2POp(dist.isend, tx, nxt), dist.P2POp(dist.irecv, ty, prv)]):
                work.wait()

        def on_stream(call):  # torch.distributed orders its NCCL stream after the current one
            def loop(count):
                with torch.cuda.stream(stream):
                    synced(call)(count)
            return loop
        groups["all_reduce in place"]["torch.distributed.all_reduce"] = on_stream(lambda: dist.all_reduce(tx))
        groups["all_gather"]["torch.distributed.all_gather_into_tensor"] = on_stream(
            lambda: dist.all_gather_into_tensor(tg, tx))
        groups["broadcast in place (root 0)"]["torch.distributed.broadcast"] = on_stream(lambda: dist.broadcast(tx, 0))
        groups["send/recv ring"]["torch.distributed.batch_isend_irecv"] = on_stream(dist_ring)
    else:
        skipped["torch.distributed rows"] = "no process group"

    for rows in groups.values():  # warm-up: connections, first-call resolution; a row that fails is reported
        for name, loop in list(rows.items()):
            try:
                loop(min(iterations, 20))
            except Exception as e:  # noqa: BLE001
                skipped[name] = repr(e)
                del rows[name]
    times = {name: [] for rows in groups.values() for name in rows}
    for _ in range(repeats):  # interleaved: each repeat takes every row in turn
        for rows in groups.values():
            for name, loop in rows.items():
                t0 = time.perf_counter()
                loop(iterations)
                times[name].append((time.perf_counter() - t0) / iterations * 1e6)
    table = {name: (min(t), statistics.median(t)) for name, t in times.items()}
    if me == 0:
        width = max([48] + [len(n) for n in table]) + 1
        print(f"\n2 floats per rank, {nranks} ranks, a stream sync after each call, non-blocking stream, "
              f"{iterations} calls, best/median of {repeats} interleaved repeats (rank 0)", flush=True)
        print(f"{'':{width}} {'best us':>9} {'median':>9} {'x raw C':>8} {'+us vs raw':>10}", flush=True)
        goals = {}
        for title, rows in groups.items():
            base = next((n for n in rows if n.startswith("raw C")), None)
            print(f"-- {title}", flush=True)
            for name in rows:
                best, median = table[name]
                if base:
                    ratio = best / table[base][0]
                    print(f"{name:{width}} {best:9.2f} {median:9.2f} {ratio:8.3f} {best - table[base][0]:10.2f}",
                          flush=True)
                    if "Communicator" in name:
                        goals[f"{name} within 1.05x of raw C"] = ratio <= 1.05
                else:
                    print(f"{name:{width}} {best:9.2f} {median:9.2f} {'-':>8} {'-':>10}", flush=True)
        for name, reason in skipped.items():
            print(f"{name:{width}} skipped: {reason}", flush=True)
        for goal, met in goals.items():
            print(f"goal {'met' if met else 'MISSED'}: {goal}", flush=True)
    return table


def run_bench(torch, dist, store, comm, rank, nranks):
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

    # Small-message latency with a stream sync after each call: the binding against the raw C loop
    extra = {}
    try:
        import cupy
        from cupy.cuda import nccl as cupy_nccl
        cupy.cuda.Device(rank).use()  # CuPy's current device for its arrays and its communicator
        cx = cupy.ones(2, dtype=cupy.float32)
        if rank == 0:  # get_unique_id() gives a tuple of ints; the communicator takes bytes
            cuid = bytes(b & 0xff for b in cupy_nccl.get_unique_id())
            store.set("cupy_uid", cuid)
        else:
            cuid = store.get("cupy_uid")
        ccomm = cupy_nccl.NcclCommunicator(nranks, bytes(cuid), rank)
        extra["CuPy cupy.cuda.nccl allReduce (raw pointers)"] = lambda stream: ccomm.allReduce(
            cx.data.ptr, cx.data.ptr, 2, cupy_nccl.NCCL_FLOAT32, cupy_nccl.NCCL_SUM, stream)
    except Exception as e:  # noqa: BLE001
        if rank == 0:
            print(f"CuPy nccl not measured: {e!r}", flush=True)
    try:
        import nccl.core as nccl4py  # noqa: F401
        if rank == 0:
            print("nccl4py importable (not wired into this comparison)", flush=True)
    except ImportError:
        if rank == 0:
            print("nccl4py not installed here: not measured", flush=True)
    latency_rows(torch, dist, comm, rank, nranks, extra_all_reduce=extra)
    dist.destroy_process_group()


def main():
    nranks = launch.ranks_to_run(sys.argv[1:], launch.torch_gpu_count())
    if nranks is None:
        return 0
    return launch.run_ranks(rank_main, nranks, (launch.free_port(), "--bench" in sys.argv, None), timeout=900,
                            name="ranks")


if __name__ == "__main__":
    sys.exit(main())
