"""NCCL's device API from CuTe DSL kernels (ncclbind.device.cute, nccl4py 0.6.0's
nccl.core.device.cute API), one process per GPU, checked element by element:

- every coop kind (cta, warp, thread, lanes(mask), warp spans with distinct ids): thread_rank,
  size, num_threads per thread, and sync;
- the DevComm fields and its teams (world, LSA, rail) against the host communicator, and the rank
  conversions (team_rank_to_world / team_rank_to_lsa);
- a window's local, LSA and peer pointers (with and without a team) against each other and the
  host's address of the window;
- peer pointers and the LSA barrier session: each rank writes into the next LSA peer's window,
  arrive + wait order it, each reads its own window back, sync, destroy; one barrier index per block;
- lsa_reduce_sum (float32, int32), lsa_copy (each rank's slice into every peer: an all-gather)
  and lsa_reduce_sum_copy (the sum into every peer's second window) between barriers;
- what the loaded release lacks is refused while the kernel is traced, naming the function and
  the first release that has it (the wrapper table's, from the IR), e.g. the reduce/copy
  functions on NCCL 2.28.9;
- GIN and multimem on a machine without them (one host, NVLS off): refused host-side before any
  launch (rank_checks.gin_and_multimem_refused); a GIN kernel is compiled, not run.

    python3 tests/multigpu/device/cute_ranks.py [NRANKS]
    python3 tests/multigpu/device/cute_ranks.py --compile-only [K/N]   # no GPU: every (N-th from K) kernel to SASS

--compile-only traces and compiles every kernel with the compile-only placeholders
(ncclbind.device.cute.runtime) for sm_90a, through the loaded release's bitcode, and checks the
refusals; it needs no GPU and no torch (tests/python/test_device_cute.py runs it per release).
Prints PASS/FAIL lines, each kernel's compile time, and "N passed, F failed"; exit status 1 on
any failure."""
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import launch  # noqa: E402  (tests/multigpu/launch.py: NVLS off, the ranks' launch)

# ncclbind's libnccl (NCCLBIND_NCCL_PATH) before torch, which links its own libnccl.so.2.
import ncclbind  # noqa: E402,F401

NCCL = launch.loaded_nccl()

import numpy as np  # noqa: E402
import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402

import ncclbind.device.cute as nc  # noqa: E402
from rank_checks import COOP_KINDS, LANE_MASK, Report, expected_coop, gin_and_multimem_refused, refused  # noqa: E402

BLOCKS = 4          # one LSA barrier index per block
THREADS = 128
PER_BLOCK = 1024    # elements each block exchanges / reduces
COUNT = BLOCKS * PER_BLOCK
MAX_PEERS = 8
POINTERS = 4 + 2 * MAX_PEERS
OFFSET = 256        # the byte offset the pointer queries ask for
ARCH = "sm_90a"


# ---- kernels ---------------------------------------------------------------------------------

@cute.kernel
def coop_kinds_kernel(out: cute.Tensor):
    """out[(kind * 3 + field) * THREADS + thread]: thread_rank, size, num_threads."""
    t, _, _ = cute.arch.thread_idx()
    c = nc.cta()
    out[t], out[THREADS + t], out[2 * THREADS + t] = c.thread_rank, c.size, c.num_threads
    c.sync()
    w = nc.warp()
    out[3 * THREADS + t], out[4 * THREADS + t], out[5 * THREADS + t] = w.thread_rank, w.size, w.num_threads
    w.sync()
    s = nc.thread()
    out[6 * THREADS + t], out[7 * THREADS + t], out[8 * THREADS + t] = s.thread_rank, s.size, s.num_threads
    s.sync()
    if (cutlass.Uint32(LANE_MASK) >> cutlass.Uint32(t % 32)) & cutlass.Uint32(1) != cutlass.Uint32(0):
        lanes = nc.lanes(LANE_MASK)
        out[9 * THREADS + t], out[10 * THREADS + t], out[11 * THREADS + t] = (lanes.thread_rank, lanes.size,
                                                                              lanes.num_threads)
        lanes.sync()
    if t // 32 < 2:   # warps 0-1: one span, id 1
        span = nc.warp_span(0, 2, 1)
        out[12 * THREADS + t], out[13 * THREADS + t], out[14 * THREADS + t] = (span.thread_rank, span.size,
                                                                               span.num_threads)
        span.sync()
    else:             # warps 2-3: another, id 2
        span = nc.warp_span(2, 2, 2)
        out[12 * THREADS + t], out[13 * THREADS + t], out[14 * THREADS + t] = (span.thread_rank, span.size,
                                                                               span.num_threads)
        span.sync()


@cute.jit
def coop_kinds(out: cute.Tensor):
    coop_kinds_kernel(out).launch(grid=[1, 1, 1], block=[THREADS, 1, 1])


@cute.kernel
def comm_info_kernel(dev_comm: nc.DevComm, out: cute.Tensor):
    t, _, _ = cute.arch.thread_idx()
    if t == 0:
        out[0], out[1], out[2], out[3] = dev_comm.rank, dev_comm.n_ranks, dev_comm.lsa_rank, dev_comm.lsa_size
        for i, team in enumerate((dev_comm.team_world, dev_comm.team_lsa, dev_comm.team_rail)):
            out[4 + 3 * i], out[5 + 3 * i], out[6 + 3 * i] = team.nRanks, team.rank, team.stride


@cute.jit
def comm_info(dev_comm: nc.DevComm, out: cute.Tensor):
    comm_info_kernel(dev_comm, out).launch(grid=[1, 1, 1], block=[32, 1, 1])


@cute.kernel
def rank_conversions_kernel(dev_comm: nc.DevComm, out: cute.Tensor):
    """out[p]: LSA rank p as a world rank; out[MAX_PEERS]: this rank's world rank as an LSA rank."""
    t, _, _ = cute.arch.thread_idx()
    if t == 0:
        lsa = dev_comm.team_lsa
        for p in cutlass.range(dev_comm.lsa_size):
            out[p] = dev_comm.team_rank_to_world(lsa, p)
        out[MAX_PEERS] = dev_comm.team_rank_to_lsa(dev_comm.team_world, dev_comm.rank)


@cute.jit
def rank_conversions(dev_comm: nc.DevComm, out: cute.Tensor):
    rank_conversions_kernel(dev_comm, out).launch(grid=[1, 1, 1], block=[32, 1, 1])


def _address(ptr):
    return cute.make_ptr(cutlass.Int8, ptr).toint()


@cute.kernel
def pointers_kernel(dev_comm: nc.DevComm, win: nc.Window, out: cute.Tensor):
    """out: local, lsa(own), peer(own world rank), peer(own LSA rank, team_lsa), then per LSA
    peer p: lsa(p) and peer(p, team_lsa)."""
    t, _, _ = cute.arch.thread_idx()
    if t == 0:
        lsa = dev_comm.team_lsa
        out[0] = _address(win.local_pointer(OFFSET))
        out[1] = _address(win.lsa_pointer(OFFSET, dev_comm.lsa_rank))
        out[2] = _address(win.peer_pointer(OFFSET, dev_comm.rank))
        out[3] = _address(win.peer_pointer(OFFSET, dev_comm.lsa_rank, lsa))
        for p in cutlass.range(dev_comm.lsa_size):
            out[4 + 2 * p] = _address(win.lsa_pointer(OFFSET, p))
            out[5 + 2 * p] = _address(win.peer_pointer(OFFSET, p, lsa))


@cute.jit
def pointers(dev_comm: nc.DevComm, win: nc.Window, out: cute.Tensor):
    pointers_kernel(dev_comm, win, out).launch(grid=[1, 1, 1], block=[32, 1, 1])


@cute.kernel
def exchange_kernel(dev_comm: nc.DevComm, win: nc.Window, out: cute.Tensor):
    """Writes 100000 + rank * 1000 + i % 1000 into the next LSA peer's window (peer_pointer with
    team_lsa: every release), LSA barrier arrive/wait, reads this rank's window into out."""
    t, _, _ = cute.arch.thread_idx()
    b, _, _ = cute.arch.block_idx()
    coop = nc.cta()
    lsa = dev_comm.team_lsa
    layout = cute.make_layout(COUNT)
    bar = nc.lsa_session(coop, dev_comm, lsa, dev_comm.lsa_barrier, b)
    peer = cute.make_tensor(cute.make_ptr(cutlass.Float32, win.peer_pointer(0, (lsa.rank + 1) % lsa.nRanks, lsa)),
                            layout)
    mine = win.tensor(cutlass.Float32, layout)
    for k in cutlass.range(PER_BLOCK // THREADS):
        i = b * PER_BLOCK + k * THREADS + t
        peer[i] = cutlass.Float32(100000 + dev_comm.rank * 1000 + i % 1000)
    bar.arrive(coop, nc.MemoryOrder.RELEASE)
    bar.wait(coop, nc.MemoryOrder.ACQUIRE)
    for k in cutlass.range(PER_BLOCK // THREADS):
        i = b * PER_BLOCK + k * THREADS + t
        out[i] = mine[i]
    bar.sync(coop, nc.MemoryOrder.RELAXED)  # no rank rewrites a window another still reads
    bar.destroy()


@cute.jit
def exchange(dev_comm: nc.DevComm, win: nc.Window, out: cute.Tensor):
    exchange_kernel(dev_comm, win, out).launch(grid=[BLOCKS, 1, 1], block=[THREADS, 1, 1])


@cute.kernel
def reduce_sum_kernel(dev_comm: nc.DevComm, win: nc.Window, dst: cute.Tensor):
    """dst = the LSA team's sum of their windows (lsa_reduce_sum, a block per chunk)."""
    b, _, _ = cute.arch.block_idx()
    coop = nc.cta()
    lsa = dev_comm.team_lsa
    bar = nc.lsa_default(coop, dev_comm, b)
    bar.sync(coop, nc.MemoryOrder.RELAXED)
    chunk = cute.make_layout(PER_BLOCK)
    src = win.tensor(dst.element_type, chunk, b * PER_BLOCK * (dst.element_type.width // 8))
    nc.lsa_reduce_sum(coop, win, src, cute.make_tensor(dst.iterator + b * PER_BLOCK, chunk), PER_BLOCK, team=lsa)
    bar.sync(coop, nc.MemoryOrder.RELEASE)
    bar.destroy()


@cute.jit
def reduce_sum(dev_comm: nc.DevComm, win: nc.Window, dst: cute.Tensor):
    reduce_sum_kernel(dev_comm, win, dst).launch(grid=[BLOCKS, 1, 1], block=[THREADS, 1, 1])


@cute.kernel
def copies_kernel(dev_comm: nc.DevComm, src: cute.Tensor, gather: nc.Window, sums: nc.Window):
    """lsa_copy: src into slice `lsa rank` of every LSA peer's `gather` window (an all-gather);
    then lsa_reduce_sum_copy: the team's sum of those gathered slices 0 into `sums` everywhere."""
    coop = nc.cta()
    lsa = dev_comm.team_lsa
    bar = nc.lsa_default(coop, dev_comm, 0)
    bar.sync(coop, nc.MemoryOrder.RELAXED)
    layout = cute.make_layout(COUNT)
    nc.lsa_copy(coop, src, gather, gather.tensor(cutlass.Float32, layout, lsa.rank * COUNT * 4), COUNT, team=lsa)
    bar.sync(coop, nc.MemoryOrder.RELEASE)
    nc.lsa_reduce_sum_copy(coop, gather, gather.tensor(cutlass.Float32, layout), sums,
                           sums.tensor(cutlass.Float32, layout), COUNT, team=lsa)
    bar.sync(coop, nc.MemoryOrder.RELEASE)
    bar.destroy()


@cute.jit
def copies(dev_comm: nc.DevComm, src: cute.Tensor, gather: nc.Window, sums: nc.Window):
    copies_kernel(dev_comm, src, gather, sums).launch(grid=[1, 1, 1], block=[THREADS, 1, 1])


@cute.kernel
def gin_kernel(dev_comm: nc.DevComm, win: nc.Window):
    """GIN put with a signal, signal, wait_signal, flush and a rail GIN barrier:
    compiled everywhere, run only where the DevComm has GIN."""
    coop = nc.cta()
    gin = dev_comm.gin(nc.GinBackendMask.ALL, 0)
    world = dev_comm.team_world
    layout = cute.make_layout(64)
    peer = (world.rank + 1) % world.nRanks
    gin.put(world, peer, win, win.tensor(cutlass.Float32, layout, 0), win, win.tensor(cutlass.Float32, layout, 256),
            coop, is_signal=True, signal_id=0, signal_op=0, signal_op_arg=1)
    gin.signal(world, peer, True, 1, 0, 1, coop)
    gin.wait_signal(coop, signal=0, least=1)
    gin.flush(coop)
    bar = nc.rail_gin(coop, gin, dev_comm, 0)
    bar.sync(coop, nc.MemoryOrder.RELEASE, nc.GinFenceLevel.PUT | nc.GinFenceLevel.GET)
    bar.destroy()


@cute.jit
def gin_program(dev_comm: nc.DevComm, win: nc.Window):
    gin_kernel(dev_comm, win).launch(grid=[1, 1, 1], block=[THREADS, 1, 1])


# ---- the checks -------------------------------------------------------------------------------

def release_has(*functions):
    from ncclbind.device import cuda_source
    missing = cuda_source.missing_functions()
    return not any(f in missing for f in functions)


REDUCE = ("ncclLsaReduceSum_F32", "ncclLsaReduceSum_I32")
COPIES = ("ncclLsaCopy_F32", "ncclLsaReduceSumCopy_F32")
POINTER_QUERIES = ("ncclGetLocalPointer", "ncclGetLsaPointer", "ncclGetPeerPointer")
CONVERSIONS = ("ncclTeamRankToWorld", "ncclTeamRankToLsa")
GIN = ("ncclGinPut_v2", "ncclGinSignal_v2", "ncclGinWaitSignal", "ncclGinFlush", "ncclGinBarrierSessionInit")


def compiled(report, what, program, *args):
    """cute.compile of `program` (the device's arch, or ARCH without one), timed."""
    start = time.time()
    options = "" if os.environ.get("CUTE_RANKS_GPU") else f"--gpu-arch {ARCH}"
    kernel = cute.compile(program, *args, options=options)
    print(f"rank {report.rank}: compiled {what} in {time.time() - start:.2f} s", flush=True)
    return kernel


def compile_only(part=0, parts=1):
    """Every kernel traced and compiled with placeholders, the refusals checked; `part` of `parts`:
    every parts-th of them from part (the CPU test runs them in parallel)."""
    from cutlass.cute.runtime import make_fake_compact_tensor
    from ncclbind.device.cute import runtime
    report = Report(0)
    fake = runtime.make_fake_dev_comm
    win = runtime.make_fake_window
    ints, floats, longs = (make_fake_compact_tensor(t, (n,)) for t, n in
                           ((cutlass.Int32, 15 * THREADS), (cutlass.Float32, COUNT), (cutlass.Int64, POINTERS)))
    cases = [("coop kinds", coop_kinds, (ints,), ()), ("DevComm and teams", comm_info, (fake(), ints), ()),
             ("rank conversions", rank_conversions, (fake(), ints), CONVERSIONS),
             ("window pointers", pointers, (fake(), win(), longs), POINTER_QUERIES),
             ("peer exchange with an LSA barrier session", exchange, (fake(), win(), floats), ()),
             ("lsa_reduce_sum float32", reduce_sum, (fake(), win(), floats), REDUCE),
             ("lsa_reduce_sum int32", reduce_sum, (fake(), win(), make_fake_compact_tensor(cutlass.Int32, (COUNT,))),
              REDUCE),
             ("lsa_copy and lsa_reduce_sum_copy", copies, (fake(), floats, win(), win()), COPIES),
             ("GIN put/signal/wait/flush and a rail GIN barrier", gin_program, (fake(), win()), GIN)]
    import cute_oneshot  # the benchmark's kernels (oneshot_bench.py) compile here too
    for kind, program in cute_oneshot.PROGRAMS.items():
        cases.append((f"one-shot all-reduce ({kind})", program,
                      (fake(), win(), floats, cutlass.Int32(1), cutlass.Int32(1), cutlass.Int32(1)),
                      cute_oneshot.NEEDS[kind]))
    mine = cases[part::parts]
    for what, program, args, needs in mine:
        if not release_has(*needs):
            refused(report, lambda: compiled(report, what, program, *args), what)
            continue
        try:
            kernel = compiled(report, what, program, *args)
            report.check(kernel is not None, f"{what}: compiled to SASS for {ARCH}")
        except Exception:  # noqa: BLE001 - reported as a failure with its traceback
            traceback.print_exc()
            report.check(False, f"{what}: compiled")
    print(f"cute_ranks --compile-only (NCCL {NCCL.version}, {len(mine)} of {len(cases)} kernels): "
          f"{report.passed} passed, {report.failed} failed", flush=True)
    return 1 if report.failed else 0


def rank_main(rank, nranks, port):
    import torch
    import torch.distributed as dist
    from cutlass.cute.runtime import from_dlpack

    torch.cuda.set_device(rank)
    report = Report(rank)
    store = dist.TCPStore("127.0.0.1", port, nranks, rank == 0)
    comm = ncclbind.Communicator.init(nranks, rank, ncclbind.UniqueId.share_store(store, rank), device=rank)
    try:
        dev = comm.create_dev_comm(ncclbind.NCCLDevCommRequirements(lsa_barrier_count=BLOCKS))
        pool = ncclbind.NcclMemoryResource(device=rank)
        blocks = [pool.allocate(MAX_PEERS * COUNT * 4) for _ in range(3)]
        bufs = [torch.as_tensor(b).view(torch.uint8)[:MAX_PEERS * COUNT * 4] for b in blocks]
        wins = [comm.register_window(b, flags=ncclbind._nccl.NCCL_WIN_COLL_SYMMETRIC) for b in bufs]
        win = wins[0]
        lsa, lsa_rank = dev.dev_comm.lsaSize, dev.dev_comm.lsaRank
        # the views, as nccl4py's programs pass them (the DSL checks an argument against its
        # parameter's annotation before it looks for the resource's adapter)
        D, W = nc.DevComm(dev), nc.Window(win)

        out = torch.full((15 * THREADS,), -1, dtype=torch.int32, device="cuda")
        compiled(report, "coop kinds", coop_kinds, from_dlpack(out))(from_dlpack(out))
        torch.cuda.synchronize()
        got = out.cpu().numpy().reshape(5, 3, THREADS)
        want = expected_coop(THREADS)
        for k, name in enumerate(COOP_KINDS):
            report.compare(got[k], want[k], f"coop {name}: thread_rank, size, num_threads")

        info = torch.full((13,), -1, dtype=torch.int32, device="cuda")
        compiled(report, "DevComm and teams", comm_info, D, from_dlpack(info))(D, from_dlpack(info))
        torch.cuda.synchronize()
        report.compare(info.cpu().numpy(), [rank, nranks, lsa_rank, lsa, nranks, rank, 1, lsa, lsa_rank, 1,
                                            nranks // lsa, rank // lsa, lsa], "DevComm fields and teams world/LSA/rail")

        conv = torch.full((MAX_PEERS + 1,), -1, dtype=torch.int32, device="cuda")
        if release_has(*CONVERSIONS):
            compiled(report, "rank conversions", rank_conversions, D, from_dlpack(conv))(D, from_dlpack(conv))
            torch.cuda.synchronize()
            first = rank - lsa_rank
            got_conv = conv.cpu().numpy()
            report.compare(got_conv[:lsa].tolist() + [got_conv[MAX_PEERS]], list(range(first, first + lsa)) + [lsa_rank],
                           "team_rank_to_world (LSA ranks), team_rank_to_lsa (own)")
        else:
            refused(report, lambda: compiled(report, "rank conversions", rank_conversions, D, from_dlpack(conv)),
                    "rank conversions")

        ptrs = torch.zeros((POINTERS,), dtype=torch.int64, device="cuda")
        if release_has(*POINTER_QUERIES):
            compiled(report, "window pointers", pointers, D, W, from_dlpack(ptrs))(D, W, from_dlpack(ptrs))
            torch.cuda.synchronize()
            p = ptrs.cpu().numpy()
            # the window's own mapping in NCCL's LSA address range (not the address it was registered at)
            report.compare(p[:4], [p[0]] * 4, "local = lsa(own) = peer(own world rank) = peer(own, team_lsa)")
            report.check(p[0] != 0, "the local pointer is not null")
            peers = p[4:4 + 2 * lsa].reshape(lsa, 2)
            report.compare(peers[:, 0], peers[:, 1], "lsa_pointer(p) = peer_pointer(p, team_lsa) for every LSA peer")
            report.check(len(set(peers[:, 0].tolist())) == lsa and peers[lsa_rank, 0] == p[0],
                         "LSA peers' pointers distinct, own = local")
        else:
            refused(report, lambda: compiled(report, "window pointers", pointers, D, W, from_dlpack(ptrs)),
                    "window pointers")

        got = torch.zeros((COUNT,), dtype=torch.float32, device="cuda")
        compiled(report, "exchange", exchange, D, W, from_dlpack(got))(D, W, from_dlpack(got))
        torch.cuda.synchronize()
        prev_rank = (rank - lsa_rank) + (lsa_rank - 1) % lsa
        i = np.arange(COUNT)
        report.compare(got.cpu().numpy(), (100000 + prev_rank * 1000 + i % 1000).astype(np.float32),
                       "peer_pointer writes ordered by the LSA barrier session (arrive, wait, sync, destroy)")

        for dtype, np_dtype in ((torch.float32, np.float32), (torch.int32, np.int32)):
            def values(r):
                return ((r + np.arange(COUNT)) % 7 + 1).astype(np_dtype)
            bufs[0][:COUNT * 4].view(dtype).copy_(torch.from_numpy(values(rank)))
            dst = torch.zeros((COUNT,), dtype=dtype, device="cuda")
            torch.cuda.synchronize()
            comm.all_reduce(torch.zeros(1, device="cuda"))  # every rank's window written
            torch.cuda.synchronize()
            what = f"lsa_reduce_sum {np.dtype(np_dtype).name}"
            if release_has(*REDUCE):
                compiled(report, what, reduce_sum, D, W, from_dlpack(dst))(D, W, from_dlpack(dst))
                torch.cuda.synchronize()
                want = sum(values(r).astype(np.int64) for r in range(nranks)).astype(np_dtype)
                report.compare(dst.cpu().numpy(), want, f"{what}: the LSA team's sum")
            else:
                refused(report, lambda: compiled(report, what, reduce_sum, D, W, from_dlpack(dst)), what)

        src = torch.from_numpy(((rank + 1) * 10 + np.arange(COUNT) % 5).astype(np.float32)).cuda()
        if release_has(*COPIES):
            views = (D, from_dlpack(src), nc.Window(wins[1]), nc.Window(wins[2]))
            compiled(report, "copies", copies, *views)(*views)
            torch.cuda.synchronize()
            comm.all_reduce(torch.zeros(1, device="cuda"))
            torch.cuda.synchronize()
            gathered = bufs[1].view(torch.float32)[:lsa * COUNT].cpu().numpy().reshape(lsa, COUNT)
            first = rank - lsa_rank
            want = np.stack([((first + q + 1) * 10 + np.arange(COUNT) % 5).astype(np.float32) for q in range(lsa)])
            report.compare(gathered, want, "lsa_copy: every LSA rank's slice in this rank's window (all-gather)")
            report.compare(bufs[2].view(torch.float32)[:COUNT].cpu().numpy(), lsa * want[0],
                           "lsa_reduce_sum_copy: the team's sum of their slice 0 (LSA rank 0's) in every window")
        else:
            refused(report, lambda: compiled(report, "copies", copies, D, from_dlpack(src), nc.Window(wins[1]),
                                             nc.Window(wins[2])),
                    "lsa_copy and lsa_reduce_sum_copy")

        gin_index = gin_and_multimem_refused(report, dev, win)
        if gin_index is not None:
            report.check(True, "GIN present: the GIN kernel is compiled (not run: no GIN-capable network to check it)")
        comm.all_reduce(torch.zeros(1, device="cuda"))
        torch.cuda.synchronize()
        for w in wins:
            w.close()
        dev.close()
    except Exception:  # noqa: BLE001 - a failure in one rank is reported, not hidden
        traceback.print_exc()
        report.check(False, "no exception")
    finally:
        comm.destroy()
    print(f"rank {rank}: {report.passed} passed, {report.failed} failed", flush=True)
    sys.exit(1 if report.failed else 0)


def main():
    if sys.argv[1:2] == ["--compile-only"]:  # [PART/PARTS]
        part, parts = (int(n) for n in (sys.argv[2] if len(sys.argv) > 2 else "0/1").split("/"))
        return compile_only(part, parts)
    nranks = launch.ranks_to_run(sys.argv[1:], launch.torch_gpu_count())
    if nranks is None:
        return 0
    os.environ["CUTE_RANKS_GPU"] = "1"
    print(f"ncclbind uses {NCCL}", flush=True)
    return launch.run_ranks(rank_main, nranks, (launch.free_port(),), timeout=280, name="cute_ranks")


if __name__ == "__main__":
    sys.exit(main())
