"""MPI: CuTe DSL kernels over nccl4py 0.6.0's nccl.core.device.cute (its documented surface): a
DevComm with an LSA barrier, a symmetric window, an all-reduce of the LSA team's windows
(lsa_reduce_sum between two barrier syncs) and a kernel reading every peer's window through
lsa_pointer, each result checked element by element. Needs the CuTe DSL (nvidia-cutlass-dsl) on
PYTHONPATH; without it, it says so and fails unless NCCLBIND_CUTE_OPTIONAL=1. run.sh runs it
when PROGRAMS names it (the CuTe DSL from nccl_wheels.sh cute)."""
import os
import sys

import cupy as cp
from mpi4py import MPI

import ncclbind as nccl  # an nccl4py program: import nccl.core as nccl

try:
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack
except ImportError as error:
    print(f"SKIP cute_all_reduce: no CuTe DSL ({error})", flush=True)
    sys.exit(0 if os.environ.get("NCCLBIND_CUTE_OPTIONAL") == "1" else 1)

import ncclbind.device.cute as nccl_cute  # nccl4py: import nccl.core.device.cute as nccl_cute

N = 1024      # float32 elements per rank
THREADS = 256


@cute.kernel
def reduce_kernel(dev_comm: nccl_cute.DevComm, send: nccl_cute.Window, out: cute.Tensor):
    coop = nccl_cute.cta()
    bar = nccl_cute.lsa_default(coop, dev_comm, 0)
    bar.sync(coop, nccl_cute.MemoryOrder.RELAXED)
    src = send.tensor(cutlass.Float32, cute.make_layout(N))
    nccl_cute.lsa_reduce_sum(coop, send, src, out, N, team=dev_comm.team_lsa)
    bar.sync(coop, nccl_cute.MemoryOrder.RELEASE)
    bar.destroy()


@cute.jit
def reduce(dev_comm: nccl_cute.DevComm, send: nccl_cute.Window, out: cute.Tensor):
    reduce_kernel(dev_comm, send, out).launch(grid=[1, 1, 1], block=[THREADS, 1, 1])


@cute.kernel
def peers_kernel(dev_comm: nccl_cute.DevComm, send: nccl_cute.Window, out: cute.Tensor):
    """out[peer] = element 0 of every LSA peer's window, read through lsa_pointer; out[-1] the
    LSA team's size."""
    t, _, _ = cute.arch.thread_idx()
    coop = nccl_cute.cta()
    bar = nccl_cute.lsa_default(coop, dev_comm, 0)
    bar.sync(coop, nccl_cute.MemoryOrder.RELAXED)
    if t == 0:
        out[cute.size(out) - 1] = cutlass.Float32(dev_comm.lsa_size)
    if t < dev_comm.lsa_size:
        peer = cute.make_tensor(cute.make_ptr(cutlass.Float32, send.lsa_pointer(0, t)), cute.make_layout(1))
        out[t] = peer[0]
    bar.sync(coop, nccl_cute.MemoryOrder.RELEASE)
    bar.destroy()


@cute.jit
def peers(dev_comm: nccl_cute.DevComm, send: nccl_cute.Window, out: cute.Tensor):
    peers_kernel(dev_comm, send, out).launch(grid=[1, 1, 1], block=[THREADS, 1, 1])


mpi = MPI.COMM_WORLD
rank, nranks = mpi.Get_rank(), mpi.Get_size()
cp.cuda.Device(rank % cp.cuda.runtime.getDeviceCount()).use()
uid = mpi.bcast(nccl.get_unique_id() if rank == 0 else None, root=0)
comm = nccl.Communicator.init(nranks, rank, uid)

dev_comm = comm.create_dev_comm(nccl.NCCLDevCommRequirements(lsa_barrier_count=1))
send = nccl.cupy.empty(N, dtype=cp.float32)
send[:] = cp.arange(N, dtype=cp.float32) + rank + 1
window = comm.register_window(send, nccl.WindowFlag.CollSymmetric)
out = cp.full(N, -1, dtype=cp.float32)
first = cp.full(nranks + 1, -1, dtype=cp.float32)  # one host: the LSA team is every rank
cp.cuda.Device().synchronize()

reduce(nccl_cute.DevComm(dev_comm), nccl_cute.Window(window), from_dlpack(out))
peers(nccl_cute.DevComm(dev_comm), nccl_cute.Window(window), from_dlpack(first))
cp.cuda.Device().synchronize()

got = first.get().tolist()
assert got[-1] == nranks, f"LSA team of {got[-1]}, not every rank of this host ({nranks})"
want = sum(cp.arange(N, dtype=cp.float32) + r + 1 for r in range(nranks))
assert bool(cp.all(out == want)), (out[:4].get(), want[:4].get())
assert got[:-1] == [float(r + 1) for r in range(nranks)], got

window.close()
dev_comm.close()
comm.destroy()
print(f"OK cute_all_reduce rank {rank}/{nranks} (NCCL {nccl.get_version()})", flush=True)
