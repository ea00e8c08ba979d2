"""All-reduce latency on symmetric-window buffers against plain buffers and
torch.distributed, in one run: one process per GPU (default 2), sizes from 2 floats to
1 MiB, back-to-back in-place calls on one stream timed with CUDA events.

    python3 tests/multigpu/symmetric/sym_bench.py [NRANKS] [--iters N]

Columns (microseconds per call, the median of 5 runs of N calls each):
  symmetric us   ncclbind all_reduce on a SymmTensor of an NcclSymPool (ncclMemAlloc,
                 registered with NCCL_WIN_COLL_SYMMETRIC): NCCL may pick its symmetric kernels
  plain us       ncclbind all_reduce on a tensor of torch's caching allocator (cudaMalloc)
  torch.dist us  torch.distributed.all_reduce (NCCL backend) on the same kind of tensor
  sym/plain      symmetric time over plain time (below 1: the window helps)
  ... graph us   the same two, iters calls captured in one CUDA graph and replayed: no host
                 cost per call, so what the kernels take (back-to-back eager calls are
                 bound by the host's launch cost at small sizes)
A figure, not a test: nothing is asserted (the exit status says only whether it ran).
Never creates multicast objects (NCCL_NVLS_ENABLE=0).
"""
import os
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import launch  # noqa: E402  (tests/multigpu/launch.py: NVLS off, the ranks' launch)

SIZES = [8 << (2 * i) for i in range(9)] + [1 << 20]  # 8 B (2 floats), 32 B, ... 512 KiB, 1 MiB
RUNS = 5


def timed(torch, call, iters):
    """Median microseconds per call over RUNS runs of iters back-to-back calls (CUDA events
    on the current stream), after a warm-up."""
    for _ in range(20):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(RUNS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / iters)
    return sorted(times)[len(times) // 2]


def graph_timed(torch, call, iters):
    """Median microseconds per call of iters calls captured in one CUDA graph and replayed
    (no host cost per call: what the GPU spends). call(stream) must use the stream given."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(5):
            call(side)  # warm up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        capture = torch.cuda.current_stream()
        for _ in range(iters):
            call(capture)
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(RUNS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / iters)
    del graph
    return sorted(times)[len(times) // 2]


def rank_main(rank, nranks, port, iters):
    import torch
    import torch.distributed as dist

    import ncclbind
    try:
        torch.cuda.set_device(rank)
        store = dist.TCPStore("127.0.0.1", port, nranks, rank == 0)
        uid = ncclbind.UniqueId.share_store(store, rank)
        comm = ncclbind.Communicator.init(nranks, rank, uid, device=rank)
        dist.init_process_group("nccl", store=store, rank=rank, world_size=nranks,
                                device_id=torch.device("cuda", rank))
        pool = ncclbind.NcclSymPool(comm, 4 << 20)
        stream = torch.cuda.current_stream()
        if rank == 0:
            print(f"{nranks} ranks, {iters} back-to-back in-place all_reduce calls per run, median of {RUNS} runs",
                  flush=True)
            print(f"{'bytes':>10} {'symmetric us':>13} {'plain us':>10} {'torch.dist us':>14} {'sym/plain':>10}"
                  f" {'sym graph us':>13} {'plain graph us':>15} {'sym/plain':>10}", flush=True)
        for nbytes in SIZES:
            count = nbytes // 4
            sym = pool.tensor("float32", count)
            sym.fill_(1.0)
            plain = torch.ones(count, device="cuda")
            theirs = torch.ones(count, device="cuda")
            t_sym = timed(torch, lambda: comm.all_reduce(sym, stream=stream), iters)
            t_plain = timed(torch, lambda: comm.all_reduce(plain, stream=stream), iters)
            t_dist = timed(torch, lambda: dist.all_reduce(theirs), iters)
            g_sym = graph_timed(torch, lambda s: comm.all_reduce(sym, stream=s), iters)
            g_plain = graph_timed(torch, lambda s: comm.all_reduce(plain, stream=s), iters)
            if rank == 0:
                print(f"{nbytes:>10} {t_sym:>13.2f} {t_plain:>10.2f} {t_dist:>14.2f} {t_sym / t_plain:>10.2f}"
                      f" {g_sym:>13.2f} {g_plain:>15.2f} {g_sym / g_plain:>10.2f}", flush=True)
            del sym, plain, theirs
            torch.cuda.synchronize()
        pool.close()
        dist.destroy_process_group()
        comm.destroy()
    except Exception:  # noqa: BLE001 - reported, and the exit status says so
        traceback.print_exc()
        sys.exit(1)


def main():
    args = sys.argv[1:]
    iters = 200
    if "--iters" in args:
        at = args.index("--iters")
        iters = int(args[at + 1])
        del args[at:at + 2]
    devices = launch.torch_gpu_count()
    nranks = launch.ranks_to_run(args, devices, default=min(2, devices))
    if nranks is None:
        return 0
    return launch.run_ranks(rank_main, nranks, (launch.free_port(), iters), timeout=240, name="sym_bench")


if __name__ == "__main__":
    sys.exit(main())
