"""ncclbind.symmetric on several GPUs: one process per GPU, the unique id shared through
a torch.distributed TCPStore (as tests/multigpu/python/ranks.py does).

    python3 tests/multigpu/symmetric/sym_ranks.py [NRANKS]      # default: every GPU

Checked, data element by element, on every rank: NcclSymPool (the same size and a
symmetric window on every rank, the pool as a uint8 tensor); SymmTensors of several sizes
at the same window offset on every rank, in all_reduce (in and out of place), all_gather,
reduce_scatter and broadcast; an mxfp8 block's data and scales gathered in one call and
its scales broadcast alone; freeing on the last view (stats, and first fit reusing the
block); a CUDA graph that allocates from the graph sub-pool and all-reduces; torch_pool
(ordinary torch tensors in ncclMemAlloc memory, registered as symmetric windows) under
the same collectives. Each check prints "PASS <what>" or "FAIL <what>" (rank 0 prints
the passes, every rank its failures); NCCL's log (NCCL_DEBUG=INFO, one file per rank) is
then searched for lines about symmetric kernels and windows, printed as EVIDENCE lines
(informational: their wording is NCCL's). Exit status: non-zero when a check failed or a
rank died. Never creates multicast objects (NCCL_NVLS_ENABLE=0; lsa_multimem stays off).
"""
import os
import re
import sys
import tempfile
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
            print(f"FAIL rank {self.rank}: {what}", flush=True)
        elif self.rank == 0:
            print(f"PASS {what}", flush=True)
        return ok


def values(torch, rank, n):
    """Small integers, exact in float32 and bfloat16 sums over many ranks."""
    return ((rank + torch.arange(n, dtype=torch.int64)) % 7 + 1).to(torch.float32)


def same_on_every_rank(torch, comm, number):
    """Whether an int is equal on every rank (all-gathered through the communicator)."""
    mine = torch.tensor([number], dtype=torch.int64, device="cuda")
    every = torch.zeros(comm.nranks, dtype=torch.int64, device="cuda")
    comm.all_gather(mine, every, stream=torch.cuda.current_stream())
    torch.cuda.synchronize()
    return bool((every == number).all())


def check_pool_and_tensors(torch, ncclbind, comm, check):
    n, me = comm.nranks, comm.rank
    stream = torch.cuda.current_stream()
    pool = ncclbind.NcclSymPool(comm, 64 * MiB)
    check(pool.window is not None and pool.window.flags == ncclbind._nccl.NCCL_WIN_COLL_SYMMETRIC
          and pool.dev_comm is not None and not pool.lsa_multimem, "NcclSymPool: symmetric window and DevComm")
    check(same_on_every_rank(torch, comm, pool.nbytes), "NcclSymPool: the same size on every rank")
    whole = pool.as_tensor()
    check(whole.data_ptr() == pool.ptr and whole.numel() == pool.nbytes and whole.dtype == torch.uint8,
          "NcclSymPool.as_tensor: the pool as uint8, no copy")
    alloc = pool.allocator

    for count in (2, 1000, 65536, 1 << 20):
        tag = f"{count} floats"
        x = pool.tensor("float32", count)
        y = alloc.empty(count, torch.float32)
        check(type(x).__name__ == "SymmTensor" and pool.contains(x.data_ptr(), 4 * count),
              f"SymmTensor inside the window ({tag})")
        check(same_on_every_rank(torch, comm, x.symm_offset), f"the same window offset on every rank ({tag})")
        want = torch.stack([values(torch, r, count) for r in range(n)]).sum(0)
        x.copy_(values(torch, me, count))
        comm.all_reduce(x, y, stream=stream)
        torch.cuda.synchronize()
        check(torch.equal(y.cpu(), want), f"all_reduce out of place ({tag})")
        comm.all_reduce(x, stream=stream)
        torch.cuda.synchronize()
        check(torch.equal(x.cpu(), want), f"all_reduce in place ({tag})")

        x.copy_(values(torch, me, count))
        gathered = alloc.empty(count * n, torch.float32)
        comm.all_gather(x, gathered, stream=stream)
        torch.cuda.synchronize()
        check(torch.equal(gathered.cpu(), torch.cat([values(torch, r, count) for r in range(n)])),
              f"all_gather ({tag})")

        big = alloc.empty(count * n, torch.float32)
        big.copy_(values(torch, me, count * n))
        comm.reduce_scatter(big, y, stream=stream)
        torch.cuda.synchronize()
        full = torch.stack([values(torch, r, count * n) for r in range(n)]).sum(0)
        check(torch.equal(y.cpu(), full[me * count:(me + 1) * count]), f"reduce_scatter ({tag})")

        root = n - 1
        comm.broadcast(x, y, root, stream=stream)
        torch.cuda.synchronize()
        check(torch.equal(y.cpu(), values(torch, root, count)), f"broadcast ({tag})")
        del x, y, gathered, big
    torch.cuda.synchronize()
    check(alloc.stats().allocations == 0 and alloc.stats().in_use == 0,
          "every block freed when its tensors went")

    # mxfp8: data and scales in one all_gather; scales alone broadcast
    q = alloc.mxfp8((16, 128))
    q.allocation.fill_(me + 1)
    chunk = q.allocation.numel()
    out = alloc.empty(chunk * n, torch.uint8)
    comm.all_gather(q.allocation, out, stream=stream)
    torch.cuda.synchronize()
    want = torch.cat([torch.full((chunk,), r + 1, dtype=torch.uint8) for r in range(n)])
    check(chunk == 16 * 128 + 16 * 128 // 32 and torch.equal(out.cpu(), want),
          "mxfp8: data and scales all-gathered as one block")
    scales = q.mx_scales
    scales.fill_(100 + me)
    comm.broadcast(scales, scales, 0, stream=stream)
    torch.cuda.synchronize()
    check(torch.equal(scales.cpu(), torch.full((16, 4), 100, dtype=torch.uint8))
          and torch.equal(q.view(torch.uint8).cpu(), torch.full((16, 128), me + 1, dtype=torch.uint8)),
          "mxfp8: scales broadcast alone, data untouched")
    as_float = q.float()  # fp8 -> float on the GPU: the data view is a working fp8 tensor
    check(as_float.shape == (16, 128) and type(as_float).__name__ == "Tensor", "mxfp8: the data is a torch fp8 tensor")
    del out, as_float

    # free on the last view
    offset = q.symm_offset
    data_only = q[1:]
    del q
    still = alloc.stats().allocations
    del data_only
    held = alloc.stats().allocations
    del scales
    gone = alloc.stats()
    again = alloc.mxfp8((16, 128))
    check(still == 1 and held == 1 and gone.allocations == 0 and again.symm_offset == offset,
          f"freed on the last view, then reused first-fit (held {still}, {held}, then {gone.allocations})")
    s = alloc.stats()
    check(s.in_use == again.symm_nbytes and s.free + s.in_use == alloc.books.size and 0 <= s.fragmentation < 1,
          f"stats: in_use {s.in_use}, free {s.free}, largest {s.largest_free}, fragmentation {s.fragmentation:.3f}")
    del again

    # a CUDA graph: its tensor comes from the graph sub-pool, its all_reduce replays
    try:
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            comm.all_reduce(alloc.empty(4, torch.float32), stream=side)  # warm NCCL up outside capture
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            g = alloc.empty(1024, torch.float32)
            g.fill_(float(me + 1))
            comm.all_reduce(g, stream=torch.cuda.current_stream())
        eager_size = alloc.books.size - alloc.books.graph_bytes
        graph.replay()
        torch.cuda.synchronize()
        check(g.symm_offset >= eager_size and torch.equal(g.cpu(), torch.full((1024,), float(sum(range(1, n + 1))))),
              "CUDA graph: allocation from the graph sub-pool, all_reduce replayed")
        del graph, g
    except Exception as e:  # noqa: BLE001 - reported as a failure
        traceback.print_exc()
        check(False, f"CUDA graph: {type(e).__name__}: {e}")
    torch.cuda.synchronize()
    pool.close()
    check(pool.closed and pool.window is None, "NcclSymPool closed (window, DevComm, memory)")


def check_torch_pool(torch, ncclbind, comm, check):
    n, me = comm.nranks, comm.rank
    stream = torch.cuda.current_stream()
    tp = ncclbind.torch_pool(comm)
    before = tp.library.counts()
    with tp:
        small = torch.full((2,), float(me + 1), device="cuda")
        mid = torch.full((300_000,), float(me + 1), device="cuda")
        gathered = torch.zeros(300_000 * n, device="cuda")
    after = tp.library.counts()
    check(after[0] > before[0] and after[2] == before[2], f"torch_pool: ncclMemAlloc served torch ({after})")
    segments = tp.segments()
    inside = all(any(s <= t.data_ptr() < s + size for s, size in segments) for t in (small, mid, gathered))
    check(inside, f"torch_pool: the tensors lie in the pool's segments ({len(segments)} segments)")
    check(same_on_every_rank(torch, comm, len(segments)), "torch_pool: as many segments on every rank")
    tp.register_windows()
    check(all(tp.window_of(t.data_ptr()) is not None for t in (small, mid, gathered)),
          f"torch_pool: segments registered as symmetric windows ({len(tp.windows)})")
    total = float(sum(range(1, n + 1)))
    comm.all_reduce(small, stream=stream)
    comm.all_reduce(mid, stream=stream)
    torch.cuda.synchronize()
    check(bool((small == total).all()) and bool((mid == total).all()), "torch_pool: all_reduce")
    mid.fill_(float(me + 1))
    comm.all_gather(mid, gathered, stream=stream)
    torch.cuda.synchronize()
    want = torch.cat([torch.full((300_000,), float(r + 1)) for r in range(n)])
    check(torch.equal(gathered.cpu(), want), "torch_pool: all_gather")
    comm.reduce_scatter(gathered, mid, stream=stream)
    torch.cuda.synchronize()
    check(bool((mid == float(n * (me + 1))).all()), "torch_pool: reduce_scatter")
    comm.broadcast(small, small, 0, stream=stream)
    torch.cuda.synchronize()
    check(bool((small == total).all()), "torch_pool: broadcast")
    tp.close()
    check(tp.windows == {}, "torch_pool: windows deregistered")
    del small, mid, gathered


def rank_main(rank, nranks, port, log_dir):
    os.environ["NCCL_DEBUG"] = "INFO"
    os.environ["NCCL_DEBUG_SUBSYS"] = "INIT,COLL,TUNING,REG,ALLOC"
    os.environ["NCCL_DEBUG_FILE"] = os.path.join(log_dir, f"nccl.{rank}.log")
    import torch
    import torch.distributed as dist

    import ncclbind
    torch.cuda.set_device(rank)
    store = dist.TCPStore("127.0.0.1", port, nranks, rank == 0)
    uid = ncclbind.UniqueId.share_store(store, rank)
    comm = ncclbind.Communicator.init(nranks, rank, uid, device=rank)
    check = Checker(rank)
    try:
        check_pool_and_tensors(torch, ncclbind, comm, check)
        check_torch_pool(torch, ncclbind, comm, check)
    except Exception as e:  # noqa: BLE001 - one rank's failure is reported, not hidden
        traceback.print_exc()
        check(False, f"{type(e).__name__}: {e}")
        comm.abort()
        sys.exit(1)
    comm.destroy()
    print(f"rank {rank}: {check.checks - check.failures} of {check.checks} checks passed", flush=True)
    sys.exit(1 if check.failures else 0)


SYMMETRIC_WORDS = re.compile(r"symmetric|symk|sym[ _]?kernel|AGxLL|RSxLD|AGxST|_LL_|window", re.IGNORECASE)


def show_evidence(log_dir):
    """NCCL's own lines about symmetric kernels / windows, from rank 0's log."""
    path = os.path.join(log_dir, "nccl.0.log")
    if not os.path.exists(path):
        print("EVIDENCE none: NCCL wrote no log file (NCCL_DEBUG_FILE)", flush=True)
        return
    with open(path, errors="replace") as f:
        lines = [line.rstrip() for line in f if SYMMETRIC_WORDS.search(line)]
    print(f"EVIDENCE {len(lines)} NCCL log lines of rank 0 mention symmetric kernels or windows", flush=True)
    for line in lines[:25]:
        print(f"EVIDENCE {line}", flush=True)


def main():
    nranks = launch.ranks_to_run(sys.argv[1:], launch.torch_gpu_count())
    if nranks is None:
        return 0
    log_dir = tempfile.mkdtemp(prefix="ncclbind-sym-")
    status = launch.run_ranks(rank_main, nranks, (launch.free_port(), log_dir), timeout=240, name="sym_ranks")
    show_evidence(log_dir)
    return status


if __name__ == "__main__":
    sys.exit(main())
