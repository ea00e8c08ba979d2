"""The one-shot all-reduce of oneshot_bench.py as CuTe DSL kernels over ncclbind.device.cute:

- `reduce`: per block, LSA barrier, lsa_reduce_sum of its chunk, LSA barrier (the C++ and Numba
  kernels' algorithm; NCCL 2.29.7 or newer);
- `peer`: the same with the sum done by the kernel over peer_pointer(team_lsa) loads, which every
  release has (2.28.9 too): the kernel that compares ncclbind's bitcode (2.28.9) with NCCL's
  (2.32.3).

`iterations` repeats barrier-reduce-barrier inside one launch (the device work alone).
OneShot(kind, dev, win, dst) compiles once (compile_s) and launches with run(count, iterations)."""
import time

import cutlass
import cutlass.cute as cute

import ncclbind.device.cute as nc

THREADS = 256


@cute.jit
def _chunk(count, b, g):
    """(first, n): block b's share of `count` elements over g blocks."""
    per = (count + g - 1) // g
    first = per * b
    n = count - first
    if n > per:
        n = per
    if n < 0:
        n = 0
    return first, n


@cute.kernel
def reduce_kernel(dev_comm: nc.DevComm, win: nc.Window, dst: cute.Tensor, count: cutlass.Int32,
                  iterations: cutlass.Int32):
    b, _, _ = cute.arch.block_idx()
    g, _, _ = cute.arch.grid_dim()
    coop = nc.cta()
    lsa = dev_comm.team_lsa
    bar = nc.lsa_session(coop, dev_comm, lsa, dev_comm.lsa_barrier, b)
    first, n = _chunk(count, b, g)
    one = cute.make_layout(1)
    src = win.tensor(cutlass.Float32, one, first * 4)
    out = cute.make_tensor(dst.iterator + first, one)
    for _ in cutlass.range(iterations):
        bar.sync(coop, nc.MemoryOrder.RELAXED)
        nc.lsa_reduce_sum(coop, win, src, out, n, team=lsa)
        bar.sync(coop, nc.MemoryOrder.RELEASE)
    bar.destroy()


@cute.kernel
def peer_kernel(dev_comm: nc.DevComm, win: nc.Window, dst: cute.Tensor, count: cutlass.Int32,
                iterations: cutlass.Int32):
    t, _, _ = cute.arch.thread_idx()
    b, _, _ = cute.arch.block_idx()
    g, _, _ = cute.arch.grid_dim()
    coop = nc.cta()
    lsa = dev_comm.team_lsa
    bar = nc.lsa_session(coop, dev_comm, lsa, dev_comm.lsa_barrier, b)
    first, n = _chunk(count, b, g)
    layout = cute.make_layout(1 << 20)
    for _ in cutlass.range(iterations):
        bar.sync(coop, nc.MemoryOrder.RELAXED)
        for i in cutlass.range(first + t, first + n, THREADS):
            acc = cutlass.Float32(0.0)
            for p in cutlass.range(lsa.nRanks):
                acc += cute.make_tensor(cute.make_ptr(cutlass.Float32, win.peer_pointer(0, p, lsa)), layout)[i]
            dst[i] = acc
        bar.sync(coop, nc.MemoryOrder.RELEASE)
    bar.destroy()


@cute.jit
def reduce_launch(dev_comm: nc.DevComm, win: nc.Window, dst: cute.Tensor, count: cutlass.Int32,
                  iterations: cutlass.Int32, blocks: cutlass.Int32):
    reduce_kernel(dev_comm, win, dst, count, iterations).launch(grid=[blocks, 1, 1], block=[THREADS, 1, 1])


@cute.jit
def peer_launch(dev_comm: nc.DevComm, win: nc.Window, dst: cute.Tensor, count: cutlass.Int32,
                iterations: cutlass.Int32, blocks: cutlass.Int32):
    peer_kernel(dev_comm, win, dst, count, iterations).launch(grid=[blocks, 1, 1], block=[THREADS, 1, 1])


PROGRAMS = {"reduce": reduce_launch, "peer": peer_launch}
NEEDS = {"reduce": ("ncclLsaReduceSum_F32",), "peer": ()}


def compile_kernel(kind, dev_comm, win, dst, options=""):
    """The compiled program and its compile time in seconds."""
    start = time.time()
    compiled = cute.compile(PROGRAMS[kind], dev_comm, win, dst, cutlass.Int32(1), cutlass.Int32(1),
                            cutlass.Int32(1), options=options)
    return compiled, time.time() - start


class OneShot:
    """One kind's kernel compiled for a DevCommResource, a window and a destination tensor (a
    cute.Tensor, e.g. from_dlpack of a torch tensor), launched with run(count, iterations)."""

    def __init__(self, kind, dev, win, dst, blocks_for):
        self.args = (nc.DevComm(dev), nc.Window(win), dst)
        self.blocks_for = blocks_for
        self.compiled, self.compile_s = compile_kernel(kind, *self.args)

    def run(self, count, iterations=1):
        self.compiled(*self.args, count, iterations, self.blocks_for(count))
