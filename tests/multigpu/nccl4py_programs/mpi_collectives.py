"""MPI, one GPU per process, every collective as nccl4py's documentation calls it."""
import cupy as cp
from mpi4py import MPI

import ncclbind as nccl  # an nccl4py program: import nccl.core as nccl

mpi = MPI.COMM_WORLD
rank, nranks = mpi.Get_rank(), mpi.Get_size()
cp.cuda.Device(rank % cp.cuda.runtime.getDeviceCount()).use()

uid = nccl.get_unique_id(empty=rank != 0)  # rank 0 makes the id, the others receive it in place
mpi.Bcast(uid.as_ndarray, root=0)
comm = nccl.Communicator.init(nranks, rank, uid)
assert (comm.rank, comm.nranks) == (rank, nranks)

n = 1024
total = nranks * (nranks + 1) / 2
failures = []


def newer(what, call):
    """Runs call; on an NCCL release that predates its function (not an nccl4py case: nccl4py binds
    one release), says so and skips the check instead of failing."""
    try:
        call()
        return True
    except Exception as e:  # noqa: BLE001 - only ncclbind's "first appears in" is expected
        if "first appears in" not in str(e):
            raise
        print(f"rank {rank}: {what} skipped: {e}", flush=True)
        return False


def expect(name, array, wanted):
    cp.cuda.Device().synchronize()
    if not bool(cp.all(array == wanted)):
        failures.append(f"{name}: {array[:4].get()} != {wanted if cp.isscalar(wanted) else wanted[:4].get()}")


x = cp.full(n, rank + 1, dtype=cp.float32)
comm.allreduce(x, x, nccl.SUM)
expect("allreduce in place", x, total)

x = cp.full(n, rank + 1, dtype=cp.float32)
comm.reduce(x, x, nccl.SUM)  # no root: every rank gets the sum (nccl4py's meaning)
expect("reduce without a root", x, total)

x, out = cp.full(n, rank + 1, dtype=cp.float64), cp.zeros(n, dtype=cp.float64)
comm.reduce(x, out, nccl.MAX, root=0)
expect("reduce to root 0", out, nranks if rank == 0 else 0)

b = cp.full(n, 7 if rank == 0 else 0, dtype=cp.int32)
comm.broadcast(b, b, root=0)
expect("broadcast", b, 7)

send, gathered = cp.full(n, rank, dtype=cp.float32), cp.zeros(n * nranks, dtype=cp.float32)
comm.allgather(send, gathered)
expect("allgather", gathered, cp.repeat(cp.arange(nranks, dtype=cp.float32), n))

big, part = cp.ones(n * nranks, dtype=cp.float32), cp.zeros(n, dtype=cp.float32)
comm.reduce_scatter(big, part, nccl.SUM)
expect("reduce_scatter", part, nranks)

blocks, received = cp.full(n * nranks, rank, dtype=cp.int64), cp.zeros(n * nranks, dtype=cp.int64)
if newer("alltoall", lambda: comm.alltoall(blocks, received)):
    expect("alltoall", received, cp.repeat(cp.arange(nranks, dtype=cp.int64), n))

every = cp.zeros(n * nranks, dtype=cp.float32)
comm.gather(send, every)  # no root: every rank gathers (all-gather)
expect("gather without a root", every, cp.repeat(cp.arange(nranks, dtype=cp.float32), n))

to_root = cp.zeros(n * nranks, dtype=cp.float32) if rank == 0 else None
if newer("gather to a root", lambda: comm.gather(send, to_root, root=0)) and rank == 0:
    expect("gather to root 0", to_root, cp.repeat(cp.arange(nranks, dtype=cp.float32), n))

ring_out, ring_in = cp.full(n, rank, dtype=cp.float32), cp.full(n, -1, dtype=cp.float32)
with nccl.group():
    comm.send(ring_out, (rank + 1) % nranks)
    comm.recv(ring_in, (rank - 1) % nranks)
expect("send/recv ring", ring_in, (rank - 1) % nranks)

comm.destroy()
if failures:
    raise SystemExit(f"rank {rank}: FAILED " + "; ".join(failures))
print(f"OK mpi_collectives rank {rank}/{nranks} on device {cp.cuda.Device().id}", flush=True)
