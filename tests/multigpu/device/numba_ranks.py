"""NCCL's device API from Numba-CUDA kernels (ncclbind.device), one process per GPU, checked
element by element:

- the DevComm accessors (rank, nranks, lsa_rank, lsa_size) against the host communicator;
- every ncclCoopAny kind (cta, warp, thread, lanes(mask), warp spans with distinct ids):
  thread_rank, size, num_threads per thread, and sync;
- peer pointers: each rank writes into the next LSA peer's window, an LSA barrier session
  (arrive + wait, then sync) orders it, each rank reads its own window back;
- an all-reduce of a symmetric window with LsaReduceSum between two LSA barriers, float32 and
  int32, in several blocks (one barrier index each);
- what the loaded release lacks is refused when the kernel is compiled, naming the function and
  the release that has it (by the wrapper table, from the IR: on NCCL 2.28.9 the reduce/copy
  functions, ncclLsaReduceSum_F32 needs NCCL >= 2.29.7; its coop kinds and LSA barrier sessions
  run, over the wrapper's own ncclCoopAny); a GIN session on a DevComm without GIN is refused
  host-side (capabilities.require_gin), never launched;
- ncclGin (put with signal/counter completion actions, signal, wait_signal, wait_counter, flush)
  and the hybrid barrier session only where gin_context accepts the DevComm (GIN present); on
  one host (GIN type NONE) gin_context must refuse it host-side, and no GIN kernel is launched;
  multimem pointers: multimem_window must refuse (NVLS off here; no multicast object is created).

    python3 tests/multigpu/device/numba_ranks.py [NRANKS]

Prints PASS/FAIL lines and "numba_ranks: N ranks, P passed, F failed"; exit status 1 on any
failure. GPU only; needs torch (processes, the unique id's store, buffers), numba-cuda and nvcc
(the wrapper)."""
import os
import sys
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
from rank_checks import LANE_MASK, COOP_KINDS, Report, expected_coop, gin_and_multimem_refused, refused  # noqa: E402

BLOCKS = 4          # one LSA barrier index per block
THREADS = 128
PER_BLOCK = 1024    # elements each block reduces / exchanges
COUNT = BLOCKS * PER_BLOCK


@cuda.jit
def comm_info(comm_arg, out):
    comm = nd.dev_comm(comm_arg)
    if cuda.threadIdx.x == 0:
        out[0] = comm.rank
        out[1] = comm.nranks
        out[2] = comm.lsa_rank
        out[3] = comm.lsa_size
        team = comm.team_lsa()
        out[4] = team.nRanks
        out[5] = team.rank
        out[6] = team.stride


@cuda.jit
def coop_kinds(out):
    """out[kind, field, thread]: thread_rank, size, num_threads; -1 where the thread is not in it."""
    t = cuda.threadIdx.x
    c = nd.coop_cta()
    out[0, 0, t], out[0, 1, t], out[0, 2, t] = c.thread_rank(), c.size(), c.num_threads()
    c.sync()
    w = nd.coop_warp()
    out[1, 0, t], out[1, 1, t], out[1, 2, t] = w.thread_rank(), w.size(), w.num_threads()
    w.sync()
    s = nd.coop_thread()
    out[2, 0, t], out[2, 1, t], out[2, 2, t] = s.thread_rank(), s.size(), s.num_threads()
    s.sync()
    if (LANE_MASK >> (t % 32)) & 1:
        lanes = nd.coop_lanes(LANE_MASK)
        out[3, 0, t], out[3, 1, t], out[3, 2, t] = lanes.thread_rank(), lanes.size(), lanes.num_threads()
        lanes.sync()
    warp = t // 32
    if warp < 2:      # warps 0-1: one span, id 1
        span = nd.coop_warp_span(0, 2, 1)
        out[4, 0, t], out[4, 1, t], out[4, 2, t] = span.thread_rank(), span.size(), span.num_threads()
        span.sync()
    else:             # warps 2-3: another span, id 2
        span = nd.coop_warp_span(2, 2, 2)
        out[4, 0, t], out[4, 1, t], out[4, 2, t] = span.thread_rank(), span.size(), span.num_threads()
        span.sync()


@cuda.jit
def write_next_peer(comm_arg, win_handle, tag):
    """Rank r writes tag*1e6 + r*1e3 + i... into the next LSA peer's window (no barrier: 2.28.9's path)."""
    comm = nd.dev_comm(comm_arg)
    win = nd.window(win_handle)
    team = comm.team_lsa()
    peer = nd.peer_pointer(win, 0, team, (team.rank + 1) % team.nRanks, np.float32)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    while i < COUNT:
        peer[i] = tag * 100000 + comm.rank * 1000 + (i % 1000)
        i += cuda.gridDim.x * cuda.blockDim.x


@cuda.jit
def exchange_with_barrier(comm_arg, win_handle, out, tag):
    """The same exchange inside one kernel: arrive + wait orders the peer writes, then each
    rank reads its own window through its own peer pointer."""
    comm = nd.dev_comm(comm_arg)
    win = nd.window(win_handle)
    team = comm.team_lsa()
    coop = nd.coop_cta()
    bar = nd.lsa_barrier_session(coop, comm, team, comm.lsa_barrier(), cuda.blockIdx.x)
    bar.sync(coop, nd.MEMORY_ORDER_RELAXED)
    peer = nd.peer_pointer(win, 0, team, (team.rank + 1) % team.nRanks, np.float32)
    mine = nd.peer_pointer(win, 0, team, team.rank, np.float32)
    base = cuda.blockIdx.x * PER_BLOCK
    for i in range(base + cuda.threadIdx.x, base + PER_BLOCK, cuda.blockDim.x):
        peer[i] = tag * 100000 + comm.rank * 1000 + (i % 1000)
    bar.arrive(coop, nd.MEMORY_ORDER_RELEASE)
    bar.wait(coop, nd.MEMORY_ORDER_ACQUIRE)
    for i in range(base + cuda.threadIdx.x, base + PER_BLOCK, cuda.blockDim.x):
        out[i] = mine[i]
    bar.sync(coop, nd.MEMORY_ORDER_RELAXED)
    bar.destroy()


@cuda.jit
def read_own(comm_arg, win_handle, out):
    comm = nd.dev_comm(comm_arg)
    win = nd.window(win_handle)
    team = comm.team_lsa()
    mine = nd.peer_pointer(win, 0, team, team.rank, np.float32)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    while i < COUNT:
        out[i] = mine[i]
        i += cuda.gridDim.x * cuda.blockDim.x


@cuda.jit
def all_reduce(comm_arg, win_handle, dst):
    """One block per PER_BLOCK chunk: barrier, LsaReduceSum of the chunk, barrier."""
    comm = nd.dev_comm(comm_arg)
    win = nd.window(win_handle)
    team = comm.team_lsa()
    coop = nd.coop_cta()
    bar = nd.lsa_barrier_session(coop, comm, team, comm.lsa_barrier(), cuda.blockIdx.x)
    bar.sync(coop, nd.MEMORY_ORDER_RELAXED)
    first = cuda.blockIdx.x * PER_BLOCK
    nd.lsa_reduce_sum(coop, win, first * dst.itemsize, dst[first:], PER_BLOCK, team)
    bar.sync(coop, nd.MEMORY_ORDER_RELEASE)
    bar.destroy()


@cuda.jit
def gin_put_signal(comm_arg, gin_index, win_handle, nbytes):
    """Rank r puts its window's first nbytes into the next rank's window, incrementing signal 0
    there (and counter 0 here), waits for the previous rank's signal, flushes. Only launched where
    ncclbind.device.gin_context accepts the DevComm (GIN present)."""
    comm = nd.dev_comm(comm_arg)
    win = nd.window(win_handle)
    coop = nd.coop_cta()
    net = nd.gin(comm, gin_index)
    world = comm.team_world()
    peer = (comm.rank + 1) % comm.nranks
    net.put(coop, world, peer, win, 0, win, 0, nbytes, nd.GIN_SIGNAL_INC, 0, 1, nd.GIN_COUNTER_INC, 0)
    net.signal(coop, world, peer, 1, nd.GIN_SIGNAL_ADD, 5)
    net.wait_signal(coop, 0, 1)
    net.wait_counter(coop, 0, 1)
    net.flush(coop)
    net.reset_signal(0)


@cuda.jit
def hybrid_barrier(comm_arg, gin_index):
    """The hybrid (LSA + GIN) barrier of the world, synced once per block."""
    comm = nd.dev_comm(comm_arg)
    coop = nd.coop_cta()
    net = nd.gin(comm, gin_index)
    bar = nd.world_barrier_session(coop, comm, net, cuda.blockIdx.x)
    bar.sync(coop, nd.MEMORY_ORDER_ACQ_REL)
    bar.destroy()


@cuda.jit
def multimem_all_reduce(comm_arg, win_handle, dst, staging):
    """Multimem all-reduce of the window into dst, then dst copied to every peer's staging window
    position through the multicast address. Only launched where multimem_window accepts the DevComm."""
    comm = nd.dev_comm(comm_arg)
    win = nd.window(win_handle)
    coop = nd.coop_cta()
    mc = nd.multimem_pointer(win, 0, comm.lsa_multimem(), np.float32)
    nd.multimem_reduce_sum(coop, mc, dst, dst.size)
    mc2 = nd.lsa_multimem_pointer(win, staging, comm, np.float32)
    nd.multimem_copy(coop, dst, mc2, dst.size)
    nd.multimem_reduce_sum_copy(coop, mc2, mc, dst.size)


MAX_PEERS = 8
OFFSET = 256  # the byte offset the pointer queries ask for


@cuda.jit
def pointer_queries(comm_arg, win_handle, ptrs, ranks):
    """ptrs: local, lsa(own), world peer(own), peer(own, team_lsa), then per LSA peer p: lsa(p),
    peer(p, team_lsa); ranks: LSA rank p as a world rank, then this rank's world rank as an LSA rank."""
    comm = nd.dev_comm(comm_arg)
    win = nd.window(win_handle)
    if cuda.threadIdx.x == 0:
        lsa = comm.team_lsa()
        ptrs[0] = nd.address(nd.local_pointer(win, OFFSET, np.uint8))
        ptrs[1] = nd.address(nd.lsa_pointer(win, OFFSET, comm.lsa_rank, np.uint8))
        ptrs[2] = nd.address(nd.world_peer_pointer(win, OFFSET, comm.rank, np.uint8))
        ptrs[3] = nd.address(nd.peer_pointer(win, OFFSET, lsa, comm.lsa_rank, np.uint8))
        for p in range(comm.lsa_size):
            ptrs[4 + 2 * p] = nd.address(nd.lsa_pointer(win, OFFSET, p, np.uint8))
            ptrs[5 + 2 * p] = nd.address(nd.peer_pointer(win, OFFSET, lsa, p, np.uint8))
            ranks[p] = comm.team_rank_to_world(lsa, p)
        ranks[MAX_PEERS] = comm.team_rank_to_lsa(comm.team_world(), comm.rank)


@cuda.jit
def surface(comm_arg, win_handle, ctx, src, dst, out):
    """The rest of the device API, compiled everywhere it exists and launched nowhere (it needs CFT,
    GIN or multicast, which the GPU machines lack): CFT teams, resource-buffer pointers and
    logical endpoints, window logical endpoints, GIN put_value / get / signal shadow with explicit
    release scopes, a GIN context with a sharing mode, the multimem LSA barrier, local reduce-copy."""
    comm = nd.dev_comm(comm_arg)
    win = nd.window(win_handle)
    coop = nd.coop_cta()
    cft = comm.team_cft(0)
    multi = comm.team_cft_multimem()
    out[0] = cft.nRanks + multi.nRanks
    p = comm.resource_buffer_local_pointer(0, np.float32)
    p[0] = comm.resource_buffer_lsa_pointer(0, 0, np.float32)[0] + comm.resource_buffer_peer_pointer(
        0, cft, 0, np.float32)[0] + comm.resource_buffer_lsa_multimem_pointer(0, np.float32)[0] + \
        comm.resource_buffer_multimem_pointer(0, comm.lsa_multimem(), np.float32)[0]
    le = nd.cft_le_info(win, 0, 0, cft, comm)
    le2 = nd.peer_le_info(win, 0, comm.rank, comm)
    le3 = nd.multimem_le_info(win, 0, comm)
    le4 = comm.resource_buffer_cft_le_info(0, 0)
    le5 = comm.resource_buffer_peer_le_info(0, comm.rank)
    le6 = comm.resource_buffer_multimem_le_info(0)
    out[1] = le[0] + le2[0] + le3[0] + le4[0] + le5[0] + le6[0] + le[1] + le6[1]
    net = nd.gin_with(comm, ctx, 4, 1)
    team = comm.team_world()
    net.put_value(coop, team, 0, win, 0, 7, 8, nd.GIN_SIGNAL_ADD, 0, 1, nd.THREAD_SCOPE_BLOCK, nd.THREAD_SCOPE_SYSTEM)
    net.get(coop, team, 0, win, 0, win, 64, 8)
    net.put(coop, team, 0, win, 0, win, 64, 8, nd.GIN_NONE, 0, 1, nd.GIN_NONE, 0, nd.THREAD_SCOPE_BLOCK,
            nd.THREAD_SCOPE_DEVICE)
    net.signal(coop, team, 0, 0, nd.GIN_SIGNAL_INC, 1, nd.THREAD_SCOPE_THREAD, nd.THREAD_SCOPE_DEVICE)
    out[2] = net.signal_shadow_pointer(0)[0]
    net.flush(coop)
    bar = nd.lsa_barrier_session_multimem(coop, comm, comm.team_lsa(), comm.lsa_barrier(), 0, comm.lsa_multimem())
    bar.arrive(coop, nd.MEMORY_ORDER_RELEASE)
    bar.wait(coop, nd.MEMORY_ORDER_ACQUIRE)
    bar.destroy()
    nd.local_reduce_sum_copy(coop, 2, src, 64, 1, dst, 0, 16)


def rank_main(rank, nranks, port):
    import torch
    import torch.distributed as dist

    import ncclbind
    from ncclbind.device import capabilities, cuda_source, kernel_arg
    torch.cuda.set_device(rank)
    cuda.select_device(rank)
    report = Report(rank)
    store = dist.TCPStore("127.0.0.1", port, nranks, rank == 0)
    uid = ncclbind.UniqueId.share_store(store, rank)
    comm = ncclbind.Communicator.init(nranks, rank, uid, device=rank)
    missing = cuda_source.missing_functions()
    try:
        dev = comm.create_dev_comm(ncclbind.NCCLDevCommRequirements(lsa_barrier_count=BLOCKS))
        comm_arg = kernel_arg(dev)
        pool = ncclbind.NcclMemoryResource(device=rank)
        block = pool.allocate(COUNT * 8)
        window_buf = torch.as_tensor(block).view(torch.uint8)[:COUNT * 4].view(torch.float32)
        win = comm.register_window(window_buf, flags=ncclbind._nccl.NCCL_WIN_COLL_SYMMETRIC)
        win_arg = kernel_arg(win)

        info = cuda.to_device(np.full(7, -1, dtype=np.int32))
        comm_info[1, 32](comm_arg, info)
        got = info.copy_to_host()
        lsa = dev.dev_comm.lsaSize
        report.compare(got, [rank, nranks, dev.dev_comm.lsaRank, lsa, lsa, dev.dev_comm.lsaRank, 1],
                       "DevComm accessors and team_lsa")
        report.check(got[0] == comm.rank and got[1] == comm.nranks, "DevComm rank/nranks = the communicator's")

        # peer pointers with the host ordering the writes (every release)
        write_next_peer[BLOCKS, THREADS](comm_arg, win_arg, 1)
        cuda.synchronize()
        comm.all_reduce(torch.zeros(1, device="cuda"))  # all ranks' writes are done
        torch.cuda.synchronize()
        out = cuda.to_device(np.zeros(COUNT, dtype=np.float32))
        read_own[BLOCKS, THREADS](comm_arg, win_arg, out)
        # the rank whose next LSA peer this rank is (LSA teams are consecutive world ranks)
        prev_rank = (rank - dev.dev_comm.lsaRank) + (dev.dev_comm.lsaRank - 1) % lsa
        i = np.arange(COUNT)
        report.compare(out.copy_to_host(), (100000 + prev_rank * 1000 + i % 1000).astype(np.float32),
                       "peer pointers: the previous LSA peer's writes, read back")

        comm.all_reduce(torch.zeros(1, device="cuda"))
        torch.cuda.synchronize()
        # What each kernel calls, by the release's wrapper table (from the IR), not by version.
        coop_missing = sorted(f for f in missing if f.startswith("ncclCoop"))
        barrier_missing = coop_missing + sorted(f for f in missing if f.startswith("ncclLsaBarrierSession"))
        if coop_missing:
            refused(report, lambda: coop_kinds[1, THREADS](cuda.to_device(np.zeros((5, 3, THREADS), np.int32))),
                    "coop kinds")
        else:
            kinds = cuda.to_device(np.full((5, 3, THREADS), -1, dtype=np.int32))
            coop_kinds[1, THREADS](kinds)
            got = kinds.copy_to_host()
            want = expected_coop(THREADS)
            for k, name in enumerate(COOP_KINDS):
                report.compare(got[k], want[k], f"coop {name}: thread_rank, size, num_threads")
        ptrs = cuda.to_device(np.zeros(4 + 2 * MAX_PEERS, dtype=np.uint64))
        conv = cuda.to_device(np.full(MAX_PEERS + 1, -1, dtype=np.int32))
        if any(f in missing for f in ("ncclGetLocalPointer", "ncclGetLsaPointer", "ncclGetPeerPointer",
                                      "ncclTeamRankToWorld", "ncclTeamRankToLsa")):
            refused(report, lambda: pointer_queries[1, 32](comm_arg, win_arg, ptrs, conv),
                    "local / LSA / world peer pointers and rank conversions")
        else:
            pointer_queries[1, 32](comm_arg, win_arg, ptrs, conv)
            cuda.synchronize()
            p, lsa_n = ptrs.copy_to_host(), dev.dev_comm.lsaSize
            # the window's own mapping in NCCL's LSA address range (not the address it was registered at)
            report.compare(p[:4], [p[0]] * 4, "local = lsa(own) = world peer(own) = peer(own, team_lsa), not null")
            report.check(p[0] != 0, "the local pointer is not null")
            peers = p[4:4 + 2 * lsa_n].reshape(lsa_n, 2)
            report.compare(peers[:, 0], peers[:, 1], "lsa_pointer(p) = peer_pointer(p, team_lsa) for every LSA peer")
            first, got_conv = rank - dev.dev_comm.lsaRank, conv.copy_to_host()
            report.compare(got_conv[:lsa_n].tolist() + [got_conv[MAX_PEERS]],
                           list(range(first, first + lsa_n)) + [dev.dev_comm.lsaRank],
                           "team_rank_to_world (LSA ranks), team_rank_to_lsa (own)")
        if barrier_missing:
            refused(report, lambda: exchange_with_barrier[BLOCKS, THREADS](comm_arg, win_arg, out, 2),
                    "LSA barrier session")
        else:
            out2 = cuda.to_device(np.zeros(COUNT, dtype=np.float32))
            exchange_with_barrier[BLOCKS, THREADS](comm_arg, win_arg, out2, 2)
            cuda.synchronize()
            report.compare(out2.copy_to_host(), (200000 + prev_rank * 1000 + i % 1000).astype(np.float32),
                           "LSA barrier session (sync, arrive+wait, destroy) orders peer-pointer writes")

        for dtype, torch_dtype in ((np.float32, torch.float32), (np.int32, torch.int32)):
            function = nd.reduce_copy_function("ncclLsaReduceSum", dtype)
            values = lambda r: ((r + np.arange(COUNT)) % 7 + 1).astype(dtype)  # noqa: E731
            window_view = torch.as_tensor(block).view(torch.uint8)[:COUNT * 4].view(torch_dtype)
            window_view.copy_(torch.from_numpy(values(rank)))
            torch.cuda.synchronize()
            comm.all_reduce(torch.zeros(1, device="cuda"))
            torch.cuda.synchronize()
            dst = cuda.to_device(np.zeros(COUNT, dtype=dtype))
            if function in missing or "ncclCoopAnyInitCta" in missing:
                refused(report, lambda: all_reduce[BLOCKS, THREADS](comm_arg, win_arg, dst), f"all-reduce {function}")
                continue
            all_reduce[BLOCKS, THREADS](comm_arg, win_arg, dst)
            cuda.synchronize()
            want = sum(values(r).astype(np.int64) for r in range(nranks)).astype(dtype) if lsa == nranks else None
            if want is None:
                report.check(True, f"all-reduce {function}: LSA team smaller than the world, sum not checked")
            else:
                report.compare(dst.copy_to_host(), want, f"all-reduce of a symmetric window with {function}")

        try:
            capabilities.require_gin(dev, "a GIN barrier session")
            report.check(capabilities.has_gin(dev), "GIN present, require_gin passes")
        except ncclbind.NcclError as error:
            report.check("GIN" in str(error), f"GIN on a DevComm without it: refused before launch ({type(error).__name__})")
        try:
            capabilities.require_multimem(dev, "ncclMultimemReduceSum")
            report.check(capabilities.has_multimem(dev), "multimem present")
        except ncclbind.NcclError as error:
            report.check("multicast" in str(error), f"multimem with NVLS off: refused before launch ({type(error).__name__})")

        # ncclGin (put/signal/wait/flush) and the hybrid barrier: the GIN context comes from
        # gin_context, which refuses a DevComm without GIN host-side; no GIN kernel is launched then.
        # Multimem: NVLS is off on these machines, so multimem_window must refuse; a multicast
        # object is never created here (NCCL_NVLS_ENABLE=0) and no multimem kernel is launched.
        gin_functions = ("ncclGin_C_init", "ncclGinPut_v2", "ncclGinSignal_v2", "ncclGinWaitSignal", "ncclGinFlush")
        gin_index = gin_and_multimem_refused(report, dev, win)
        if gin_index is not None:
            if any(f in missing for f in gin_functions):
                refused(report, lambda: gin_put_signal[1, THREADS](comm_arg, gin_index, win_arg, 256), "ncclGin put")
            else:
                gin_put_signal[1, THREADS](comm_arg, gin_index, win_arg, 256)
                cuda.synchronize()
                report.check(True, "ncclGin put/signal/wait_signal/flush ran")
                hybrid_barrier[BLOCKS, THREADS](comm_arg, gin_index)
                cuda.synchronize()
                report.check(True, "hybrid barrier session synced")
        comm.all_reduce(torch.zeros(1, device="cuda"))
        torch.cuda.synchronize()
        win.close()
        pool.deallocate(block) if hasattr(pool, "deallocate") else None
        dev.close()
    except Exception:  # noqa: BLE001 - a failure in one rank is reported, not hidden
        traceback.print_exc()
        report.check(False, "no exception")
    finally:
        comm.destroy()
    print(f"rank {rank}: {report.passed} passed, {report.failed} failed", flush=True)
    sys.exit(1 if report.failed else 0)


def main():
    nranks = launch.ranks_to_run(sys.argv[1:], launch.torch_gpu_count())
    if nranks is None:
        return 0
    print(f"ncclbind uses {NCCL}", flush=True)
    return launch.run_ranks(rank_main, nranks, (launch.free_port(),), timeout=280, name="numba_ranks")


if __name__ == "__main__":
    sys.exit(main())
